"""``trialgrid run``: its flags, the run, and what it prints when the run ends.

Why a module of its own: the run itself and its ending (the exit code) are the library's (``runner.run``,
``runner.analysis.verdict``); this module turns the command line into ``RunOptions`` and prints the ending.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.text import Text

from runner.cli.console import (
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    count_text,
    err,
    fail,
    out,
    plain,
    quiet_messages,
)
from runner.cli.flags import command
from runner.cli.gates import GATE_HELP, print_gates
from runner.core.errors import UserError
from runner.core.exits import DEFAULT_RETRY_KINDS
from runner.core.safety import one_line, term_text

if TYPE_CHECKING:
    from runner.analysis.verdict import Ending
    from runner.config.sweep import LoadedSweep
    from runner.output import Output

__all__ = ["RunFlags", "expand_retry_errors", "register", "run"]

_RETRY_ERRORS, _RETRY_KINDS = "--retry-errors", "--retry-kinds"


def _is_kinds(token: str) -> bool:
    from runner.providers.errors import ErrorKind

    known = {k.value for k in ErrorKind} | {"all"}
    items = [t.strip() for t in token.split(",")]
    return bool(items) and all(items) and all(t in known for t in items)


def expand_retry_errors(args: list[str]) -> list[str]:
    """``--retry-errors [KINDS]``: an option whose value is optional, which click cannot say. The kinds are
    the next token only when every comma-separated item is an error kind (``--retry-errors=KINDS`` always)."""
    out_args: list[str] = []
    i = 0
    while i < len(args):
        token = args[i]
        if token.startswith(_RETRY_ERRORS + "="):
            out_args += [_RETRY_ERRORS, _RETRY_KINDS, token.split("=", 1)[1]]
        elif token == _RETRY_ERRORS and i + 1 < len(args) and _is_kinds(args[i + 1]):
            out_args += [_RETRY_ERRORS, _RETRY_KINDS, args[i + 1]]
            i += 1
        else:
            out_args.append(token)
        i += 1
    return out_args


@dataclass(frozen=True)
class RunFlags:
    """``trialgrid run``'s flags: the sweep, where its output goes, what the run may do and how it ends."""

    sweep: Path = typer.Argument(..., help="Sweep file (YAML).")
    out_dir: Path | None = typer.Option(None, "--out", "-o", help="Output directory (overrides the sweep's `output`).")
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar and no report; errors still print.")
    no_report: bool = typer.Option(False, "--no-report", help="Do not print the report at the end.")
    details: bool = typer.Option(False, "--details", help="In the report at the end, also the per-model tables, "
                                 "each probe's views and the methods paragraph.")
    strict_params: bool = typer.Option(False, "--strict-params",
                                       help="Never change a parameter a server rejects (no remedies): the trial fails instead.")
    fail_on: list[str] | None = typer.Option(None, "--fail-on", metavar="PROBE",
                                                help="Exit 1 if any case of this pass/fail probe (a kind such as "
                                                     "`negative`, or a probe name) fails. Repeatable.")
    ray: str | None = typer.Option(None, "--ray", metavar="auto|local|ADDRESS",
                                      help="Run on Ray: `auto` (the cluster this node is part of), `local` (a private "
                                           "one-node Ray) or a cluster address. Same output as without it. "
                                           "Needs Ray: pip install 'trialgrid[ray]'.")
    workers: int | None = typer.Option(None, "--workers",
                                          help="With --ray: worker actors (default: one per CPU of the cluster).")
    cache: Path | None = typer.Option(None, "--cache", metavar="DIR",
                                         help="Response cache directory (overrides the sweep's `cache`): a repeated "
                                              "request is answered from disk; errors are never cached.")
    batch: bool = typer.Option(False, "--batch", help="Send every model's trials through its vendor's batch API "
                               "(openai, anthropic; single-turn probes): submit, poll, collect. Rerun to resume polling.")
    retry_errors: bool = typer.Option(False, _RETRY_ERRORS, metavar="[KINDS]",
                                      help="Run again the trials whose row is an error of these kinds (comma-separated; "
                                           "default rate_limited,transient,timeout; `all`); the new row supersedes "
                                           "the old one for every reader.")
    retry_kinds: str | None = typer.Option(None, _RETRY_KINDS, hidden=True)
    max_error_rate: float = typer.Option(0.0, "--max-error-rate", metavar="R",
                                         help="Exit 0 (not 3) when at most this share of trials ended as error rows.")
    wait: bool = typer.Option(False, "--wait", help="If another process is writing this output, wait for it to "
                              "finish and then resume (default: refuse).")
    gate: list[str] = typer.Option([], "--gate", metavar="GATE", help=GATE_HELP)
    preflight: bool = typer.Option(True, "--preflight/--no-preflight",
                                   help="Before the grid, check each model's endpoint with one request that bills "
                                        "nothing (GET …/models/MODEL): nothing answering, a refused key or an "
                                        "unknown model is one line and exit 2 within the model's timeout_s.")
    model: list[str] = typer.Option([], "--model", metavar="NAME",
                                    help="A try: only this model of the sweep (repeatable). A narrowed sweep is "
                                         "another sweep, written beside the sweep's output (OUTPUT-try-ID).")
    runs: int | None = typer.Option(None, "--runs", metavar="K", help="A try: K runs per cell instead of the "
                                    "sweep's (written beside the sweep's output, as --model).")
    case: list[str] = typer.Option([], "--case", metavar="ID",
                                   help="A try: only this case of the sweep's probes (repeatable; every condition, "
                                        "model and run of it), written beside the sweep's output unless --out is "
                                        "given; e.g. --case C1 --runs 1 --model NAME.")
    limit: int | None = typer.Option(None, "--limit", metavar="N",
                                     help="A try: run at most N trials (in grid order), written beside the sweep's "
                                          "output unless --out is given; e.g. --limit 1 --model NAME.")


@command(RunFlags)
def run(flags: RunFlags) -> None:
    """Run a sweep (or resume it: trial ids already in the output are skipped).

    Exits 0 when every trial is ok, 3 when error rows remain (see --retry-errors, --max-error-rate), 4 when the
    budget stopped it before the grid was finished."""
    from runner.cli.signals import sigterm_as_interrupt
    from runner.config.sweep import load_sweep
    from runner.execution import modes
    from runner.execution.options import RunOptions
    from runner.output import Output

    kinds = (flags.retry_kinds.split(",") if flags.retry_kinds else []) if flags.retry_errors else None
    if flags.retry_kinds and not flags.retry_errors:
        raise fail(UserError(f"{_RETRY_KINDS} only goes with {_RETRY_ERRORS}"))
    terminated, loaded = None, None
    try:
        # checked as it is made (a malformed gate, --workers 0...): bad input, found before the sweep loads (an MCP
        # server starts); the mode and every rule about it are runner.run's (runner/execution/modes.py)
        options = RunOptions(mode=modes.BATCH if flags.batch else None, address=flags.ray, workers=flags.workers, cache=flags.cache,
                             quiet=flags.quiet, strict_params=flags.strict_params, retry_errors=kinds, wait=flags.wait,
                             max_error_rate=flags.max_error_rate, fail_on=flags.fail_on or (), gates=flags.gate, preflight=flags.preflight,
                             models=flags.model, runs=flags.runs, cases=flags.case, limit=flags.limit)
        # a sweep that names an MCP server starts it: a note says so
        loaded = load_sweep(flags.sweep, narrow=options.narrowing)
        # --quiet keeps the notes and the warnings (a damaged part set aside, a damaged cache rebuilt), not progress
        if flags.quiet:
            quiet_messages()
        with sigterm_as_interrupt() as terminated:
            result = modes.run(loaded, flags.out_dir, options)
        target = result.out
    except UserError as exc:
        # a sweep's problems: the first and a count (validate lists them); each model the preflight found: a line
        raise fail(exc, every=getattr(exc, "every_line", False)) from None
    except KeyboardInterrupt:
        saved = _saved(loaded, flags.out_dir, flags.limit is not None or bool(flags.case)) if loaded is not None \
            else "finished trials are saved"
        if terminated is not None and terminated.received:
            plain(f"terminated (SIGTERM): {saved}; rerun the same command to resume")
            raise typer.Exit(EXIT_TERMINATED) from None
        plain(f"interrupted: {saved}; rerun the same command to resume")
        raise typer.Exit(EXIT_INTERRUPTED) from None
    if result.stopped:
        done = result.skipped + result.stats.done
        plain(f"stopped: {result.stopped}; {done:,} of {result.total:,} trials written. "
              "Raise `budget` in the sweep and rerun the same command to continue.")
    # the run's ending is the library's (runner.analysis.verdict): here it is only printed, and exited with
    output, ending = result.output or Output.open(target), result.ending
    assert ending is not None  # runner.run judges every run
    report = not flags.quiet and not flags.no_report
    if not flags.quiet:
        plain(f"{result.stats.done:,} trials run ({result.skipped:,} already done) in {result.elapsed_s:.1f} s; "
              f"{count_text(result.counts)}; output: {target}")
        if report and _all_errors(output):  # 180 lines of — say nothing: open with why (the lines below), no tables
            err.print(Text(one_line("every trial of this run ended as an error row, so there is no report; "
                                    "why:")), soft_wrap=True)
            report = False
    # the errors come before the tables: the numbers below are of the trials that did not fail
    _print_errors(flags.sweep, output.path, ending)
    if report:
        from runner.reporting.terminal import print_report  # the statistics: only when a report is printed

        print_report(output, out, details=flags.details)
    if ending.fail_on:
        _print_cases(ending)
    if ending.gates:
        print_gates(list(ending.failing_gates), len(ending.gates))
    if ending.exit_code:
        raise typer.Exit(ending.exit_code)


def _saved(loaded: LoadedSweep, out_dir: Path | None, picks: bool) -> str:
    """How many trials an interrupted run's output holds, as its manifest recorded them at the stop."""
    from runner.core.manifest import read_manifest
    from runner.execution.modes import output_of

    target = output_of(loaded, out_dir, picks)
    try:
        manifest = read_manifest(target)
    except UserError:
        manifest = None
    if manifest is None or not manifest.sessions:
        return "finished trials are saved"
    done = sum(manifest.counts.values())
    return (f"{manifest.sessions[-1].trials_run:,} trials run in this session are saved, {done:,} of "
            f"{manifest.trials_total:,} in {target}")


def _all_errors(output: Output) -> bool:
    counts = output.counts()
    return bool(counts) and not counts.get("ok")


def _print_errors(sweep: Path, target: Path, ending: Ending) -> None:
    """The error rows by kind, the models that never worked and the --retry-errors command, on stderr."""
    from runner.analysis.verdict import retry_command

    verdict = ending.verdict
    for dead in verdict.dead_models:
        err.print(Text(one_line(dead.summary())), soft_wrap=True)
        err.print(Text(one_line(f"  hint: {dead.hint()}")), soft_wrap=True)
    if not verdict.errors:
        return
    tolerated = not ending.errors_over
    err.print(Text(one_line(f"{verdict.errors:,} of {verdict.rows:,} trials ({verdict.error_rate:.1%}) ended as error "
                            f"rows: {verdict.kinds_line()}"
                            + (f" (within --max-error-rate {ending.max_error_rate:g})" if tolerated else ""))),
              soft_wrap=True)
    retryable = verdict.retryable()
    if retryable:
        err.print(Text(one_line(f"retry the {retryable:,} {'/'.join(DEFAULT_RETRY_KINDS)} rows into the same output: "
                                + retry_command(sweep, target))), soft_wrap=True)


def _print_cases(ending: Ending) -> None:
    """``--fail-on``: a line per case that stops the gate, and the count of those that pass."""
    for line in ending.failing_cases:
        err.print(Text(term_text(line)), soft_wrap=True)
    failing = len(ending.failing_cases)
    plain(f"--fail-on {', '.join(ending.fail_on)}: {ending.cases - failing} of {ending.cases} case verdicts pass"
          + (f"; {failing} do not" if failing else ""))


def register(app: typer.Typer) -> None:
    app.command(name="run")(run)
