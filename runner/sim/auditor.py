"""The simulated auditor: a stand-in for a model asked which tool-call arguments are ungrounded.

The ``phantom`` probe sends a finished trace (context and calls, as JSON in the user
message) with a system prompt demanding ``{"phantom_fields": [...]}``. The sim reads
the trace the way a model would — from the text it was shown, never from the gold
labels, which the probe does not send — and sorts every argument value into one of:

- ``literal``: its normalised form occurs in the context shown (grounded);
- ``related``: not literally there, but sharing words with the context (a
  paraphrase, e.g. ``wrong_size`` for "it's the wrong size");
- ``derived-looking``: a number, date or snake_case label with no support — what a
  reader may wave through as "probably computed or a category";
- ``unsupported``: anything else with no support.

Personas set how often each class is flagged: ``strict`` over-flags paraphrases,
``lenient`` under-flags derived-looking values, ``flaky`` breaks the JSON contract
and the connection. Every draw is a pure function of the request seed, so a retry
(the probe sends a new seed) can come out differently, as a real retry can.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from runner.core.jsonwalk import contained, leaves, normalise, numbers_in, top_field
from runner.core.seeding import uniform
from runner.core.types import ChatRequest, ChatResponse, Usage
from runner.providers.errors import ErrorKind, ProviderError
from runner.sim.reading import words

_CONTRACT_KEY = '"phantom_fields"'


@dataclass(frozen=True, slots=True)
class AuditorPersona:
    name: str
    summary: str
    #: P(flag) by value class
    flag_literal: float
    flag_related: float
    flag_derived: float
    flag_unsupported: float
    #: P(the reply breaks the JSON contract: prose, wrong key, bare list, truncated)
    break_contract: float
    #: P(the reply is wrapped in a markdown fence, which the contract allows)
    fence: float
    #: P(a transport error instead of a reply)
    transport: float
    #: the agent persona this model acts with when handed tools instead of a trace
    agent: str


AUDITORS: Mapping[str, AuditorPersona] = MappingProxyType({
    a.name: a
    for a in (
        AuditorPersona("balanced", "flags what it cannot find; mostly right about paraphrases and derivations",
                       flag_literal=0.01, flag_related=0.15, flag_derived=0.75, flag_unsupported=0.92,
                       break_contract=0.03, fence=0.2, transport=0.0, agent="careful"),
        AuditorPersona("strict", "flags anything not verbatim in the context, paraphrases included",
                       flag_literal=0.02, flag_related=0.75, flag_derived=0.95, flag_unsupported=0.97,
                       break_contract=0.03, fence=0.1, transport=0.0, agent="careful"),
        AuditorPersona("lenient", "gives the benefit of the doubt: waves through derived-looking values",
                       flag_literal=0.0, flag_related=0.05, flag_derived=0.3, flag_unsupported=0.8,
                       break_contract=0.05, fence=0.3, transport=0.0, agent="typical"),
        AuditorPersona("flaky", "a balanced judge behind a bad connection that often ignores the output format",
                       flag_literal=0.01, flag_related=0.15, flag_derived=0.75, flag_unsupported=0.92,
                       break_contract=0.25, fence=0.4, transport=0.15, agent="typical"),
    )
})

_S_TRANSPORT, _S_BREAK, _S_BREAK_KIND, _S_FENCE, _S_FIELD = 201, 202, 203, 204, 300
_LABEL_RE = re.compile(r"^[a-z]+(?:_[a-z]+)+$")
_DATE_RE = re.compile(r"^\d{4}-\d{2}(?:-\d{2})?")


def _split(model: str) -> list[str]:
    return [t for t in re.split(r"[-_:/@.]", model.lower()) if t]


def auditor_for_model(model: str) -> AuditorPersona | None:
    """``auditor-strict`` → strict; plain ``auditor`` → balanced; no auditor token → None."""
    tokens = _split(model)
    for token in tokens:
        if token in AUDITORS:
            return AUDITORS[token]
    return AUDITORS["balanced"] if "auditor" in tokens else None


def is_audit_request(request: ChatRequest) -> bool:
    return any(m.role == "system" and _CONTRACT_KEY in m.content for m in request.messages)


def _trace_of(request: ChatRequest) -> Mapping[str, Any] | None:
    text = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
    start = text.find("{")
    if start < 0:
        return None
    try:
        obj, _ = json.JSONDecoder().raw_decode(text[start:])
    except json.JSONDecodeError:
        return None
    return obj if isinstance(obj, Mapping) else None


def classify(value: Any, context: str, context_numbers: set[str], context_words: set[str]) -> str:
    if contained(value, context, context_numbers):
        return "literal"
    text = value if isinstance(value, str) else json.dumps(value)
    if words(text.replace("_", " ")) & context_words:
        return "related"
    if isinstance(value, (int, float)) or _DATE_RE.match(text) or _LABEL_RE.match(text):
        return "derived"
    return "unsupported"


def judge(trace: Mapping[str, Any], persona: AuditorPersona, seed: int) -> list[str]:
    """The fields this persona flags in ``trace`` (as shown to it), in call order."""
    ctx = trace.get("context") or {}
    shown = json.dumps(ctx, ensure_ascii=False) if isinstance(ctx, Mapping) else str(ctx)
    context = normalise(shown)
    numbers = numbers_in(context)
    context_words = words(shown)
    rate = {"literal": persona.flag_literal, "related": persona.flag_related,
            "derived": persona.flag_derived, "unsupported": persona.flag_unsupported}
    flagged: list[str] = []
    n = 0
    for call in trace.get("calls") or []:
        if not isinstance(call, Mapping):
            continue
        tool = call.get("tool") or call.get("name") or "?"
        args = call.get("args", call.get("arguments")) or {}
        for path, value in leaves(args):
            n += 1
            field = f"{tool}.{top_field(path)}"
            if field in flagged:
                continue
            kind = classify(value, context, numbers, context_words)
            if uniform(seed, _S_FIELD + n) < rate[kind]:
                flagged.append(field)
    return flagged


def _broken(fields: list[str], kind: float) -> str:
    body = json.dumps({"phantom_fields": fields})
    if kind < 0.3:
        return f"Here is my audit. The ungrounded fields are: {body}"
    if kind < 0.55:
        return json.dumps({"phantoms": fields})
    if kind < 0.8:
        return json.dumps(fields)
    return body[: max(1, len(body) // 2)]


def audit(request: ChatRequest) -> ChatResponse:
    """Answer an audit request as the model's auditor persona would (``balanced`` by default)."""
    persona = auditor_for_model(request.model) or AUDITORS["balanced"]
    seed = request.seed if request.seed is not None else 0
    if persona.transport and uniform(seed, _S_TRANSPORT) < persona.transport:
        raise ProviderError(ErrorKind.TRANSIENT, "sim auditor: connection reset by peer (simulated)")
    trace = _trace_of(request)
    fields = judge(trace, persona, seed) if trace is not None else []
    if trace is None:
        text = "I could not find a trace to audit in your message."
    elif uniform(seed, _S_BREAK) < persona.break_contract:
        text = _broken(fields, uniform(seed, _S_BREAK_KIND))
    else:
        text = json.dumps({"phantom_fields": fields})
        if uniform(seed, _S_FENCE) < persona.fence:
            text = f"```json\n{text}\n```"
    chars = sum(len(m.content) for m in request.messages)
    return ChatResponse(text=text, usage=Usage(max(1, chars // 4), max(1, len(text) // 4)), finish_reason="stop")
