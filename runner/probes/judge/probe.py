"""The ``judge`` probe: how far do automated correctness judges agree with people?

Each case is a finished trace — the task, the agent's final answer (the candidate)
and a reference answer. Each model of the sweep is asked, once per run, whether the
candidate is correct (``VERDICT: CORRECT`` / ``VERDICT: INCORRECT``); beside it every
row carries the substring heuristic's verdict, which needs no model. The report then
builds the raters per trace — the heuristic, each model, and the 2-of-3 ensemble of
the three models named in ``ensemble`` (any providers) — and scores them against
human labels read from CSV (``human_labels``): Cohen's kappa against each annotator,
against the annotators' consensus (traces where all who labelled it agree) and their
majority, plus the judges' own majority; and a calibrated correct-rate from
P(human says correct | judge verdict). See ``report.py``.

The substring heuristic (``heuristic_verdict``): the candidate is correct when it
contains every number, date, time and id of the reference; for a reference with
none of those, when it contains the reference's normalised text. It is cheap and
known to be poor (AgentProp reports kappa 0.14 against the judges' majority).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from runner.core.columns import Column
from runner.core.errors import UserError
from runner.core.jsonwalk import normalise
from runner.core.sources import validate
from runner.core.types import Message, TrialSpec
from runner.probes.answertext import numbers_stated
from runner.probes.base import Probe, ProbeConfig
from runner.probes.casefiles import load_records
from runner.providers.base import Agent

if TYPE_CHECKING:
    from runner.core.views import ProbeView
    from runner.probes.base import ReadableOutput

CONDITIONS = ("llm",)
_VERDICT_RE = re.compile(r"verdict\s*:\s*\**\s*(correct|incorrect|yes|no|true|false)\b", re.IGNORECASE)

DEFAULT_SYSTEM = (
    "You grade whether a candidate answer to a task is correct, using the reference answer. The candidate is "
    "correct if it states the reference's facts (numbers, dates, ids, names), even in other words; it is "
    "incorrect if it states other values, omits them, or only promises to act. End with exactly one line: "
    "VERDICT: CORRECT or VERDICT: INCORRECT"
)


class JudgeConfig(ProbeConfig):
    kind: Literal["judge"]
    traces: str = Field(description="traces to judge (YAML, JSON or JSON lines): id, task, candidate, reference")
    human_labels: list[str] = Field(default_factory=list, description="CSV files of human labels (trace id, annotator, label)")
    ensemble: list[str] | None = Field(default=None, min_length=3, max_length=3,
                                       description="the three models whose 2-of-3 majority is the ensemble judge")
    runs: int = Field(default=1, ge=1, le=1_000_000, description="verdicts per (model, trace)")
    system: str = Field(default=DEFAULT_SYSTEM, description="the judge's system prompt; must ask for 'VERDICT:'")


class JudgedTrace(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str = Field(min_length=1)
    task: str = ""
    candidate: str
    reference: str
    agent_model: str | None = None
    stratum: str | None = Field(default=None, description="a label to break results down by, e.g. the injection")


TEMPLATE = """\
# trialgrid judge traces: a task, the agent's final answer and the reference answer.
# Human labels go in CSV files named by `human_labels:` (columns: trace_id or
# session_id, annotator, label = YES/NO, CORRECT/INCORRECT, true/false or 1/0).
traces:
  - id: weather-lisbon-1
    task: "What was the temperature in Lisbon on 2024-05-22?"
    candidate: "It was 19.9 °C in Lisbon that day."
    reference: "19.9"
"""


def heuristic_verdict(candidate: str, reference: str) -> bool:
    """The substring heuristic: every number / date / time / id of the reference is in the candidate."""
    ref = numbers_stated(reference)
    if ref:
        return ref <= numbers_stated(candidate)
    text = normalise(reference).rstrip(".!?;: ")  # a closing full stop is not part of the fact
    return bool(text) and text in normalise(candidate)


def parse_verdict(text: str) -> bool | None:
    """True / False from the judge's reply (its last VERDICT line), None when it has none."""
    found = _VERDICT_RE.findall(text or "")
    if not found:
        return None
    return found[-1].lower() in ("correct", "yes", "true")


class JudgeProbe(Probe):
    single_turn = True
    config_model = JudgeConfig
    config: JudgeConfig
    all_conditions = CONDITIONS
    outcome_fields = (
        Column("verdict", "bool"),             # the model's verdict (null: reply had no VERDICT line)
        Column("parse_failed", "bool"),
        Column("heuristic_verdict", "bool"),
        Column("agent_model", "string"),        # the model whose answer was judged
        Column("stratum", "string"),
        Column("candidate", "string"),
        Column("reference", "string"),
    )
    rates = ("verdict", "heuristic_verdict", "parse_failed")
    template = TEMPLATE

    def __init__(self, config: JudgeConfig, base_dir: Path, locate: Callable[[str, str], UserError]) -> None:
        super().__init__(config, base_dir)
        if "VERDICT:" not in config.system:
            raise locate("system", "the judge's system prompt must ask for a 'VERDICT:' line (replies are parsed by it)")
        records, self._sha = load_records(base_dir / config.traces, what="judge traces file", key="traces")
        self.traces: dict[str, JudgedTrace] = {}
        for rec in records:
            trace: JudgedTrace = validate(JudgedTrace, rec.data, rec.source, prefix=rec.prefix)
            if trace.id in self.traces:
                raise rec.error(f"duplicate trace id {trace.id!r}", "id")
            self.traces[trace.id] = trace
        self.human_labels = []
        for rel in config.human_labels:
            path = (base_dir / rel).resolve()
            if not path.is_file():
                raise locate("human_labels", f"human labels file not found: {rel} (resolved to {path})")
            from runner.probes.judge.report import read_human_labels

            read_human_labels([path])  # a malformed file fails now, located, not at report time
            self.human_labels.append(str(path))
        self._system = Message("system", config.system)
        self._cells = [(t, "llm") for t in self.traces]

    def identity(self) -> dict[str, Any]:
        return {"traces_sha256": self._sha, "human_labels": list(self.human_labels),
                "ensemble": list(self.config.ensemble) if self.config.ensemble else None}

    async def run(self, spec: TrialSpec, agent: Agent) -> dict[str, Any]:
        trace = self.traces[spec.case_id]
        prompt = f"Task: {trace.task}\nReference answer: {trace.reference}\nCandidate answer: {trace.candidate}"
        response = await agent.chat((self._system, Message("user", prompt)), (), seed=spec.seed)
        verdict = parse_verdict(response.text)
        return {"verdict": verdict, "parse_failed": verdict is None,
                "heuristic_verdict": heuristic_verdict(trace.candidate, trace.reference),
                "agent_model": trace.agent_model, "stratum": trace.stratum,
                "candidate": trace.candidate, "reference": trace.reference}

    @classmethod
    def views(cls, output: ReadableOutput, probe_name: str, *, seed: int) -> list[ProbeView]:
        from runner.probes.judge.report import judge_views

        return judge_views(output, probe_name, seed=seed)
