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
    """The verdict of the run ``output`` (no rows: an empty verdict), from its ``Output.tally``."""
    output = as_output(output)
    if not output.parts:
        return Verdict(0, 0)
    rows = output.tally.rows
    by_kind: dict[str, int] = {}
    trials: dict[str, int] = {}
    failed: dict[str, int] = {}
    kinds: dict[str, dict[str | None, int]] = {}  # every row of a model by error kind
    for (model, status, kind), n in rows.items():
        trials[model] = trials.get(model, 0) + n
        of_model = kinds.setdefault(model, {})
        of_model[kind] = of_model.get(kind, 0) + n
        if status != "ok":
            failed[model] = failed.get(model, 0) + n
            by_kind[kind or "unknown"] = by_kind.get(kind or "unknown", 0) + n
    dead = [DeadModel(model, trials[model], error, _mode_kind(kinds[model]) or "unknown")
            for model, error in output.tally.first_error.items()
            if trials.get(model) and failed.get(model, 0) == trials[model]]
    return Verdict(sum(trials.values()), sum(failed.values()), by_kind, dead)


def _mode_kind(kinds: dict[str | None, int]) -> str | None:
    """The most frequent error kind (ties: the smallest, a null first), from per-kind counts."""
    top = max(kinds.values())
    tied = [kind for kind, n in kinds.items() if n == top]
    return None if None in tied else min(k for k in tied if k is not None)


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
