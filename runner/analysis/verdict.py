"""How a run ended, and the exit code it earns: computed here, printed by the CLI.

``judge`` reads a finished (or stopped) output once and returns an ``Ending``: the error rows
by kind and the models that never worked (``Verdict``), the failing cases of ``fail_on``'s
pass/fail probes, the failing rows of interval gates, and from these one ``exit_code``
(``runner.core.exits``). ``runner.run`` returns it on its result, so a notebook or a CI script
gets the exit code ``trialgrid run`` would exit with, without re-implementing the rules:

- the budget stopped the grid before it was finished: 4, whatever else happened;
- else error rows beyond ``max_error_rate``: 3 (the gates are judged and reported all the same,
  but their numbers are of the trials that did not fail);
- else a failing ``fail_on`` case or a failing gate: 1;
- else 0.

A model whose every trial failed (a fatal 404, a server that is not running) is named with
its first error and what usually causes it.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from runner.core.exits import DEFAULT_RETRY_KINDS, EXIT_BUDGET, EXIT_ERRORS, EXIT_GATE, EXIT_OK
from runner.core.gates import Gate
from runner.output.reader import Output, as_output


@dataclass(frozen=True)
class DeadModel:
    """A model whose every trial in the output is an error row (nothing it answered counted)."""

    model: str
    trials: int
    first_error: str
    #: the error kind of most of its rows ("fatal", "transient", ...)
    kind: str = "fatal"

    def summary(self) -> str:
        how = "failed fatally" if self.kind == "fatal" else f"ended as {self.kind} errors"
        return f"model {self.model}: all {self.trials:,} trials {how}; first error: {self.first_error[:300]}"

    def hint(self) -> str:
        text = self.first_error.lower()
        if "cannot connect" in text or "refused" in text or "connect call failed" in text:
            return ("nothing answered at the model's base_url: start the server it names (a local model server, "
                    "`trialgrid serve`) or correct base_url, then retry the error rows")
        if "404" in text or "not found" in text:
            return ("a 404 usually means the base_url's path is wrong (OpenAI-style APIs end in /v1) or the "
                    "model id does not exist for this key")
        if "401" in text or "403" in text or "auth" in text or "key" in text:
            return "check the API key the model's api_key_env names, and that it may use this model"
        return "check the model's provider, base_url, model id and key in the sweep"


@dataclass(frozen=True)
class Verdict:
    """Each trial once: how many rows, how many are errors, by kind; and the models that never worked."""

    rows: int
    errors: int
    by_kind: dict[str, int] = field(default_factory=dict)
    dead_models: list[DeadModel] = field(default_factory=list)

    @property
    def error_rate(self) -> float:
        return self.errors / self.rows if self.rows else 0.0

    def retryable(self, kinds: Sequence[str] = DEFAULT_RETRY_KINDS) -> int:
        return sum(n for k, n in self.by_kind.items() if k in kinds)

    def kinds_line(self) -> str:
        return ", ".join(f"{k} {n:,}" for k, n in sorted(self.by_kind.items(), key=lambda kv: (-kv[1], kv[0])))


def run_verdict(output: Output | Path) -> Verdict:
    """The verdict of the run ``output`` (no rows: an empty verdict)."""
    output = as_output(output)
    if not output.parts:
        return Verdict(0, 0)
    # aggregates only, collected from the lazy scan: memory follows models and error kinds, not trials
    frame = output.scan().select("model", "status", "error_kind", "error")
    failed = pl.col("status") != "ok"
    per_model = (frame.group_by("model", maintain_order=True).agg(pl.len().alias("trials"), failed.sum().alias("failed"))
                 .collect(engine="streaming"))
    kinds = (frame.group_by("model", "error_kind").agg(pl.len().alias("n"), failed.sum().alias("failed"))
             .collect(engine="streaming"))
    by_kind: dict[str, int] = {}
    for _model, kind, _n, n_failed in kinds.iter_rows():
        if n_failed:
            by_kind[str(kind or "unknown")] = by_kind.get(str(kind or "unknown"), 0) + int(n_failed)
    dead = []
    for model, trials, n_failed in per_model.iter_rows():
        if trials and n_failed == trials:  # the model's first row (in output order) says what went wrong
            first = frame.filter(pl.col("model") == model).head(1).select("error").collect()["error"][0]
            dead.append(DeadModel(str(model), int(trials), str(first or ""), str(_mode_kind(kinds, model) or "unknown")))
    return Verdict(int(per_model["trials"].sum()), int(per_model["failed"].sum()), by_kind, dead)


def _mode_kind(kinds: pl.DataFrame, model: object) -> str | None:
    """The model's most frequent error kind (ties: the smallest, a null first), from per-kind counts."""
    counts = [(kind, int(n)) for m, kind, n, _ in kinds.iter_rows() if m == model]
    top = max(n for _, n in counts)
    tied = [kind for kind, n in counts if n == top]
    return None if None in tied else min(tied)


def retry_command(sweep: Path, out: Path, kinds: Sequence[str] = DEFAULT_RETRY_KINDS) -> str:
    """The command line that re-attempts error rows of ``kinds`` into the same output."""
    kind_arg = "" if tuple(kinds) == DEFAULT_RETRY_KINDS else " " + ",".join(kinds)
    return f"trialgrid run {shlex.quote(str(sweep))} --out {shlex.quote(str(out))} --retry-errors{kind_arg}"


@dataclass(frozen=True)
class Ending:
    """How a run ended: its ``Verdict``, why it stopped early, what its gates found, and its ``exit_code``."""

    verdict: Verdict
    #: why scheduling stopped before the grid was finished (a spent budget), else None
    stopped: str | None = None
    max_error_rate: float = 0.0
    #: the ``fail_on`` probes judged (names or kinds), the case verdicts counted, and a line per failing case
    fail_on: tuple[str, ...] = ()
    cases: int = 0
    failing_cases: tuple[str, ...] = ()
    #: the interval gates judged, and a line per failing (gate, run, probe, model, condition)
    gates: tuple[Gate, ...] = ()
    failing_gates: tuple[str, ...] = ()

    @property
    def errors_over(self) -> bool:
        """Error rows remain beyond ``max_error_rate``."""
        return bool(self.verdict.errors) and self.verdict.error_rate > self.max_error_rate

    @property
    def exit_code(self) -> int:
        if self.stopped:
            return EXIT_BUDGET
        if self.errors_over:
            return EXIT_ERRORS
        if self.failing_cases or self.failing_gates:
            return EXIT_GATE
        return EXIT_OK


def judge(output: Output | Path, *, stopped: str | None = None, max_error_rate: float = 0.0,
          fail_on: Sequence[str] = (), gates: Sequence[Gate] = ()) -> Ending:
    """The ``Ending`` of the run in ``output``: its error verdict, and ``fail_on``'s cases and ``gates`` judged.

    ``fail_on`` names pass/fail probes (a name, or a kind such as ``negative``); ``gates`` are
    parsed interval gates (``runner.core.gates.parse_gate``). Raises ``UserError`` for a
    ``fail_on`` that names no pass/fail probe of the run, or a gate that matches no rate.
    """
    output = as_output(output)
    cases, failing_cases = 0, []
    # the statistics are imported only for a run that gates on them: a plain run's ending is counts alone
    if fail_on:
        from runner.analysis.diff import case_verdicts, gate_lines

        verdicts = case_verdicts(output, fail_on)
        cases, failing_cases = len(verdicts), gate_lines(verdicts)
    failing_gates: list[str] = []
    if gates:
        from runner.analysis.gates import check_gates
        from runner.analysis.leaderboard import summarize

        failing_gates = check_gates(summarize([output]), list(gates))
    return Ending(run_verdict(output), stopped, max_error_rate, tuple(fail_on), cases, tuple(failing_cases),
                  tuple(gates), tuple(failing_gates))
