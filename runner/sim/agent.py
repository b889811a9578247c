"""The simulated agent: a deterministic, persona-driven stand-in for a tool-calling model.

It sees only what a real model would see (messages and the tool catalogue, in the
order shown) plus the trial seed, and answers with text and/or tool calls. Given the
same request and seed it always answers the same way, in-process or behind
``trialgrid serve``.

Decision for one request (documented in the README, section "The simulated agent"):

1. Read the last user message (``reading.read``): entity state, best narrow tool,
   broad tool.
2. The prompt's latent shift z ~ N(0, 1), seeded by (model, prompt text), moves the
   persona's base rates on the logit scale by ``sigma * z``: the same prompt is
   consistently easy or hard for one model.
3. With the trial seed: reach for the broad tool with P(reach_wide) (odds times
   ``position_boost`` if the broad tool is listed in the first three); when it did,
   also call the specific tool with P(chain). Otherwise ask the user with P(ask);
   otherwise call the specific tool (or, with P(off_target), the runner-up).
4. Arguments come from the tool's JSON schema, filled from the request text; a
   required value the text does not give is invented with P(invent), else left out.
   When that value is an identifier, contact, time zone or confirmation (not the
   entity referent, which step 3 already weighed), the agent asks for it instead
   with P(ask_missing). Each optional argument is added, schema-legal but
   unrequested, with P(pad); a call's argument JSON comes out broken with P(garble).
5. A request with no tools whose system prompt asks for ``phantom_fields`` is an
   audit, answered by the sim auditor (``auditor.py``).
6. A request with tools whose system prompt asks for a ``Final Answer:`` is a step
   of a multi-step task (``multistep.py``); one with no tools whose system prompt
   asks for a ``VERDICT:`` is a correctness-judging request (``judging.py``).
7. A request that ends with tool results (any other agent loop) is answered by
   ``followup.py``: one more call when the task needs it (a broad lookup done, the
   specific tool not yet called), else an answer in words — so loops end.
8. ``tool_choice`` (``choice.py``): the decision above is kept when it is legal under
   the requested choice, and otherwise withheld (``none``) or replaced by one forced
   call (``required`` / a named tool).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from operator import attrgetter
from statistics import NormalDist
from typing import Any

from runner.core.seeding import uniform
from runner.core.types import ChatRequest, ChatResponse, ToolCall, Usage, parse_tool_arguments
from runner.providers.errors import ErrorKind, ProviderError
from runner.sim.auditor import audit, is_audit_request
from runner.sim.choice import legal, unknown_tool, withheld
from runner.sim.followup import after_results, calls_since_user
from runner.sim.judging import is_judge_request
from runner.sim.judging import respond as judge_respond
from runner.sim.multistep import is_multistep_request
from runner.sim.multistep import respond as multistep_respond
from runner.sim.oracle import is_oracle
from runner.sim.oracle import respond as oracle_respond
from runner.sim.personas import Persona, persona_for_model
from runner.sim.reading import Reading, read

_NORMAL = NormalDist()


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def _expit(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


# Salts: one independent stream per decision, so adding a decision never shifts others.
_S_WIDE, _S_CHAIN, _S_ASK, _S_OFF, _S_ARGS = 1, 2, 3, 4, 100
_S_ASK_MISSING, _S_GARBLE, _S_PAD = 5, 6, 60

# Required values the agent should get from the user rather than make up. Entity
# referents (vendor, provider...) are not here: the entity-state ask rates cover them.
_MUST_COME_FROM_USER_RE = re.compile(
    r"(?:^|_)(?:id|ids|number|no|token|code|email|phone|timezone|tz|confirm\w*|account|address|sku|ref|reference|"
    r"iban|card|password|otp|pin)(?:$|_)")
_CONFIRM_RE = re.compile(r"confirm|approv|consent|acknowledg")
_SAID_YES_RE = re.compile(r"\b(?:i confirm|confirmed|yes,? (?:go ahead|do it|please)|go ahead|approved)\b", re.IGNORECASE)

_ID_RE = re.compile(r"\b(?:[A-Z]{2,}-?\d{2,}|#\d{3,}|\d{5,}|[a-z]+_[A-Za-z0-9]{6,})\b")
_EMAIL_RE = re.compile(r"\b[\w.+-]+@[\w-]+\.[\w.]+\b")
_DATE_RE = re.compile(r"\b\d{4}-\d{2}(?:-\d{2})?\b")
_NUM_RE = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])")
_QUOTED_RE = re.compile(r"[\"“']([^\"”']{2,80})[\"”']")
_DATETIME_RE = re.compile(r"\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2})?\b")
_PHONE_RE = re.compile(r"\+\d[\d ()-]{6,}\d")
_ZONE_RE = re.compile(r"\b(?:UTC|GMT|[A-Z][a-z]+/[A-Z][A-Za-z_]+)\b")
_DAY_RE = re.compile(r"\b(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day\b")
_PLACE_FIELD_RE = re.compile(r"name|city|store|location|place|site|branch|title")
_ENTITY_FIELD_RE = re.compile(r"vendor|provider|service|integration|platform|source|system|carrier|app\b|company|account_name|partner|processor|host|gateway|tool")


class _Prompt:
    """Per (model, prompt, catalogue) facts, computed once and cached."""

    __slots__ = (
        "found",
        "input_tokens",
        "p_ask",
        "p_wide_back",
        "p_wide_front",
        "plans",
        "reading",
        "replies",
        "shift_ask",
        "shift_wide",
        "text",
    )

    def __init__(self, persona: Persona, model: str, text: str, reading: Reading, input_chars: int) -> None:
        self.text = text
        self.reading = reading
        #: id(schema) → (schema, its argument plan): what ``_fill_arguments`` decides without the seed
        self.plans: dict[int, tuple[Mapping[str, Any], tuple[tuple[Any, ...], ...]]] = {}
        #: reply text → the words-only response to this prompt with that text
        self.replies: dict[str, ChatResponse] = {}
        digest = hashlib.blake2b(f"{model}\x1f{text}".encode(), digest_size=16).digest()
        u1 = (int.from_bytes(digest[:8], "little") >> 11) * (1.0 / (1 << 53))
        u2 = (int.from_bytes(digest[8:], "little") >> 11) * (1.0 / (1 << 53))
        self.shift_wide = _NORMAL.inv_cdf(min(max(u1, 1e-12), 1 - 1e-12))
        self.shift_ask = _NORMAL.inv_cdf(min(max(u2, 1e-12), 1 - 1e-12))
        self.found = {
            "ids": _ID_RE.findall(text),
            "emails": _EMAIL_RE.findall(text),
            "dates": _DATE_RE.findall(text),
            "numbers": _NUM_RE.findall(text),
            "quoted": _QUOTED_RE.findall(text),
            "datetimes": _DATETIME_RE.findall(text),
            "phones": _PHONE_RE.findall(text),
            "zones": _ZONE_RE.findall(text),
            "days": _DAY_RE.findall(text),
        }
        self.input_tokens = max(1, input_chars // 4)
        # the prompt's own rates: the persona's base rate moved by the prompt's latent shift
        state = reading.entity.state
        wide = _logit(persona.reach_wide[state]) + persona.sigma * self.shift_wide
        self.p_wide_back = _expit(wide)
        self.p_wide_front = _expit(wide + math.log(persona.position_boost))
        self.p_ask = _expit(_logit(persona.ask[state]) + persona.sigma * self.shift_ask)


class SimProvider:
    """Provider ``sim``: answers in-process with the simulated agent. No key, no network."""

    name = "sim"
    _CACHE_LIMIT = 100_000

    def __init__(self) -> None:
        self._cache: dict[tuple[Any, ...], _Prompt] = {}

    async def complete(self, request: ChatRequest) -> ChatResponse:
        return self.respond(request)

    async def aclose(self) -> None:
        return None

    def respond(self, request: ChatRequest) -> ChatResponse:
        """The reply to ``request``, obeying its ``tool_choice`` (``choice.py``)."""
        choice = request.tool_choice
        problem = unknown_tool(choice, request.tools)
        if problem is not None:
            raise ProviderError(ErrorKind.FATAL, problem, status_code=400)
        answer = self._answer(request)
        if legal(choice, answer.tool_calls, request.tools):
            return answer
        if choice == "none":
            return withheld(answer)
        if choice != "required":  # a named tool: keep the agent's own call to it when it made one
            own = tuple(c for c in answer.tool_calls if c.name == choice)[:1]
            if own:
                return ChatResponse(text="", tool_calls=own, usage=answer.usage, finish_reason="tool_calls")
        return self._forced(request, None if choice == "required" else choice)

    def _answer(self, request: ChatRequest) -> ChatResponse:
        """The reply under ``tool_choice: auto``."""
        if is_oracle(request.model):  # the answer key's own answer (oracle.py)
            return oracle_respond(request)
        if not request.tools and is_audit_request(request):
            return audit(request)
        if is_multistep_request(request):  # the propagation probe's agent loop (multistep.py)
            return multistep_respond(request)
        if not request.tools and is_judge_request(request):  # the judge probe (judging.py)
            return judge_respond(request)
        names = tuple(map(_NAME, request.tools))
        persona, prompt = self._prompt(request, names)
        seed = request.seed if request.seed is not None else 0
        if request.messages and request.messages[-1].role == "tool":
            return after_results(self, persona, prompt, request, seed)
        calls, reply = self._decide(persona, prompt, names, seed)
        if not calls:  # words only: the same reply object for every trial that gives it (responses are frozen)
            hit = prompt.replies.get(reply)
            if hit is None:
                hit = prompt.replies[reply] = ChatResponse(
                    text=reply, usage=Usage(prompt.input_tokens, max(1, len(reply) // 4)), finish_reason="stop")
            return hit
        out_chars = len(reply) + sum(len(c.raw_arguments) + len(c.name) for c in calls)
        return ChatResponse(text=reply, tool_calls=tuple(calls), usage=_usage(prompt.input_tokens, max(1, out_chars // 4)),
                            finish_reason="tool_calls")

    def _prompt(self, request: ChatRequest, names: tuple[str, ...] | None = None) -> tuple[Persona, _Prompt]:
        """The persona and the cached per-prompt facts (reading, latent shifts) of ``request`` (``names``: its
        tools' names, when the caller has them)."""
        persona = persona_for_model(request.model)
        text = ""
        for m in reversed(request.messages):  # the last user message
            if m.role == "user":
                text = m.content
                break
        if names is None:
            names = tuple(map(_NAME, request.tools))
        key = (request.model, text, frozenset(names))
        prompt = self._cache.get(key)
        if prompt is None:
            if len(self._cache) >= self._CACHE_LIMIT:
                self._cache.clear()
            chars = sum(len(m.content) for m in request.messages) + sum(
                len(t.name) + len(t.description) + 40 * len(t.parameters.get("properties", {})) for t in request.tools)
            prompt = _Prompt(persona, request.model, text, read(text, request.tools), chars)
            self._cache[key] = prompt
        return persona, prompt

    def _forced(self, request: ChatRequest, tool: str | None) -> ChatResponse:
        """One call forced by ``tool_choice`` (``required``: the tool the agent reads as best; else ``tool``)."""
        persona, prompt = self._prompt(request)
        r = prompt.reading
        schemas = {t.name: t.parameters for t in request.tools}
        name = tool or r.specific or r.runner_up or r.broad or request.tools[0].name
        earlier = calls_since_user(request)
        seed = request.seed if request.seed is not None else 0
        call = self._call(persona, prompt, name, schemas[name], seed, len(earlier))
        return ChatResponse(text="", tool_calls=(call,),
                            usage=Usage(prompt.input_tokens, max(1, (len(call.raw_arguments) + len(name)) // 4)),
                            finish_reason="tool_calls")

    def _decide(self, persona: Persona, prompt: _Prompt, names: tuple[str, ...], seed: int) -> tuple[list[ToolCall], str]:
        r = prompt.reading
        calls: list[ToolCall] = []
        if r.broad is not None:
            p_wide = prompt.p_wide_front if names.index(r.broad) < 3 else prompt.p_wide_back
            if uniform(seed, _S_WIDE) < p_wide:
                calls.append(self._call(persona, prompt, r.broad, r.broad_schema, seed, 0))
                if r.specific is not None and uniform(seed, _S_CHAIN) < persona.chain:
                    calls.append(self._call(persona, prompt, r.specific, r.specific_schema, seed, 1))
                return calls, ""
        if r.specific is None or uniform(seed, _S_ASK) < prompt.p_ask:
            return [], _ask_text(r)
        missing: list[str] = []
        if r.runner_up is not None and uniform(seed, _S_OFF) < persona.off_target:
            call = self._call(persona, prompt, r.runner_up, r.runner_up_schema, seed, 0, missing)
        else:
            call = self._call(persona, prompt, r.specific, r.specific_schema, seed, 0, missing)
        if missing and uniform(seed, _S_ASK_MISSING) < persona.ask_missing:
            return [], _ask_missing_text(missing)
        return [call], ""

    def _call(self, persona: Persona, prompt: _Prompt, tool: str, schema: Mapping[str, Any], seed: int, index: int,
              missing: list[str] | None = None) -> ToolCall:
        args = _fill_arguments(persona, prompt, schema, seed, salt=_S_ARGS + 16 * index, missing=missing)
        raw = _to_json(args)
        call_id = f"call_{seed & 0xFFFFFF:06x}_{index}"
        if persona.garble and uniform(seed, _S_GARBLE + 16 * index) < persona.garble:
            # a truncated argument string, kept as the model "sent" it: a broken call, not an abstention
            broken = raw[:-1]
            error = parse_tool_arguments(broken)[1] or "not a JSON object"
            return ToolCall(name=tool, raw_arguments=broken, arguments=None, id=call_id, parse_error=error)
        return ToolCall(name=tool, raw_arguments=raw, arguments=args, id=call_id)


_NAME = attrgetter("name")

_USAGES: dict[tuple[int, int], Usage] = {}


def _usage(input_tokens: int, output_tokens: int) -> Usage:
    """``Usage(input_tokens, output_tokens)``, one shared object per pair (they are frozen; counts recur)."""
    key = (input_tokens, output_tokens)
    usage = _USAGES.get(key)
    if usage is None:
        if len(_USAGES) >= 100_000:
            _USAGES.clear()
        usage = _USAGES[key] = Usage(input_tokens, output_tokens)
    return usage

_JSON_CACHE: dict[tuple[Any, ...], str] = {}


def _to_json(args: dict[str, Any]) -> str:
    """``json.dumps`` of flat argument dicts, memoised: the same arguments recur across trials."""
    try:  # types in the key: True == 1 == 1.0 as dict keys, but not as JSON
        key = tuple((k, v.__class__, v) for k, v in args.items())
        raw = _JSON_CACHE.get(key)
    except TypeError:  # a nested (unhashable) value
        return json.dumps(args, separators=(",", ":"))
    if raw is None:
        if len(_JSON_CACHE) >= 4_096:  # the arguments that recur are few: the hit rate is that of 100,000
            _JSON_CACHE.clear()
        raw = _JSON_CACHE[key] = json.dumps(args, separators=(",", ":"))
    return raw


def _ask_text(r: Reading) -> str:
    if r.entity.state == "unnamed" and r.entity.surface:
        return f"Before I do that: which one is {r.entity.surface.lower()}? Please give me its name."
    if r.entity.state == "unfamiliar" and r.entity.surface:
        return f"I'm not familiar with {r.entity.surface}. Can you confirm which system that is?"
    return "Could you give me a bit more detail about what you need?"


def _ask_missing_text(missing: list[str]) -> str:
    wanted = " and the ".join(f.replace("_", " ") for f in missing[:2])
    return f"I can do that, but I need the {wanted} first. Could you send it?"


# the steps of an argument plan (``_plan``): one per schema field that may get a value
_STATED, _PAD, _REQUIRED = 0, 1, 2


def _fill_arguments(persona: Persona, prompt: _Prompt, schema: Mapping[str, Any], seed: int, salt: int,
                   missing: list[str] | None = None) -> dict[str, Any]:
    """Fill a tool's arguments from the request text; invent what is missing at the persona's rate.

    Required values the user must supply (``_MUST_COME_FROM_USER_RE``) that the text
    lacks are appended to ``missing`` whether invented or left out, so the caller can
    decide to ask instead. What does not depend on the seed (which value the text
    gives each field) is worked out once per prompt and schema (``_plan``); a trial
    only draws its seeded choices.
    """
    hit = prompt.plans.get(id(schema))
    if hit is None or hit[0] is not schema:
        hit = prompt.plans[id(schema)] = (schema, _plan(persona, prompt, schema))
    args: dict[str, Any] = {}
    for step, field, i, value, must_ask in hit[1]:
        if step == _STATED:
            args[field] = value
        elif step == _PAD:
            if uniform(seed, salt + _S_PAD + i) < persona.pad:
                args[field] = _pad_value(field, value, seed, salt + _S_PAD + i)
        else:  # a required value the text does not give
            if must_ask and missing is not None:
                missing.append(field)
            if uniform(seed, salt + i) < persona.invent:
                args[field] = _invent(field, value, seed, salt + i)
    return args


def _plan(persona: Persona, prompt: _Prompt, schema: Mapping[str, Any]) -> tuple[tuple[Any, ...], ...]:
    """The seed-free part of ``_fill_arguments`` for one schema: per field, in order, ``(step, field, index,
    value, must_ask)``. ``_STATED``: the value the text gives. ``_PAD``: an optional field padded at the
    persona's rate (value: its spec). ``_REQUIRED``: a required field the text does not fill, invented at the
    persona's rate (value: its JSON type; ``must_ask``: the user must supply it)."""
    props: Mapping[str, Any] = schema.get("properties", {}) or {}
    required = set(schema.get("required", []) or [])
    entity = prompt.reading.entity
    found = prompt.found
    steps: list[tuple[Any, ...]] = []
    for i, (field, spec) in enumerate(props.items()):
        if field not in required:
            stated = _stated_optional(field, prompt)
            if stated is not None:
                steps.append((_STATED, field, i, stated, False))
            elif persona.pad:
                steps.append((_PAD, field, i, spec, False))
            continue
        kind = spec.get("type", "string") if isinstance(spec, dict) else "string"
        value: Any = None
        lname = field.lower()
        if isinstance(spec, dict) and spec.get("enum"):
            value = spec["enum"][0]
        elif kind == "boolean" and _CONFIRM_RE.search(lname):
            # a confirmation is only grounded when the user gave it
            value = True if _SAID_YES_RE.search(prompt.text) else None
        elif kind in ("integer", "number"):
            if found["numbers"]:
                value = int(float(found["numbers"][0])) if kind == "integer" else float(found["numbers"][0])
        elif kind == "boolean":
            value = False
        elif _ENTITY_FIELD_RE.search(lname):
            if entity.state in ("known", "unfamiliar"):
                value = entity.surface
        elif "email" in lname and found["emails"]:
            value = found["emails"][0]
        elif ("timezone" in lname or lname in ("tz", "time_zone")) and found["zones"]:
            value = found["zones"][-1]
        elif "time" in lname and "zone" not in lname and found["datetimes"]:
            value = found["datetimes"][0]
        elif ("date" in lname or "month" in lname or "period" in lname or "since" in lname) and found["dates"]:
            value = found["dates"][0]
        elif "phone" in lname and found["phones"]:
            value = found["phones"][0].replace(" ", "")
        elif lname in ("day", "weekday") and found["days"]:
            value = found["days"][0]
        elif found["ids"] and ("id" in lname or "number" in lname or "ref" in lname):
            value = found["ids"][0].lstrip("#")
        elif found["quoted"]:
            value = found["quoted"][0]
        elif entity.state in ("known", "unfamiliar") and _PLACE_FIELD_RE.search(lname):
            value = entity.surface
        if value is not None:
            steps.append((_STATED, field, i, value, False))
        else:
            must_ask = bool(_MUST_COME_FROM_USER_RE.search(lname)) and not _ENTITY_FIELD_RE.search(lname)
            steps.append((_REQUIRED, field, i, kind, must_ask))
    return tuple(steps)


def _stated_optional(field: str, prompt: _Prompt) -> Any:
    """An optional argument's value when the request states it unmistakably, else None.

    Only specific matches count (a named entity, an email, a date, a time zone...):
    the loose fallbacks used for required fields (any quoted string) would put
    unrequested values into optional fields.
    """
    lname = field.lower()
    found = prompt.found
    entity = prompt.reading.entity
    if _ENTITY_FIELD_RE.search(lname):
        return entity.surface if entity.state in ("known", "unfamiliar") else None
    if "email" in lname and found["emails"]:
        return found["emails"][0]
    if ("timezone" in lname or lname in ("tz", "time_zone")) and found["zones"]:
        return found["zones"][-1]
    if "date" in lname and found["dates"]:
        return found["dates"][0]
    if lname in ("day", "weekday") and found["days"]:
        return found["days"][0]
    return None


def _pad_value(field: str, spec: Any, seed: int, salt: int) -> Any:
    """A schema-legal value for an optional argument nobody asked for."""
    if not isinstance(spec, dict):
        return _invent(field, "string", seed, salt)
    if spec.get("enum"):
        options = spec["enum"]
        return options[int(uniform(seed, salt + 3) * len(options))]
    if "default" in spec and spec["default"] not in (None, ""):
        return spec["default"]
    kind = spec.get("type", "string")
    if kind == "boolean":
        return True
    if kind == "array":
        return [_invent(field, "string", seed, salt)]
    if kind == "object":
        return {}
    return _invent(field, kind if kind in ("integer", "number") else "string", seed, salt)


def _invent(field: str, kind: str, seed: int, salt: int) -> Any:
    """A plausible but ungrounded value, the kind a model makes up."""
    u = uniform(seed, salt + 7)
    if kind == "integer":
        return 1 + int(u * 30)
    if kind == "number":
        return round(10 + u * 490, 2)
    if kind == "boolean":
        return True  # an invented confirmation or flag
    lname = field.lower()
    if "timezone" in lname or lname in ("tz", "time_zone"):
        return ("America/New_York", "UTC", "Europe/London")[int(u * 3)]
    if _CONFIRM_RE.search(lname) or "token" in lname:
        return f"CONF-{int(u * 1e6):06d}"
    if _ENTITY_FIELD_RE.search(lname):
        return ("primary", "default", "main")[int(u * 3)]
    if "email" in lname:
        return "customer@example.com"
    if "date" in lname or "month" in lname or "period" in lname:
        return "2026-10-01"
    return f"{lname.split('_')[0]}_{int(u * 1e6):06d}"
