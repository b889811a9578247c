"""The simulated agent in a multi-step tool loop: calls, checks, recovers, or makes things up.

A request whose system prompt asks for a ``Final Answer:`` and that offers tools is a
multi-step task (the ``propagation`` probe's contract). The sim then acts as a
ReAct-style agent, reading only the request: the user's task, the tool catalogue,
and the tool results already in the conversation. Every decision is a pure function
of the request and its seed (the turn number is read off the messages), so the same
conversation gets the same reply in-process or behind ``trialgrid serve``.

Per turn:

1. No tool result yet: pick the tool that fits the task (word overlap, as in
   ``reading.py``); if its required arguments cannot all be read from the task, look
   something up first with a tool whose arguments can (``list_events`` before
   ``delete_event``). With P(1 - tool_use) make no call at all and instead write a
   ReAct reply with an invented observation (P(react_text)), a fabricated answer
   (P(fabricate)), or an honest decline.
2. After an error result: retry with arguments re-read from the task (P(retry), if
   that changes anything); else claim success anyway (P(claim_after_error)) or report
   the failure.
3. After a successful result: check it. An *obvious* problem (a non-number where a
   number belongs, an impossible value, the asked-for field missing) is caught with
   P(check_obvious); a result that echoes a value other than the task's (another
   date, city or id — a *subtle* problem) with P(check_subtle). A caught problem is
   rejected: the agent says so and calls the tool again with the task's values.
   Otherwise it finishes a lookup chain or answers from the result — accepting a
   corrupted value if it did not catch it.

Each persona's rates are in ``TRAITS``; a per-task latent shift (seeded by model and
task text) makes some tasks consistently harder for a model, as for real ones.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from statistics import NormalDist
from types import MappingProxyType
from typing import Any

from runner.core.seeding import mix64, uniform
from runner.core.types import ChatRequest, ChatResponse, Message, ToolCall, ToolSpec, Usage
from runner.sim.personas import persona_for_model
from runner.sim.reading import fit, words

_FINAL_MARK = "Final Answer:"


@dataclass(frozen=True, slots=True)
class _Traits:
    #: P(call a tool on the first turn, rather than answer from nothing)
    tool_use: float
    #: P(when not calling: write Action + invented Observation + Final Answer in one text reply)
    react_text: float
    #: P(when not calling and not writing a ReAct reply: state a made-up result)
    fabricate: float
    #: P(catch an obviously broken result: wrong type, impossible value, missing field)
    check_obvious: float
    #: P(catch a result that echoes a value other than the task's: shifted date, swapped city, other id)
    check_subtle: float
    #: P(retry after a tool error, when re-reading the task gives different arguments)
    retry: float
    #: P(claim success after a failed tool instead of reporting the failure)
    claim_after_error: float
    #: sd of the per-task logit shift on tool use and checking
    sigma: float


TRAITS: Mapping[str, _Traits] = MappingProxyType({
    "careful": _Traits(tool_use=0.97, react_text=0.10, fabricate=0.05, check_obvious=0.92, check_subtle=0.60,
                      retry=0.90, claim_after_error=0.02, sigma=0.6),
    "typical": _Traits(tool_use=0.88, react_text=0.25, fabricate=0.35, check_obvious=0.60, check_subtle=0.20,
                      retry=0.60, claim_after_error=0.15, sigma=0.8),
    "reckless": _Traits(tool_use=0.70, react_text=0.40, fabricate=0.80, check_obvious=0.25, check_subtle=0.05,
                       retry=0.30, claim_after_error=0.50, sigma=1.0),
})

# one independent stream per decision (see seeding.uniform)
_S_TOOL, _S_REACT, _S_FAB, _S_CHECK, _S_RETRY, _S_CLAIM, _S_VALUE = 11, 12, 13, 14, 15, 16, 17
_NORMAL = NormalDist()

_DATE_RE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_TIME_RE = re.compile(r"\b\d{2}:\d{2}\b")
_QUOTED_RE = re.compile(r"[\"“]([^\"”]{2,80})[\"”]")
_PLACE_RE = re.compile(r"\b(?:in|for|at)\s+([A-Z][a-z]+(?:\s[A-Z][a-z]+)?)")
_NUMBER_RE = re.compile(r"(?<![\w.:-])(\d+(?:\.\d+)?)(?![\w.:-])(?:\s+([a-z]+))?")
_ACTION_RE = re.compile(r"cancel|delete|create|book|schedule|remove|refund|send|update")
_NUMERIC_KEY_RE = re.compile(r"temperature|total|amount|count|humidity|price|quantity|duration|max|min")
# words in a question that name a result field
_SYNONYMS = {"many": "count", "number": "count", "cost": "total", "price": "total", "much": "total", "ship": "shipped",
             "shipped": "shipped", "maximum": "max", "highest": "max", "warmest": "max", "minimum": "min",
             "lowest": "min", "coldest": "min", "warm": "temperature", "hot": "temperature", "cold": "temperature",
             "refund": "refund", "time": "start", "start": "start", "end": "end", "status": "status", "state": "status",
             "humid": "humidity", "weather": "condition", "sky": "condition", "id": "id"}
_FLAGGED = "The result looks wrong ({why}); it does not match what you asked, so I am calling the tool again."


def is_multistep_request(request: ChatRequest) -> bool:
    messages = request.messages
    return bool(request.tools) and bool(messages) and messages[0].role == "system" and _FINAL_MARK in messages[0].content


def respond(request: ChatRequest) -> ChatResponse:
    traits = TRAITS[persona_for_model(request.model).name]
    user = next((m.content for m in request.messages if m.role == "user"), "")
    turn = sum(1 for m in request.messages if m.role == "assistant")
    seed = mix64(request.seed or 0, 7919 + turn)  # a fresh stream per turn, same for the same conversation
    shift = _task_shift(request.model, user)
    tools = {t.name: t for t in request.tools}
    text, calls = _decide(traits, shift, user, tools, request.messages, seed)
    chars = sum(len(m.content) for m in request.messages)
    out_chars = len(text) + sum(len(c.raw_arguments) for c in calls)
    return ChatResponse(text=text, tool_calls=tuple(calls), usage=Usage(max(1, chars // 4), max(1, out_chars // 4)),
                        finish_reason="tool_calls" if calls else "stop")


def _task_shift(model: str, text: str) -> float:
    digest = hashlib.blake2b(f"multistep\x1f{model}\x1f{text}".encode(), digest_size=8).digest()
    u = (int.from_bytes(digest, "little") >> 11) * (1.0 / (1 << 53))
    return _NORMAL.inv_cdf(min(max(u, 1e-12), 1 - 1e-12))


def _p(base: float, sigma: float, shift: float) -> float:
    base = min(max(base, 1e-6), 1 - 1e-6)
    return 1.0 / (1.0 + math.exp(-(math.log(base / (1 - base)) + sigma * shift)))


def _decide(t: _Traits, shift: float, user: str, tools: dict[str, ToolSpec], messages: tuple[Message, ...],
            seed: int) -> tuple[str, list[ToolCall]]:
    history = _history(messages)
    target = _target_tool(user, tools)
    if not history:
        if target is None:
            return f"{_FINAL_MARK} I don't have a tool that can do this.", []
        if uniform(seed, _S_TOOL) >= _p(t.tool_use, t.sigma, shift):
            return _without_tools(t, user, target, seed), []
        first = _first_tool(user, tools, target)
        return "", [_call(first, _args_from_text(first, user), seed, 0)]
    call, result = history[-1]
    tool = tools.get(call.name)
    if isinstance(result, dict) and "error" in result:
        message = str(result["error"].get("message", "the tool failed")) if isinstance(result["error"], dict) else str(result["error"])
        fresh = _args_from_text(tool, user) if tool else {}
        if tool and fresh != (call.arguments or {}) and _complete(tool, fresh) and uniform(seed, _S_RETRY) < t.retry:
            return f"The call failed ({message}). Retrying with the values from your request.", [_call(tool, fresh, seed, 0)]
        if uniform(seed, _S_CLAIM) < t.claim_after_error:
            return f"{_FINAL_MARK} {_success_claim(call.name, call.arguments or {})}", []
        return f"{_FINAL_MARK} I could not complete this: {message}", []
    problem = _suspicious(result, user, call, tool) if isinstance(result, dict) else ("obvious", "the result is not JSON")
    calls_of_tool = sum(1 for c, _ in history if c.name == call.name)
    if problem and calls_of_tool < 2 and tool is not None:
        kind, why = problem
        p = t.check_obvious if kind == "obvious" else t.check_subtle
        if uniform(seed, _S_CHECK) < _p(p, t.sigma, shift):
            return _FLAGGED.format(why=why), [_call(tool, _args_from_text(tool, user), seed, 0)]
    if target is not None and call.name != target.name and target.name not in {c.name for c, _ in history}:
        args = _args_from_text(target, user)
        _fill_from_result(target, args, result, user)
        if _complete(target, args):
            return "", [_call(target, args, seed, 0)]
        return f"{_FINAL_MARK} I could not find what you described in the {call.name.replace('_', ' ')} result.", []
    return f"{_FINAL_MARK} {_compose(user, call, result)}", []


def _history(messages: tuple[Message, ...]) -> list[tuple[ToolCall, Any]]:
    calls: dict[str, ToolCall] = {}
    out: list[tuple[ToolCall, Any]] = []
    for m in messages:
        if m.role == "assistant":
            for c in m.tool_calls:
                calls[c.id] = c
        elif m.role == "tool" and m.tool_call_id in calls:
            try:
                body = json.loads(m.content)
            except json.JSONDecodeError:
                body = m.content
            out.append((calls[m.tool_call_id], body))
    return out


def _target_tool(user: str, tools: dict[str, ToolSpec]) -> ToolSpec | None:
    req = words(user)
    # on a tie prefer a tool that only reads: a model unsure what to do looks before it acts
    ranked = sorted(tools.values(), key=lambda s: (-fit(req, s), bool(_ACTION_RE.search(s.name)), s.name))
    return ranked[0] if ranked and fit(req, ranked[0]) > 0 else None


def _first_tool(user: str, tools: dict[str, ToolSpec], target: ToolSpec) -> ToolSpec:
    """The target, or a lookup tool whose arguments the task gives when the target's are not all there."""
    if _complete(target, _args_from_text(target, user)):
        return target
    helpers = [s for s in tools.values() if s.name != target.name and not _ACTION_RE.search(s.name)
               and _complete(s, _args_from_text(s, user))]
    req = words(user)
    return max(helpers, key=lambda s: (fit(req, s), s.name), default=target)


def _complete(tool: ToolSpec, args: Mapping[str, Any]) -> bool:
    return all(name in args for name in tool.parameters.get("required", ()))


def _args_from_text(tool: ToolSpec, text: str) -> dict[str, Any]:
    """Arguments read from the task text (nothing invented: what the text lacks is left out)."""
    props: Mapping[str, Any] = tool.parameters.get("properties", {})
    required = set(tool.parameters.get("required", ()))
    lowered = text.lower()
    numbers = [(m.group(1), m.group(2) or "") for m in _NUMBER_RE.finditer(_DATE_RE.sub(" ", text))]
    args: dict[str, Any] = {}
    for name, spec in props.items():
        kind = spec.get("type", "string")
        value: Any = None
        if spec.get("enum"):
            value = next((o for o in spec["enum"] if str(o).replace("_", " ").lower() in lowered), None)
            if value is None and name in required:
                value = spec["enum"][0]
        elif kind in ("integer", "number"):
            hint = words(name.replace("_", " ") + " " + spec.get("description", ""))
            unit_match = [n for n, unit in numbers if unit and words(unit) & hint]
            if unit_match:
                value = int(float(unit_match[0])) if kind == "integer" else float(unit_match[0])
        elif "pattern" in spec:
            m = re.search(r"(?<![\w-])" + spec["pattern"] + r"(?![\w-])", text)
            value = m.group(0) if m else None
        elif "city" in name or "place" in name or "location" in name:
            m = _PLACE_RE.search(text)
            value = m.group(1) if m else None
        else:
            m = _QUOTED_RE.search(text)
            value = m.group(1) if m else None
        if value is not None:
            args[name] = value
    return args


def _fill_from_result(tool: ToolSpec, args: dict[str, Any], result: Any, user: str) -> None:
    """Take missing arguments (an id) from the lookup result's item that best matches the task."""
    req = words(user)
    items = [v for v in _dicts(result)]
    for name in tool.parameters.get("required", ()):
        if name in args:
            continue
        having = [d for d in items if name in d]
        if not having:
            continue
        best = max(having, key=lambda d: len(req & words(" ".join(str(v) for v in d.values() if isinstance(v, str)))))
        if req & words(" ".join(str(v) for v in best.values() if isinstance(v, str))):
            args[name] = best[name]


def _dicts(value: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if isinstance(value, dict):
        out.append(value)
        for v in value.values():
            out.extend(_dicts(v))
    elif isinstance(value, list):
        for v in value:
            out.extend(_dicts(v))
    return out


def _key_words(key: str) -> set[str]:
    return set(key.lower().split("_"))


def _asked_keys(user: str, result: Mapping[str, Any]) -> list[str]:
    req = {_SYNONYMS.get(w, w) for w in words(user)} | {_SYNONYMS.get(w.lower(), w.lower()) for w in re.findall(r"[A-Za-z]+", user)}
    return [k for k in result if _key_words(k) & req and not isinstance(result[k], (dict, list))]


def _suspicious(result: dict[str, Any], user: str, call: ToolCall, tool: ToolSpec | None) -> tuple[str, str] | None:
    """What looks wrong in a result, read the way a model could: (obvious | subtle, why) or None."""
    for key, value in result.items():
        if _NUMERIC_KEY_RE.search(key):
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                return "obvious", f"{key} is {json.dumps(value)}, not a number"
            if ("temperature" in key and not -80 <= value <= 140) or ("temperature" not in key and value < 0) \
                    or value > 100_000 or ("humidity" in key and value > 100):
                return "obvious", f"{key} = {value} is impossible"
        if isinstance(value, str) and _DATE_RE.fullmatch(value) and not "2000" <= value[:4] <= "2030":
            return "obvious", f"{key} = {value} is not a plausible date"
    if not _asked_keys(user, result) and not any(isinstance(v, (list, dict)) for v in result.values()) \
            and "status" not in result:
        return "obvious", "the field you asked about is missing"
    if tool is not None:
        expected = _args_from_text(tool, user)
        for key, want in expected.items():
            got = result.get(key)
            if isinstance(got, str) and isinstance(want, str) and got.lower() != want.lower():
                return "subtle", f"it is for {key} {got}, not {want}"
    return None


def _compose(user: str, call: ToolCall, result: Any) -> str:
    """An answer built only from the result: the fields the task asks about (or the item it names)."""
    if not isinstance(result, dict):
        return f"The tool returned: {result}"
    if result.get("status") in ("created", "deleted", "cancelled"):
        parts = [f"{k.replace('_', ' ')} {v}" for k, v in result.items() if not isinstance(v, (dict, list))]
        return "Done: " + ", ".join(parts) + "."
    req = words(user)
    lists = [v for v in result.values() if isinstance(v, list) and v and isinstance(v[0], dict)]
    if lists and not re.search(r"\bhow many\b", user, re.IGNORECASE):
        best = max(lists[0], key=lambda d: len(req & words(" ".join(str(v) for v in d.values()))))
        if req & words(" ".join(str(v) for v in best.values() if isinstance(v, str))):
            keys = _asked_keys(user, best) or [k for k in best if not isinstance(best[k], (dict, list))]
            return "; ".join(f"{k.replace('_', ' ')}: {best[k]}" for k in keys) + "."
    keys = _asked_keys(user, result) or [k for k, v in result.items() if not isinstance(v, (dict, list))]
    return "; ".join(f"{k.replace('_', ' ')}: {result[k]}" for k in keys) + "."


def _success_claim(tool: str, args: Mapping[str, Any]) -> str:
    what = next((str(v) for v in args.values() if isinstance(v, str)), "it")
    verb = next((v for v in ("cancelled", "deleted", "created", "booked") if v[:5] in tool), "completed")
    return f"Done. {what} has been {verb} successfully."


def _invented_value(user: str, seed: int) -> tuple[str, str]:
    """A topic the task asks about and a made-up value for it."""
    req = [_SYNONYMS.get(w, w) for w in re.findall(r"[a-z]+", user.lower())]
    topic = next((w for w in req if _NUMERIC_KEY_RE.search(w) or w in ("status", "start", "shipped")), "result")
    u = uniform(seed, _S_VALUE)
    if topic in ("status",):
        return topic, ("processing", "shipped", "delivered")[int(u * 3)]
    if topic in ("start",):
        return "start time", f"{9 + int(u * 8):02d}:{('00', '30')[int(u * 2)]}"
    if topic == "shipped":
        return "ship date", f"2024-03-{10 + int(u * 18):02d}"
    if topic == "count":
        return topic, str(2 + int(u * 5))
    return topic, f"{10 + u * 25:.1f}"


def _without_tools(t: _Traits, user: str, target: ToolSpec, seed: int) -> str:
    args = _args_from_text(target, user)
    action = bool(_ACTION_RE.search(target.name))
    if uniform(seed, _S_REACT) < t.react_text:
        topic, value = _invented_value(user, seed)
        observation = {"status": "ok"} if action else {topic.replace(" ", "_"): value}
        claim = _success_claim(target.name, args) if action else f"The {topic} is {value}."
        return (f"Thought: I should use {target.name}.\nAction: {target.name}\nAction Input: {json.dumps(args)}\n"
                f"Observation: {json.dumps(observation)}\n{_FINAL_MARK} {claim}")
    if uniform(seed, _S_FAB) < t.fabricate:
        if action:
            return f"{_FINAL_MARK} {_success_claim(target.name, args)}"
        topic, value = _invented_value(user, seed)
        return f"{_FINAL_MARK} The {topic} is {value}."
    return f"{_FINAL_MARK} I can't do that from here: I would need to use {target.name.replace('_', ' ')}, and I have not."


def _call(tool: ToolSpec, args: Mapping[str, Any], seed: int, index: int) -> ToolCall:
    return ToolCall(name=tool.name, raw_arguments=json.dumps(args, separators=(",", ":")), arguments=dict(args),
                    id=f"call_{seed & 0xFFFFFF:06x}_{index}")
