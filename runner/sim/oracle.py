"""The ``oracle`` persona of the simulated agent: it answers every case as the case's key says.

``provider: sim, model: oracle`` calls the expected tool with the expected arguments, asks where asking is
right, declines where no call is right, and audits a trace by naming exactly its gold phantoms. It proves a
case file passable: a case the oracle fails is a case no agent can pass (``trialgrid check``), which is a
mistake in the case, not in the model. It is not a model of any agent, so its rates measure nothing else.

A real model sees only the request; the oracle also reads the answer key. The keys are learned from the
probes a sweep loads (``learn``, called by ``runner.config.load_sweep`` when a model is the oracle) and found
again by the request's fingerprint: its messages and the names of the tools offered (the order is shuffled
per trial, so it is not part of the fingerprint). Two cases that make the same request with different keys
cannot both be passed by anyone: the first learned keeps the fingerprint, and the other fails — which is the
truth about it. Requests it has no key for (another process's sweep, a multi-step probe) are a fatal error
saying so, never a guess. Keys cover the single-turn probes: ``negative``, ``misselection`` and ``phantom``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from runner.core.types import ChatRequest, ChatResponse, Message, ToolCall, Usage
from runner.probes import Probe, bfcl_checker
from runner.probes.bfcl_source import java_text, js_text
from runner.probes.misselection import MisselectionProbe
from runner.probes.negative import NegativeCase, NegativeProbe
from runner.probes.phantom import PhantomProbe
from runner.providers.errors import ErrorKind, ProviderError

#: the persona's name, as a sim model string spells it (``oracle``, ``sim-oracle``)
ORACLE = "oracle"
#: probe kinds whose cases the oracle can answer
KINDS = (NegativeProbe.kind, MisselectionProbe.kind, PhantomProbe.kind)

_ASK = ("I can do that once I have everything it needs. Could you tell me the {fields}? "
        "I would rather ask than guess.")
_DECLINE = "I won't do that without more from you."

#: fingerprint of a request → the answer its key gives
_ANSWERS: dict[str, ChatResponse] = {}


def fingerprint(messages: Iterable[Message], tool_names: Iterable[str]) -> str:
    blob = json.dumps([[(m.role, m.content) for m in messages], sorted(tool_names)], ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def learn(probes: Sequence[Probe]) -> None:
    """Remember the answer to every request these probes will make (probes of other kinds are skipped).

    Within one sweep the first case of a request keeps it; a later load replaces what an earlier one taught
    (a case file edited between two loads in one process is answered as it is now).
    """
    learned: dict[str, ChatResponse] = {}
    for probe in probes:
        if isinstance(probe, NegativeProbe):
            for case, _tools, messages, names, *_rest in probe._by_id.values():
                learned.setdefault(fingerprint(messages, names), negative_answer(case))
        elif isinstance(probe, MisselectionProbe):
            for triple in probe.triples:
                call = ToolCall(name=triple.expected_tool, raw_arguments="{}", arguments={}, id="call_0")
                answer = _reply("", (call,))
                for condition in probe.conditions:
                    phrasing = getattr(triple, condition)
                    if phrasing is not None:
                        learned.setdefault(fingerprint((probe._system, Message("user", phrasing)), probe._names),
                                            answer)
        elif isinstance(probe, PhantomProbe):
            for trace, per_condition in probe._by_id.values():
                text = json.dumps({"phantom_fields": list(trace.gold_phantoms or ())})
                for user, _baseline in per_condition.values():
                    learned.setdefault(fingerprint((probe._system, user), ()), _reply(text, ()))
    _ANSWERS.update(learned)


@lru_cache(maxsize=256)
def is_oracle(model: str) -> bool:
    """Whether a sim model string names the oracle: its first token naming a persona is ``oracle``.

    Cached: asked once per simulated request of a sweep's few model strings (``PERSONAS`` is read-only)."""
    from runner.sim.personas import PERSONAS, _split

    return next((t for t in _split(model) if t in PERSONAS or t == ORACLE), None) == ORACLE


def respond(request: ChatRequest) -> ChatResponse:
    """The key's answer to ``request``; a fatal error when the oracle holds no key for it."""
    answer = _ANSWERS.get(fingerprint(request.messages, (t.name for t in request.tools)))
    if answer is None:
        raise ProviderError(ErrorKind.FATAL, "the oracle holds no answer key for this request: it answers the "
                            f"cases of {', '.join(KINDS)} probes of a sweep loaded in this process")
    return answer


def negative_answer(case: NegativeCase) -> ChatResponse:
    """What passes ``case``: its expected calls with their expected arguments, or a question, or words."""
    expect = case.expect_action
    calls: list[ToolCall] = []
    if case.expect_calls:
        calls += [_call(want.tool, want.args, len(calls), _required(case, want.tool)) for want in case.expect_calls]
    if expect not in (None, "ask_user", "no_call", "any_call") and expect not in {c.name for c in calls}:
        calls.insert(0, _call(expect, case.expect_args, len(calls), _required(case, expect)))
    if expect == "any_call" and not calls:
        tool = next((t for t in _tool_names(case) if t not in case.must_not_call), None)
        if tool is not None:
            calls.append(_call(tool, {}, 0))
    if calls:
        return _reply("", tuple(_as_source(case, c) for c in calls))
    if expect == "ask_user":
        fields = [f.rpartition(".")[2].replace("_", " ") for f in (case.allow_ask_fields or list(case.sentinels))]
        return _reply(_ASK.format(fields=" and ".join(fields) or "details I need"), ())
    return _reply(_DECLINE, ())


def _as_source(case: NegativeCase, call: ToolCall) -> ToolCall:
    """A call of an imported BFCL Java or JavaScript case, its values written as code (as BFCL asks)."""
    if case.bfcl is None or call.arguments is None:
        return call
    lang = bfcl_checker.language(case.bfcl.category)
    if lang == "python":
        return call
    doc = next((f for f in case.bfcl.functions if bfcl_checker.call_name(f["name"]) == call.name), None)
    props = ((doc or {}).get("parameters") or {}).get("properties") or {}
    text = java_text if lang == "java" else js_text
    args = {k: text(v, props[k]) if isinstance(props.get(k), dict) and "type" in props[k] else v
            for k, v in call.arguments.items()}
    return ToolCall(name=call.name, raw_arguments=json.dumps(args, ensure_ascii=False), arguments=args, id=call.id)


def _tool_names(case: NegativeCase) -> list[str]:
    names = []
    for tool in case.tools or ():
        if isinstance(tool, Mapping):
            body = tool.get("function", tool)
            if isinstance(body, Mapping) and isinstance(body.get("name"), str):
                names.append(body["name"])
    return names


def _required(case: NegativeCase, tool: str) -> frozenset[str]:
    """The arguments BFCL's function document requires (an optional expected value is still sent for them)."""
    if case.bfcl is None:
        return frozenset()
    doc = next((f for f in case.bfcl.functions if bfcl_checker.call_name(f["name"]) == tool), None)
    return frozenset(((doc or {}).get("parameters") or {}).get("required") or ())


def _call(tool: str, expected: Mapping[str, Any], index: int, required: frozenset[str] = frozenset()) -> ToolCall:
    """The first value of each expected argument; an optional one left out unless the schema requires it."""
    args = {name: value for name, want in expected.items() if (value := _value(want, keep=name in required)) is not _OMIT}
    raw = json.dumps(args, ensure_ascii=False)
    return ToolCall(name=tool, raw_arguments=raw, arguments=args, id=f"call_{index}")


#: an expected argument the oracle leaves out
_OMIT = object()


def _value(want: Any, keep: bool = False) -> Any:
    """The first value an expected argument accepts (an expected null is sent as null, which BFCL wants
    explicit); ``_OMIT`` for an optional one, unless ``keep`` (the schema requires it)."""
    if isinstance(want, Mapping) and "one_of" in want and set(want) <= {"one_of", "optional"}:
        if want.get("optional") and not keep:
            return _OMIT  # left out: always allowed (BFCL lists "" for it)
        options = want.get("one_of") or [None]
        return _value(options[0])
    if isinstance(want, Mapping):
        return {k: v for k, w in want.items() if (v := _value(w)) is not _OMIT}
    if isinstance(want, list):
        return [_value(w) for w in want]
    return want


def _reply(text: str, calls: tuple[ToolCall, ...]) -> ChatResponse:
    out_chars = len(text) + sum(len(c.raw_arguments) + len(c.name) for c in calls)
    return ChatResponse(text=text, tool_calls=calls, usage=Usage(1, max(1, out_chars // 4)),
                        finish_reason="tool_calls" if calls else "stop")
