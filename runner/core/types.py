"""Provider-neutral records shared by probes, providers and the engine.

Probes build ``ChatRequest`` objects and score ``ChatResponse`` objects; providers
translate them to and from a wire format. Neither side sees the other's details, so
these types are the whole contract between them. They are frozen, slotted
dataclasses because the in-process path creates several per trial and must stay
cheap (the engine runs tens of thousands of trials per second against ``sim``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from runner.core.errors import warn

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool in a catalogue: a name, a description and a JSON-schema for its arguments."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call as the model emitted it.

    ``raw_arguments`` is the argument string exactly as received. ``arguments`` is the
    parsed object, or ``None`` when the string did not parse as a JSON object; then
    ``parse_error`` says why. A call that failed to parse is kept as such, never
    dropped or repaired, because "the model emitted a broken call" is a finding.
    """

    name: str
    raw_arguments: str = "{}"
    arguments: Mapping[str, Any] | None = None
    id: str = ""
    parse_error: str | None = None


def parse_tool_arguments(raw: str) -> tuple[Mapping[str, Any] | None, str | None]:
    """A tool call's argument string → (object, None), or (None, why it is not one). Never repaired.

    The one place a reason is worded, so a broken call gives the same row whether the
    simulated agent emitted it in-process or a wire format decoded it over HTTP.
    """
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        # json's own message may end in "at" ("Invalid control character at"): say it once
        msg = exc.msg[:-3] if exc.msg.endswith(" at") else exc.msg
        return None, f"{msg} at line {exc.lineno} column {exc.colno}" if exc.lineno > 1 else f"{msg} at column {exc.colno}"
    except ValueError as exc:
        return None, str(exc)
    if not isinstance(value, dict):
        return None, "not a JSON object"
    return value, None


def call_with_object(name: str, value: Any, call_id: str) -> ToolCall:
    """A tool call whose wire format sends its arguments as an object (Anthropic's ``input``, Bedrock's, Gemini's
    ``args``): the raw string is the compact JSON of it. A string there is a compatible server or proxy passing the
    model's argument text through: it *is* the raw argument string, parsed or kept as unparsable."""
    if isinstance(value, str):
        arguments, error = parse_tool_arguments(value)
        return ToolCall(name, value, arguments, call_id, error)
    ok = isinstance(value, dict)
    return ToolCall(name, json.dumps(value, separators=(",", ":")), value if ok else None, call_id,
                    None if ok else "not a JSON object")


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None


#: the largest token count a row can hold (its columns are int64)
MAX_TOKENS = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens a call used, as its server reported them; None where the server sent no count that can be one."""

    input_tokens: int | None = 0
    output_tokens: int | None = 0

    @classmethod
    def from_wire(cls, usage: object, input_key: str, output_key: str) -> Usage:
        """The ``usage`` object of a server's answer, bounded where it is read: each count a non-negative integer
        that fits a row (``token_count``); anything else, or no usage object at all, is no count (0 when the key
        is absent, as servers that do not count leave it out; None when it holds something else)."""
        if not isinstance(usage, Mapping):
            return cls(0, 0)
        counts = []
        for key in (input_key, output_key):
            value = usage.get(key)
            count = token_count(value)
            if count is None:  # the CLI says a repeated warning once; Python's filter, once per place
                warn(f"a server sent usage.{key} = {value!r:.60}, which is not a token count (a non-negative integer "
                     "below 2**63): its trials keep their answers, with their token count unknown (null)")
            counts.append(count)
        return cls(*counts)


def token_count(value: object) -> int | None:
    """A token count from the wire: absent (None) is 0; a non-negative integer up to ``MAX_TOKENS`` (or a float
    that is one, ``5.0``) is itself; anything else (``-5``, ``5.5``, ``"5"``, ``2**64``, ``1e300``, NaN, a list,
    a bool) is None: no count, never a value the output cannot hold or a number that was never counted."""
    if value is None:
        return 0
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        if not value.is_integer():  # NaN and the infinities too
            return None
        value = int(value)
    if isinstance(value, int) and 0 <= value <= MAX_TOKENS:
        return value
    return None


def add_tokens(total: int | None, more: int | None) -> int | None:
    """A trial's running token count: unknown (None) once any of its calls' counts is unknown; bounded."""
    if total is None or more is None:
        return None
    return min(total + more, MAX_TOKENS)


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """What a model is asked: messages, the tool catalogue (in the order shown), params.

    ``seed`` is the trial seed. Real providers may pass it on (OpenAI's ``seed``);
    the simulated agent uses it to make its behaviour a pure function of the request.
    """

    model: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    params: Mapping[str, Any] = field(default_factory=dict)
    seed: int | None = None
    tool_choice: str | None = None
    #: the seed of the trial asking (``TrialSpec.seed``); never sent — it keys the response cache, so two
    #: trials that send the same request (paired arms sharing a ``unit_seed``) never share a cached answer
    trial_seed: int | None = None


@dataclass(frozen=True, slots=True)
class ChatResponse:
    """What the model answered: free text and/or tool calls, with usage and latency.

    ``attempts`` counts the requests sent to get this answer (retries and remedy
    re-sends included; 1 for an in-process provider); ``remedies`` lists the learned
    parameter changes applied to the request that got it (``Remedy.describe()``), so
    a row measured with a changed parameter says so. ``cached`` marks an answer the
    response cache served (``attempts`` is then 0: no request was sent).
    ``calls_from_text`` counts the ``tool_calls`` read from the reply's text by a
    model's opt-in ``tool_call_parser`` rather than sent as native tool calls.
    """

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = Usage()
    latency_s: float = 0.0
    finish_reason: str | None = None
    attempts: int = 1
    remedies: tuple[str, ...] = ()
    cached: bool = False
    calls_from_text: int = 0


@dataclass(frozen=True, slots=True)
class TrialSpec:
    """One cell of the grid: which model, probe, case, condition and run.

    ``case_id`` is the cluster (the unit of statistical inference). ``trial_id`` is a
    stable hash of the sweep identity and the other fields; ``seed`` derives from the
    sweep seed and the same fields (not from the provider), so the same sweep sent to
    ``sim`` in-process or over HTTP asks the same questions. ``unit_seed`` derives
    from the sweep seed and the cell *without* its condition: it is shared by every
    condition of one (model, case, run), for probes whose arms must be paired (the
    same agent randomness with and without an intervention).
    """

    sweep_id: str
    trial_id: str
    model: str
    probe: str
    case_id: str
    condition: str
    run: int
    seed: int
    unit_seed: int
