"""The ``phantom`` probe: can an auditor model list the tool-call arguments a trace never grounded?

A trace is a finished exchange: its ``context`` (``system``, ``user``, prior
``tool_results``), the ``calls`` the agent made (tool + args), and ``gold_phantoms``,
the ``tool.arg`` fields no part of the context supports. Each trial shows one trace
to the model under test acting as auditor and asks for ``{"phantom_fields": [...]}``.

- Parsing is strict: a markdown fence around the object may be stripped; anything
  else that is not exactly that object is an auditor *error* — its own column and
  count, never an empty prediction (an auditor that cannot follow the format has
  not said "nothing is ungrounded"). Transport errors are retried once, then recorded.
- Beside the auditor runs a deterministic containment baseline: the shared grounding
  rule of every probe (``runner.probes.grounding``): a value is grounded when its
  normalised form (case, whitespace, number formatting) occurs in the context shown. It is the floor an auditor must beat, and the traces where the two
  differ (``<probe>.disagreements.jsonl``, written by the report) are where to look.
- Conditions: ``results_visible`` shows the prior tool results; ``results_hidden``
  withholds them from auditor and baseline alike, which shows how withheld memory
  inflates what looks ungrounded.

Scores (``scores``) are field-level precision / recall / F1 over
(trace, run, field) tuples, auditor and baseline side by side.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator

from runner.core.columns import Column, ListOf
from runner.core.errors import UserError
from runner.core.seeding import stable_int
from runner.core.sources import validate
from runner.core.types import Message, TrialSpec
from runner.probes.base import AnswerKey, Probe, ProbeConfig
from runner.probes.casefiles import load_records
from runner.probes.grounding import GroundingContext, check_call, fields_of
from runner.providers.base import Agent
from runner.providers.errors import ProviderError

if TYPE_CHECKING:
    from runner.core.views import ProbeView
    from runner.probes.base import ReadableOutput

CONDITIONS = ("results_visible", "results_hidden")
_ERROR_PARSE, _ERROR_TRANSPORT = "parse", "transport"

_AUDITOR_SYSTEM = """\
You audit tool calls made by an AI agent. You are shown the context the agent had \
(system prompt, user messages, results of earlier tool calls) and the tool calls it made. \
An argument is grounded when its value is stated in that context or follows directly from it; \
it is a phantom when nothing in the context supports it (invented identifiers, contacts, \
amounts, flags or categories).

Reply with exactly one JSON object and nothing else:
{"phantom_fields": ["tool_name.argument_name", ...]}
List every phantom argument as tool_name.argument_name; use an empty list when all are grounded."""


class PhantomConfig(ProbeConfig):
    kind: Literal["phantom"]
    traces: str = Field(description="trace file (YAML, JSON or JSON lines), relative to the sweep file")
    system: str = Field(default=_AUDITOR_SYSTEM, description="the auditor's instructions (must keep the JSON contract)")
    runs: int = Field(default=3, ge=1, le=1_000_000, description="audits per (model, trace, condition) cell")

    @field_validator("system")
    @classmethod
    def _keeps_contract(cls, value: str) -> str:
        if '"phantom_fields"' not in value:
            raise ValueError('the auditor system prompt must state the reply format {"phantom_fields": [...]}')
        return value


class TraceContext(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    system: str = ""
    user: str | list[str] = ""
    tool_results: list[Any] = Field(default_factory=list, description="prior tool results, any JSON")


class TraceCall(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    tool: str = Field(min_length=1, validation_alias=AliasChoices("tool", "name"))
    args: dict[str, Any] = Field(validation_alias=AliasChoices("args", "arguments"))


class TraceSource(BaseModel):
    """Where an imported trace came from: the source's own ids, kept so findings can be joined back."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    format: str = Field(min_length=1, description="the reader that imported it, e.g. otel-genai, openinference")
    file: str | None = Field(default=None, description="the input file, as given on the command line")
    record: int | None = Field(default=None, ge=0, description="the record's line (JSON lines) or index in the file")
    trace_id: str | None = None
    span_id: str | None = None
    conversation_id: str | None = Field(default=None, description="the unit of inference: one conversation")
    call_id: str | None = None


class Trace(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    id: str = Field(min_length=1, validation_alias=AliasChoices("id", "name"))
    context: TraceContext
    calls: list[TraceCall] = Field(min_length=1)
    # None: no gold — an imported production trace is audited and reported, never refused for lacking it.
    gold_phantoms: list[str] | None = None
    tools: list[dict[str, Any]] | None = Field(default=None, description="the tools offered, as the source wrote them")
    source: TraceSource | None = None
    notes: str | None = None
    origin: str | None = None

    def shown(self, hide_results: bool) -> dict[str, Any]:
        """The trace as the auditor sees it: context (maybe without tool results) and calls. No gold."""
        return {"context": self.shown_context(hide_results), "calls": [{"tool": c.tool, "args": c.args}
                                                                       for c in self.calls]}

    def shown_context(self, hide_results: bool) -> dict[str, Any]:
        """The context as the auditor (and the baseline) sees it: maybe without the tool results."""
        ctx: dict[str, Any] = {"system": self.context.system, "user": self.context.user}
        if not hide_results:
            ctx["tool_results"] = self.context.tool_results
        return ctx


TEMPLATE = """\
# trialgrid phantom traces: finished tool calls, and which arguments nothing grounded.
traces:
  - id: store-hours
    context:
      system: "You are the store assistant."
      user: "When does the Riverside store close on Sunday?"
      tool_results: []
    calls:
      - tool: get_store_hours
        args: {store: Riverside, day: Sunday, priority: high}
    gold_phantoms: [get_store_hours.priority]   # tool.arg, one per ungrounded argument
"""

_FENCE_RE = re.compile(r"^```[A-Za-z0-9_-]*[ \t]*\n(.*?)\n?```$", re.DOTALL)


class AuditorParseError(ValueError):
    pass


def parse_auditor_reply(text: str) -> list[str]:
    """The fields an auditor reply lists, or ``AuditorParseError`` saying why it breaks the contract."""
    body = (text or "").strip()
    fenced = _FENCE_RE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    if not body:
        raise AuditorParseError("empty reply")
    try:
        obj = json.loads(body)
    except json.JSONDecodeError as exc:
        raise AuditorParseError(f"not JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(obj, dict):
        raise AuditorParseError(f'expected the object {{"phantom_fields": [...]}}, got a JSON {type(obj).__name__}')
    if set(obj) != {"phantom_fields"}:
        raise AuditorParseError(f"expected exactly the key 'phantom_fields', got {sorted(obj)}")
    fields = obj["phantom_fields"]
    if not isinstance(fields, list) or not all(isinstance(f, str) and f.strip() for f in fields):
        raise AuditorParseError("'phantom_fields' must be a list of non-empty strings")
    out: list[str] = []
    for f in fields:
        f = f.strip()
        if f not in out:
            out.append(f)
    return out


def baseline_fields(trace: Trace, hide_results: bool) -> list[str]:
    """Containment baseline: every ``tool.arg`` the shared grounding rule (``runner.probes.grounding``) finds
    ungrounded in the context shown. Traces carry no tool schemas, so only the schema-free parts of the rule apply."""
    context = GroundingContext.of_values(trace.shown_context(hide_results))
    return fields_of(f for call in trace.calls for f in check_call(call.tool, call.args, context))


def call_fields(trace: Trace) -> list[str]:
    """Every ``tool.arg`` of the trace's calls, once each, in order: the units a flag rate counts."""
    return list(dict.fromkeys(f"{c.tool}.{a}" for c in trace.calls for a in c.args))


def conversation_of(trace: Trace) -> str:
    """The unit of inference: the source's conversation, else its trace id, else the trace itself (prefixed, so
    the three never collide)."""
    src = trace.source
    if src is not None and src.conversation_id:
        return f"c:{src.conversation_id}"
    if src is not None and src.trace_id:
        return f"t:{src.trace_id}"
    return f"x:{trace.id}"


def load_traces(path: Path) -> tuple[list[Trace], str]:
    records, sha = load_records(path, what="phantom trace file", key="traces")
    traces: list[Trace] = []
    seen: dict[str, int | None] = {}
    for rec in records:
        if not isinstance(rec.data, dict):
            raise rec.error(f"a trace must be a mapping, got {type(rec.data).__name__}")
        trace: Trace = validate(Trace, rec.data, rec.source, prefix=rec.prefix)
        fields = {f"{c.tool}.{a}" for c in trace.calls for a in c.args}
        for i, g in enumerate(trace.gold_phantoms or ()):
            if g not in fields:
                raise rec.error(f"{g!r} is not an argument of any call in this trace", "gold_phantoms", i,
                                hint=f"write tool.arg, one of: {', '.join(sorted(fields)) or 'none'}")
        if trace.id in seen:
            raise rec.error(f"duplicate trace id {trace.id!r} (first at line {seen[trace.id]})", "id")
        seen[trace.id] = rec.line()
        traces.append(trace)
    return traces, sha


class PhantomProbe(Probe):
    single_turn = True
    config_model = PhantomConfig
    all_conditions = CONDITIONS
    outcome_fields = (
        Column("pred_fields", ListOf("string")),      # null when the auditor errored
        Column("baseline_fields", ListOf("string")),
        Column("gold_fields", ListOf("string")),
        Column("auditor_error", "string"),              # null | "parse" | "transport"
        Column("auditor_error_detail", "string"),
        Column("auditor_failed", "bool"),
        Column("auditor_exact", "bool"),               # null when the auditor errored
        Column("baseline_exact", "bool"),
        Column("disagree", "bool"),                    # auditor ≠ baseline; null on auditor error
        Column("auditor_tp", "int32"),
        Column("auditor_fp", "int32"),
        Column("auditor_fn", "int32"),
        Column("baseline_tp", "int32"),
        Column("baseline_fp", "int32"),
        Column("baseline_fn", "int32"),
        Column("call_fields", ListOf("string")),      # every tool.arg of the calls: the flag rates' units
        Column("conversation", "string"),               # the unit of inference (conversation_of)
    )
    rates = ("auditor_failed", "baseline_exact")
    good_rates = ("baseline_exact",)
    template = TEMPLATE

    def __init__(self, config: PhantomConfig, base_dir: Path, locate: Callable[[str, str], UserError]) -> None:
        super().__init__(config, base_dir)
        traces, self._sha = load_traces(base_dir / config.traces)
        self._system = Message("system", config.system)
        self._by_id: dict[str, tuple[Trace, dict[str, Any]]] = {}
        for trace in traces:
            per_condition = {}
            for condition in CONDITIONS:
                hide = condition == "results_hidden"
                shown = json.dumps(trace.shown(hide), ensure_ascii=False, indent=1)
                per_condition[condition] = (
                    Message("user", "Audit this trace. Context and calls:\n" + shown),
                    baseline_fields(trace, hide),
                )
            self._by_id[trace.id] = (trace, per_condition)
        self._cells = [(t.id, c) for t in traces for c in self.conditions]
        if len(traces) < 12:
            self.warnings.append(f"{config.traces}: {len(traces)} traces; field-level scores over fewer than a dozen "
                                 "traces swing with every single field")

    def identity(self) -> dict[str, Any]:
        return {"traces_sha256": self._sha}

    def trace(self, trace_id: str) -> Trace:
        return self._by_id[trace_id][0]

    def answer_keys(self) -> Iterator[AnswerKey]:
        for trace, per_condition in self._by_id.values():
            for user, _baseline in per_condition.values():
                yield AnswerKey((self._system, user), frozenset(), trace)

    async def _ask(self, agent: Agent, user: Message, seed: int) -> tuple[str | None, str | None, str | None]:
        """(reply text, error kind, error detail). Retryable transport errors get one retry."""
        last: ProviderError | None = None
        for attempt in range(2):
            try:
                response = await agent.chat((self._system, user), (), seed=seed if attempt == 0 else
                                            stable_int(seed, "auditor-retry"))
            except ProviderError as exc:
                if not exc.kind.retryable:
                    raise  # auth, bad parameter...: the trial errored, not the auditor
                last = exc
                if attempt == 0 and exc.retry_after_s:
                    import asyncio  # here: loading a sweep (validate) does not pay for the event loop's modules

                    await asyncio.sleep(min(exc.retry_after_s, 60.0))
                continue
            if response.tool_calls:
                return response.text, _ERROR_PARSE, f"called a tool ({response.tool_calls[0].name}) instead of replying"
            return response.text, None, None
        assert last is not None
        return None, _ERROR_TRANSPORT, f"{last.kind.value} twice: {last.message}"

    async def run(self, spec: TrialSpec, agent: Agent) -> dict[str, Any]:
        trace, per_condition = self._by_id[spec.case_id]
        user, baseline = per_condition[spec.condition]
        gold = None if trace.gold_phantoms is None else list(trace.gold_phantoms)
        text, error, detail = await self._ask(agent, user, spec.seed)
        pred: list[str] | None = None
        if error is None:
            try:
                pred = parse_auditor_reply(text or "")
            except AuditorParseError as exc:
                error, detail = _ERROR_PARSE, str(exc)
        base_set = set(baseline)
        row: dict[str, Any] = {
            "pred_fields": pred,
            "baseline_fields": baseline,
            "gold_fields": gold,
            "auditor_error": error,
            "auditor_error_detail": detail,
            "auditor_failed": error is not None,
            # Scores against gold are null where a trace has no gold; agreement with the baseline is not.
            "baseline_exact": None, "baseline_tp": None, "baseline_fp": None, "baseline_fn": None,
            "auditor_exact": None, "disagree": None, "auditor_tp": None, "auditor_fp": None, "auditor_fn": None,
            "call_fields": call_fields(trace), "conversation": conversation_of(trace),
        }
        if gold is not None:
            gold_set = set(gold)
            row.update(baseline_exact=base_set == gold_set, baseline_tp=len(base_set & gold_set),
                       baseline_fp=len(base_set - gold_set), baseline_fn=len(gold_set - base_set))
        if pred is not None:
            pred_set = set(pred)
            row["disagree"] = pred_set != base_set
            if gold is not None:
                row.update(auditor_exact=pred_set == gold_set, auditor_tp=len(pred_set & gold_set),
                           auditor_fp=len(pred_set - gold_set), auditor_fn=len(gold_set - pred_set))
        return row

    @classmethod
    def views(cls, output: ReadableOutput, probe_name: str, *, seed: int) -> list[ProbeView]:
        from runner.probes.phantom.scores import phantom_views

        return phantom_views(probe_name, output.scan(), seed=seed)
