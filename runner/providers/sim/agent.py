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
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from statistics import NormalDist
from typing import Any, Mapping

from runner.providers.sim.personas import Persona, persona_for_model
from runner.providers.sim.reading import Reading, read
from runner.seeding import uniform
from runner.types import ChatRequest, ChatResponse, ToolCall, Usage

_NORMAL = NormalDist()


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def _expit(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


# Salts: one independent stream per decision, so adding a decision never shifts others.
_S_WIDE, _S_CHAIN, _S_ASK, _S_OFF, _S_ARGS = 1, 2, 3, 4, 100

_ID_RE = re.compile(r"\b(?:[A-Z]{2,}-?\d{2,}|#\d{3,}|\d{5,}|[a-z]+_[A-Za-z0-9]{6,})\b")
_EMAIL_RE = re.compile(r"\b[\w.+-]+@[\w-]+\.[\w.]+\b")
_DATE_RE = re.compile(r"\b\d{4}-\d{2}(?:-\d{2})?\b")
_NUM_RE = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])")
_QUOTED_RE = re.compile(r"[\"“']([^\"”']{2,80})[\"”']")
_ENTITY_FIELD_RE = re.compile(r"vendor|provider|service|integration|platform|source|system|carrier|app\b|company|account_name|partner|processor|host|gateway|tool")


class _Prompt:
    """Per (model, prompt, catalogue) facts, computed once and cached."""

    __slots__ = ("reading", "shift_wide", "shift_ask", "found", "input_tokens")

    def __init__(self, model: str, text: str, reading: Reading, input_chars: int) -> None:
        self.reading = reading
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
        }
        self.input_tokens = max(1, input_chars // 4)


class SimProvider:
    """Provider ``sim``: answers in-process with the simulated agent. No key, no network."""

    name = "sim"
    _CACHE_LIMIT = 100_000

    def __init__(self) -> None:
        self._cache: dict[tuple, _Prompt] = {}

    async def complete(self, request: ChatRequest) -> ChatResponse:
        return self.respond(request)

    async def aclose(self) -> None:
        return None

    def respond(self, request: ChatRequest) -> ChatResponse:
        persona = persona_for_model(request.model)
        text = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
        names = tuple(t.name for t in request.tools)
        key = (request.model, text, frozenset(names))
        prompt = self._cache.get(key)
        if prompt is None:
            if len(self._cache) >= self._CACHE_LIMIT:
                self._cache.clear()
            chars = sum(len(m.content) for m in request.messages) + sum(
                len(t.name) + len(t.description) + 40 * len(t.parameters.get("properties", {})) for t in request.tools)
            prompt = _Prompt(request.model, text, read(text, request.tools), chars)
            self._cache[key] = prompt
        seed = request.seed if request.seed is not None else 0
        calls, reply = self._decide(persona, prompt, names, seed)
        out_chars = len(reply) + sum(len(c.raw_arguments) + len(c.name) for c in calls)
        return ChatResponse(
            text=reply,
            tool_calls=tuple(calls),
            usage=Usage(prompt.input_tokens, max(1, out_chars // 4)),
            finish_reason="tool_calls" if calls else "stop",
        )

    def _decide(self, persona: Persona, prompt: _Prompt, names: tuple[str, ...], seed: int) -> tuple[list[ToolCall], str]:
        r = prompt.reading
        state = r.entity.state
        calls: list[ToolCall] = []
        if r.broad is not None:
            logit = _logit(persona.reach_wide[state]) + persona.sigma * prompt.shift_wide
            if names.index(r.broad) < 3:
                logit += math.log(persona.position_boost)
            if uniform(seed, _S_WIDE) < _expit(logit):
                calls.append(self._call(persona, prompt, r.broad, r.broad_schema, seed, 0))
                if r.specific is not None and uniform(seed, _S_CHAIN) < persona.chain:
                    calls.append(self._call(persona, prompt, r.specific, r.specific_schema, seed, 1))
                return calls, ""
        ask_p = _expit(_logit(persona.ask[state]) + persona.sigma * prompt.shift_ask)
        if r.specific is None or uniform(seed, _S_ASK) < ask_p:
            return [], _ask_text(r)
        if r.runner_up is not None and uniform(seed, _S_OFF) < persona.off_target:
            return [self._call(persona, prompt, r.runner_up, r.runner_up_schema, seed, 0)], ""
        return [self._call(persona, prompt, r.specific, r.specific_schema, seed, 0)], ""

    def _call(self, persona: Persona, prompt: _Prompt, tool: str, schema: Mapping[str, Any], seed: int, index: int) -> ToolCall:
        args = fill_arguments(persona, prompt, schema, seed, salt=_S_ARGS + 16 * index)
        raw = json.dumps(args, separators=(",", ":"))
        return ToolCall(name=tool, raw_arguments=raw, arguments=args, id=f"call_{seed & 0xFFFFFF:06x}_{index}")


def _ask_text(r: Reading) -> str:
    if r.entity.state == "unnamed" and r.entity.surface:
        return f"Before I do that: which one is {r.entity.surface.lower()}? Please give me its name."
    if r.entity.state == "unfamiliar" and r.entity.surface:
        return f"I'm not familiar with {r.entity.surface}. Can you confirm which system that is?"
    return "Could you give me a bit more detail about what you need?"


def fill_arguments(persona: Persona, prompt: _Prompt, schema: Mapping[str, Any], seed: int, salt: int) -> dict[str, Any]:
    """Fill a tool's arguments from the request text; invent what is missing at the persona's rate."""
    props: Mapping[str, Any] = schema.get("properties", {}) or {}
    required = set(schema.get("required", []) or [])
    entity = prompt.reading.entity
    found = prompt.found
    args: dict[str, Any] = {}
    for i, (field, spec) in enumerate(props.items()):
        if field not in required:
            continue
        kind = spec.get("type", "string") if isinstance(spec, Mapping) else "string"
        value: Any = None
        lname = field.lower()
        if isinstance(spec, Mapping) and spec.get("enum"):
            value = spec["enum"][0]
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
        elif ("date" in lname or "month" in lname or "period" in lname or "since" in lname) and found["dates"]:
            value = found["dates"][0]
        elif found["ids"] and ("id" in lname or "number" in lname or "ref" in lname):
            value = found["ids"][0].lstrip("#")
        elif found["quoted"]:
            value = found["quoted"][0]
        if value is None:
            if uniform(seed, salt + i) >= persona.invent:
                continue  # leave it out rather than guess
            value = _invent(field, kind, seed, salt + i)
        args[field] = value
    return args


def _invent(field: str, kind: str, seed: int, salt: int) -> Any:
    """A plausible but ungrounded value, the kind a model makes up."""
    u = uniform(seed, salt + 7)
    if kind == "integer":
        return 1 + int(u * 30)
    if kind == "number":
        return round(10 + u * 490, 2)
    lname = field.lower()
    if _ENTITY_FIELD_RE.search(lname):
        return ("primary", "default", "main")[int(u * 3)]
    if "email" in lname:
        return "customer@example.com"
    if "date" in lname or "month" in lname or "period" in lname:
        return "2026-10-01"
    return f"{lname.split('_')[0]}_{int(u * 1e6):06d}"
