"""The ``trialgrid`` command line.

Exit codes: 0 ok (for ``run``: every trial ok); 1 the run finished but something the
user asked to gate on failed; 2 bad input (config, case file, output directory, an
output another process is writing, a full disk) or a run that cannot go on (any
``TrialgridError``, e.g. Ray's workers exhausted); 3 ``run`` finished with error rows
(beyond ``--max-error-rate``); 130 interrupted (Ctrl-C); 143 terminated (SIGTERM).
Bad input prints one located line on stderr, never a traceback.
"""

from __future__ import annotations

import errno
import math
import sys
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.text import Text
from typer._click.exceptions import BadParameter
from typer.core import TyperGroup

from runner.cli.audit import register as _register_audit
from runner.cli.check import register as _register_check
from runner.cli.console import (
    EXIT_GATE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    err,
    fail,
    messages_as_lines,
    out,
    plain,
    quiet_messages,
    warn,
    warnings_as_lines,
)
from runner.cli.view import register as register_view
from runner.core.errors import TrialgridError, UserError
from runner.core.exits import DEFAULT_RETRY_KINDS
from runner.core.safety import one_line, term_text


def _os_error(exc: OSError) -> UserError:
    """An operating-system failure (disk full, no permission, a file where a folder goes) as one located line."""
    where = exc.filename if exc.filename is not None else None
    # strerror is the system's sentence ("Illegal seek"); without one, the exception's own text, never its class
    # name lower-cased ("oSError")
    if exc.strerror:
        reason = exc.strerror[0].lower() + exc.strerror[1:]
    else:
        reason = str(exc).strip() or f"{type(exc).__name__} with no message"
    if exc.errno == errno.ENOSPC:
        return UserError("no space left on the device", file=where,
                         hint="free some space (or choose another --out) and rerun the same command; "
                              "finished trials are kept")
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return UserError(f"cannot write or read here: {reason}", file=where, hint="choose a path you may write")
    return UserError(f"operating-system error: {reason}", file=where,
                     hint="check the files this command reads and writes (a pipe, a device or a full disk where a "
                          "file should be); finished trials are kept")


_RETRY_ERRORS, _RETRY_KINDS = "--retry-errors", "--retry-kinds"


def _is_kinds(token: str) -> bool:
    from runner.providers.errors import ErrorKind

    known = {k.value for k in ErrorKind} | {"all"}
    items = [t.strip() for t in token.split(",")]
    return bool(items) and all(items) and all(t in known for t in items)


def _expand_retry_errors(args: list[str]) -> list[str]:
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


class _GuardedGroup(TyperGroup):
    """Every command: bad input, an OS failure or Ctrl-C end in one line on stderr, never a traceback."""

    def main(self, args: Any = None, *pos: Any, **kw: Any) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        return super().main(_expand_retry_errors(argv), *pos, **kw)

    def invoke(self, ctx: Any) -> Any:  # typer's (vendored) click.Context
        try:
            # a TrialgridWarning, from any layer, is one `warning:` line; progress and notes are lines of their own
            with warnings_as_lines(), messages_as_lines():
                return super().invoke(ctx)
        except TrialgridError as exc:  # bad input, or a run that cannot go on (Ray's workers exhausted)
            raise fail(exc) from None
        except BadParameter as exc:  # a value out of an option's range, or not a number: one line, not a usage block
            name = exc.param.opts[0] if exc.param is not None and getattr(exc.param, "opts", None) else "a value"
            raise fail(UserError(f"{name}: {exc.message}", hint="see --help for what it takes")) from None
        except OSError as exc:
            raise fail(_os_error(exc)) from None
        except KeyboardInterrupt:
            err.print("interrupted; nothing is lost that was finished: rerun the same command to resume", soft_wrap=True)
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except Exception as exc:
            # unreadable run data (a truncated or foreign Arrow part) surfaces as the data library's error
            if type(exc).__module__.split(".")[0] in ("pyarrow", "polars"):
                text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise fail(UserError(f"run data does not read: {text[:300]}",
                                      hint="a trials part is truncated or not trialgrid's; move it aside "
                                           "and rerun to redo its trials")) from None
            raise


if TYPE_CHECKING:
    from runner.analysis.gates import Gate
    from runner.analysis.leaderboard import Summary
    from runner.analysis.verdict import Ending
    from runner.config.sweep import LoadedSweep
    from runner.output import Output

# --gate of run and report (runner.analysis.gates)
_GATE_HELP = ('Exit 1 unless a bound of a rate\'s cluster interval holds, e.g. '
              '"upper(decoy_called | ungroundable) <= 0.20" (BOUND: upper, lower, rate; repeatable; every model '
              'and, without a condition, every condition).')


# No locals in tracebacks: a provider's frames hold request headers, i.e. the API key.
app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None, pretty_exceptions_show_locals=False,
                  cls=_GuardedGroup, help="Measure how tool-calling LLM agents fail to ground what they do.")


def _version(value: bool) -> None:
    if value:
        try:
            version = metadata.version("trialgrid")
        except metadata.PackageNotFoundError:
            version = "unknown (not installed)"
        out.print(f"trialgrid {version}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _main(version: bool | None = typer.Option(None, "--version", callback=_version, is_eager=True,
                                                  help="Print the version and exit.")) -> None:
    """trialgrid: grids of trials against tool-calling agents, with prompt-clustered statistics."""


@app.command()
def validate(
    sweep: Path = typer.Argument(..., help="Sweep file (YAML)."),
    start_servers: bool = typer.Option(False, "--start-servers",
                                       help="Start the MCP servers the sweep names (mcp_server.command) to check "
                                            "their catalogues. A sweep file that names a server is code: trust it "
                                            "as you would a script."),
) -> None:
    """Check a sweep file and every file it names, without sending anything (every problem, up to 20); with `prices`,
    estimate tokens and dollars per model from an offline calibration run."""
    from runner.config.sweep import load_sweep
    from runner.execution.grid import grid_of

    try:
        loaded = load_sweep(sweep, start_servers=start_servers)
    except UserError as exc:
        raise fail(exc, every=True) from None
    grid = grid_of(loaded)
    out.print(Text(one_line(f"{sweep}: ok — sweep {loaded.sweep.name!r} (id {loaded.sweep_id}), "
                            f"{len(loaded.sweep.models)} model(s), {len(loaded.probes)} probe(s), {len(grid):,} trials"
                            + (f"; {len(loaded.unstarted)} probe(s) with an MCP server not checked"
                               if loaded.unstarted else ""))), soft_wrap=True)
    if loaded.sweep.prices:
        from runner.cli.check import print_estimate

        try:
            print_estimate(loaded)
        except UserError as exc:
            raise fail(exc) from None


@app.command()
def run(
    sweep: Path = typer.Argument(..., help="Sweep file (YAML)."),
    out_dir: Path | None = typer.Option(None, "--out", "-o", help="Output directory (overrides the sweep's `output`)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar and no report; errors still print."),
    no_report: bool = typer.Option(False, "--no-report", help="Do not print the report at the end."),
    details: bool = typer.Option(False, "--details", help="In the report at the end, also the per-model tables, "
                                 "each probe's views and the methods paragraph."),
    strict_params: bool = typer.Option(False, "--strict-params",
                                       help="Never change a parameter a server rejects (no remedies): the trial fails instead."),
    fail_on: list[str] | None = typer.Option(None, "--fail-on", metavar="PROBE",
                                                help="Exit 1 if any case of this pass/fail probe (a kind such as "
                                                     "`negative`, or a probe name) fails. Repeatable."),
    ray: str | None = typer.Option(None, "--ray", metavar="auto|local|ADDRESS",
                                      help="Run on Ray: `auto` (the cluster this node is part of), `local` (a private "
                                           "one-node Ray) or a cluster address. Same output as without it. "
                                           "Needs Ray: pip install 'trialgrid[ray]'."),
    workers: int | None = typer.Option(None, "--workers",
                                          help="With --ray: worker actors (default: one per CPU of the cluster)."),
    cache: Path | None = typer.Option(None, "--cache", metavar="DIR",
                                         help="Response cache directory (overrides the sweep's `cache`): a repeated "
                                              "request is answered from disk; errors are never cached."),
    batch: bool = typer.Option(False, "--batch", help="Send every model's trials through its vendor's batch API "
                               "(openai, anthropic; single-turn probes): submit, poll, collect. Rerun to resume polling."),
    retry_errors: bool = typer.Option(False, _RETRY_ERRORS, metavar="[KINDS]",
                                      help="Run again the trials whose row is an error of these kinds (comma-separated; "
                                           "default rate_limited,transient,timeout; `all`); the new row supersedes "
                                           "the old one for every reader."),
    retry_kinds: str | None = typer.Option(None, _RETRY_KINDS, hidden=True),
    max_error_rate: float = typer.Option(0.0, "--max-error-rate", metavar="R",
                                         help="Exit 0 (not 3) when at most this share of trials ended as error rows."),
    wait: bool = typer.Option(False, "--wait", help="If another process is writing this output, wait for it to "
                              "finish and then resume (default: refuse)."),
    gate: list[str] = typer.Option([], "--gate", metavar="GATE", help=_GATE_HELP),
    preflight: bool = typer.Option(True, "--preflight/--no-preflight",
                                   help="Before the grid, check each model's endpoint with one request that bills "
                                        "nothing (GET …/models/MODEL): nothing answering, a refused key or an "
                                        "unknown model is one line and exit 2 within the model's timeout_s."),
    model: list[str] = typer.Option([], "--model", metavar="NAME",
                                    help="A try: only this model of the sweep (repeatable). A narrowed sweep is "
                                         "another sweep, written beside the sweep's output (OUTPUT-try-ID)."),
    runs: int | None = typer.Option(None, "--runs", metavar="K", help="A try: K runs per cell instead of the "
                                    "sweep's (written beside the sweep's output, as --model)."),
    limit: int | None = typer.Option(None, "--limit", metavar="N",
                                     help="A try: run at most N trials (in grid order), written beside the sweep's "
                                          "output unless --out is given; e.g. --limit 1 --model NAME."),
) -> None:
    """Run a sweep (or resume it: trial ids already in the output are skipped).

    Exits 0 when every trial is ok, 3 when error rows remain (see --retry-errors, --max-error-rate), 4 when the
    budget stopped it before the grid was finished."""
    from runner.cli.signals import sigterm_as_interrupt
    from runner.config.sweep import load_sweep
    from runner.execution import modes
    from runner.execution.options import RunOptions
    from runner.output import Output
    from runner.reporting.terminal import print_report

    kinds = (retry_kinds.split(",") if retry_kinds else []) if retry_errors else None
    if retry_kinds and not retry_errors:
        raise fail(UserError(f"{_RETRY_KINDS} only goes with {_RETRY_ERRORS}"))
    terminated, loaded = None, None
    try:
        # checked as it is made (a malformed gate, --workers 0...): bad input, found before the sweep loads (an MCP
        # server starts); the mode and every rule about it are runner.run's (runner/execution/modes.py)
        options = RunOptions(mode=modes.BATCH if batch else None, address=ray, workers=workers, cache=cache,
                             quiet=quiet, strict_params=strict_params, retry_errors=kinds, wait=wait,
                             max_error_rate=max_error_rate, fail_on=fail_on or (), gates=gate, preflight=preflight,
                             models=model, runs=runs, limit=limit)
        # a sweep that names an MCP server starts it: a note says so
        loaded = load_sweep(sweep, narrow=options.narrowing)
        # --quiet keeps the notes and the warnings (a damaged part set aside, a damaged cache rebuilt), not progress
        if quiet:
            quiet_messages()
        with sigterm_as_interrupt() as terminated:
            result = modes.run(loaded, out_dir, options)
        target = result.out
    except UserError as exc:
        # a sweep's problems: the first and a count (validate lists them); each model the preflight found: a line
        raise fail(exc, every=getattr(exc, "every_line", False)) from None
    except KeyboardInterrupt:
        saved = _saved(loaded, out_dir, limit) if loaded is not None else "finished trials are saved"
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
    report = not quiet and not no_report
    if not quiet:
        plain(f"{result.stats.done:,} trials run ({result.skipped:,} already done) in {result.elapsed_s:.1f} s; "
              f"{_count_text(result.counts)}; output: {target}")
        if report and _all_errors(output):  # 180 lines of — say nothing: open with why (the lines below), no tables
            err.print(Text(one_line("every trial of this run ended as an error row, so there is no report; "
                                    "why:")), soft_wrap=True)
            report = False
    # the errors come before the tables: the numbers below are of the trials that did not fail
    _print_errors(sweep, output.path, ending)
    if report:
        print_report(output, out, details=details)
    if ending.fail_on:
        _print_cases(ending)
    if ending.gates:
        _print_gates(list(ending.failing_gates), len(ending.gates))
    if ending.exit_code:
        raise typer.Exit(ending.exit_code)


def _saved(loaded: LoadedSweep, out_dir: Path | None, limit: int | None) -> str:
    """How many trials an interrupted run's output holds, as its manifest recorded them at the stop."""
    from runner.core.manifest import read_manifest
    from runner.execution.modes import output_of

    target = output_of(loaded, out_dir, limit)
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


def _count_text(counts: dict[str, int]) -> str:
    """Rows by status for a person: ``2,340 ok, 12 error`` (not a Python dict)."""
    return ", ".join(f"{n:,} {status}" for status, n in sorted(counts.items())) or "no rows"


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


def _print_line(line: str) -> None:
    """One line of a long-running command's log, printed as is and flushed (a pipe sees it at once)."""
    out.print(line, soft_wrap=True, markup=False)
    sys.stdout.flush()


def _parse_gates(texts: list[str], where: str = "--gate") -> list[Gate]:
    from runner.analysis.gates import parse_gate

    return [parse_gate(t, where) for t in texts]


def _interval_gates(summary: Summary, gates: list[Gate]) -> None:
    """``report --gate``: each failing row one line, a count, exit 1 (runner.analysis.gates)."""
    from runner.analysis.gates import check_gates

    try:
        failures = check_gates(summary, gates)
    except UserError as exc:
        raise fail(exc) from None
    _print_gates(failures, len(gates))
    if failures:
        raise typer.Exit(EXIT_GATE)


def _print_gates(failures: list[str], gates: int) -> None:
    for line in failures:
        err.print(Text(term_text(line)), soft_wrap=True)
    plain(f"--gate: {gates} gate(s), {len(failures)} failing row(s)")


def _print_cases(ending: Ending) -> None:
    """``--fail-on``: a line per case that stops the gate, and the count of those that pass."""
    for line in ending.failing_cases:
        err.print(Text(term_text(line)), soft_wrap=True)
    failing = len(ending.failing_cases)
    plain(f"--fail-on {', '.join(ending.fail_on)}: {ending.cases - failing} of {ending.cases} case verdicts pass"
          + (f"; {failing} do not" if failing else ""))


from runner.cli.diff import register as _register_diff  # noqa: E402  (after app exists)

_register_diff(app)


@app.command()
def rescore(
    source: Path = typer.Argument(..., help="The output directory whose stored responses are scored again."),
    dest: Path = typer.Option(..., "--out", "-o", help="New output directory (must be empty or absent)."),
    sweep: Path | None = typer.Option(None, "--sweep", help="Sweep whose probes score (default: the one the "
                                         "source's manifest names); only scoring may differ from the original."),
) -> None:
    """Recompute every probe's outcome columns from the stored responses, calling no model."""
    from runner.execution.rescore import rescore as rescore_output

    try:
        result = rescore_output(source, dest, sweep)
    except UserError as exc:
        raise fail(exc) from None
    plain(f"rescored {result.rows:,} rows into {dest}: {result.changed:,} changed outcome, "
          f"{result.errors_kept:,} error rows kept as errors; {_count_text(result.counts)}")


_import_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                         help="Convert other projects' data into trialgrid case files and a sweep.")
app.add_typer(_import_app, name="import")


@_import_app.command("bfcl")
def import_bfcl_cmd(
    paths: list[Path] = typer.Argument(..., help="BFCL question files (BFCL_v4_<category>.json) or the bfcl_eval/data folder."),
    dest: Path = typer.Option(Path("bfcl"), "--out", "-o", help="Folder for the case files and sweep.yaml."),
    runs: int = typer.Option(1, "--runs", min=1, help="Trials per cell in the written sweep."),
    force: bool = typer.Option(False, "--force", help="Overwrite files from an earlier import."),
) -> None:
    """Import BFCL: irrelevance → no_call cases; live_relevance → must-call cases; simple, multiple,
    live and Java/JavaScript sets → one-call pinning cases (and phantom traces); parallel sets → all-calls
    cases; multi_turn_miss_param / miss_func → must-ask cases. Each case also gets BFCL's own verdict."""
    from runner.importers import import_bfcl, write_bfcl

    try:
        result = import_bfcl(paths)
        counts = write_bfcl(result, dest, force=force, runs=runs)
    except UserError as exc:
        raise fail(exc) from None
    for (category, outcome), n in sorted(counts.items()):
        if n:
            out.print(Text(f"{category:24s} {outcome:48s} {n:6,d}"))
    for name, why in sorted(result.skipped_files.items()):
        out.print(Text(f"not imported: {name}: {why}"), soft_wrap=True)
    out.print(Text(f"wrote {dest}; run it with: trialgrid run {dest / 'sweep.yaml'}"), soft_wrap=True)


@_import_app.command("ungrounded")
def import_ungrounded_cmd(
    path: Path = typer.Argument(..., help="An ungrounded stimuli JSON file, or the installed ungrounded package folder."),
    tools: Path | None = typer.Option(None, "--tools", help="The tool catalogue JSON (default: the package's example)."),
    expected_tool: str | None = typer.Option(None, "--expected-tool", help="For triples without expected_tool."),
    dest: Path = typer.Option(Path("ungrounded"), "--out", "-o", help="Folder for triples.yaml, tools.json, sweep.yaml."),
    force: bool = typer.Option(False, "--force", help="Overwrite files from an earlier import."),
) -> None:
    """Import ungrounded's matched triples and tool catalogue as a misselection sweep."""
    from runner.importers import import_ungrounded, write_ungrounded

    try:
        triples, catalogue = import_ungrounded(path, tools, expected_tool)
        write_ungrounded(triples, catalogue, dest, force=force)
    except UserError as exc:
        raise fail(exc) from None
    out.print(Text(f"{len(triples)} triples, {len(catalogue) if isinstance(catalogue, list) else '?'} tools; "
                   f"wrote {dest}; run it with: trialgrid run {dest / 'sweep.yaml'}"), soft_wrap=True)


@_import_app.command("trials")
def import_trials_cmd(
    path: Path = typer.Argument(..., help="Per-trial data: a .csv or .parquet file, one row per trial."),
    dest: Path = typer.Option(..., "--out", "-o", help="Output directory for the imported run."),
    cluster: str = typer.Option(..., "--cluster", help="Column with the cluster (prompt / case / triple id)."),
    condition: str = typer.Option(..., "--condition", help="Column with the condition."),
    outcome: list[str] = typer.Option(..., "--outcome", help="Outcome column, or NAME=COLUMN; repeat. The first is the headline."),
    model: str | None = typer.Option(None, "--model", help="Column with the model label."),
    model_name: str | None = typer.Option(None, "--model-name", help="One model label for every row (instead of --model)."),
    run: str | None = typer.Option(None, "--run", help="Column with the run index (default: numbered per cell)."),
    status: str | None = typer.Option(None, "--status", help="Column with the trial status."),
    ok: list[str] = typer.Option(["ok"], "--ok", help="Status value meaning the trial completed (case-insensitive); repeat."),
    error: str | None = typer.Option(None, "--error", help="Column with the error text of failed trials."),
    input_tokens: str | None = typer.Option(None, "--input-tokens", help="Column with input tokens."),
    output_tokens: str | None = typer.Option(None, "--output-tokens", help="Column with output tokens."),
    probe: str = typer.Option("imported", "--probe", help="Probe label in the output."),
    kind: str = typer.Option("imported", "--kind", help="Probe kind: a trialgrid kind (its rates and contrasts) or any label."),
    contrast: list[str] = typer.Option([], "--contrast", help="label:outcome:A1+A2:B1 — a test of arm A minus arm B; repeat."),
    force: bool = typer.Option(False, "--force", help="Replace a run already in --out."),
) -> None:
    """Import per-trial results from another harness as a trialgrid run (then `trialgrid report` it)."""
    from runner.importers.trials import TrialsMapping, import_trials, parse_contrast, parse_outcomes

    try:
        mapping = TrialsMapping(cluster=cluster, condition=condition, outcomes=parse_outcomes(outcome), model=model,
                                model_name=model_name, run=run, status=status, ok_values=tuple(ok), error=error,
                                input_tokens=input_tokens, output_tokens=output_tokens, probe=probe, kind=kind,
                                contrasts=tuple(parse_contrast(c) for c in contrast))
        counts = import_trials(path, dest, mapping, force=force)
    except UserError as exc:
        raise fail(exc) from None
    out.print(Text(f"{sum(counts.values()):,} trials ({', '.join(f'{k} {v:,}' for k, v in sorted(counts.items()))}); "
                   f"wrote {dest}; report it with: trialgrid report {dest}"), soft_wrap=True)


@_import_app.command("agentprop")
def import_agentprop_cmd(
    path: Path = typer.Argument(..., help="The folder holding AgentProp-Bench's per-trace CSVs."),
    dest: Path = typer.Option(Path("out/agentprop"), "--out", "-o", help="Output directory for the imported run."),
    force: bool = typer.Option(False, "--force", help="Replace a run already in --out."),
) -> None:
    """Import AgentProp-Bench's per-trace CSVs as a trialgrid run (interceptor, p2, baseline, judges)."""
    from runner.importers import import_agentprop

    try:
        counts = import_agentprop(path, dest, force=force)
    except UserError as exc:
        raise fail(exc) from None
    for probe, n in counts.items():
        out.print(Text(f"{probe:12s} {n:7,d} rows"))
    out.print(Text(f"wrote {dest}; report it with: trialgrid report {dest}"), soft_wrap=True)


@_import_app.command("traces")
def import_traces_cmd(
    paths: list[Path] = typer.Argument(..., help="Trace files: OTLP JSON, request/response pairs (JSON lines), "
                                       "Langfuse observations, inspect_ai .eval logs."),
    fmt: str = typer.Option("auto", "--format", "-f", help="auto, otlp, openai-chat, openai-responses, anthropic, "
                            "langfuse or inspect (auto: from each file's first record; the choice is printed)."),
    dest: Path = typer.Option(..., "--out", "-o", help="Folder for traces.jsonl (one phantom trace per tool call) "
                              "and import.json (counts, skips by reason)."),
    max_record_mb: int = typer.Option(32, "--max-record-mb", min=1, max=4096,
                                      help="Refuse (skip, in one line) any single record larger than this."),
    force: bool = typer.Option(False, "--force", help="Overwrite an earlier import in --out."),
) -> None:
    """Import tool calls from production traces as phantom traces (one per call, with its context and the
    source's own ids), for a `kind: phantom` sweep with `traces: OUT/traces.jsonl`."""
    from runner.importers.traces import import_traces

    try:
        summary = import_traces(paths, dest, fmt=fmt, force=force, limit=max_record_mb * 1024 * 1024,
                                say=lambda line: out.print(Text(line), soft_wrap=True))
    except UserError as exc:
        raise fail(exc) from None
    skipped = sum(summary.skipped.values())
    out.print(Text(f"{summary.imported:,} tool calls imported from {summary.records:,} records "
                   f"({', '.join(f'{k} {v:,}' for k, v in sorted(summary.imported_by.items())) or 'none'}); "
                   f"{skipped:,} skipped" + (f" ({', '.join(f'{k} {v:,}' for k, v in sorted(summary.skipped.items()))})"
                                             if skipped else "")), soft_wrap=True)
    if summary.incomplete:
        kept = sum(summary.incomplete.values())
        out.print(Text(f"{kept:,} tool call{'s' if kept > 1 else ''} kept apart, not to be audited: the source cut "
                       f"their context short ({', '.join(f'{k}: {v:,}' for k, v in sorted(summary.incomplete.items()))})"
                       f"; in {dest / 'traces-incomplete.jsonl'}"), soft_wrap=True)
    out.print(Text(f"wrote {dest / 'traces.jsonl'} and {dest / 'import.json'}"), soft_wrap=True)


@app.command()
def report(
    out_dirs: list[Path] = typer.Argument(..., help="One or more run output directories."),
    json_file: Path | None = typer.Option(None, "--json", help="Write the summary as JSON (schema: runner/schemas/summary.schema.json)."),
    csv_dir: Path | None = typer.Option(None, "--csv", help="Write the summary tables as CSV files into this directory."),
    html_file: Path | None = typer.Option(None, "--html", help="Write a self-contained HTML page with plots."),
    details: bool = typer.Option(False, "--details", help="Also print the per-model tables, each probe's views and "
                                 "the methods paragraph (default: leaderboards, scorecard and cost only)."),
    no_details: bool = typer.Option(False, "--no-details", hidden=True, help="The default (kept for old scripts)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print nothing; only write the files asked for."),
    badge_dir: Path | None = typer.Option(None, "--badge", help="Write one SVG badge per model with its "
                                             "misselection scorecard verdict into this directory."),
    listings_dir: Path | None = typer.Option(None, "--listings", metavar="DIR",
                                             help="Write each listing view (e.g. the phantom disagreements) as "
                                                  "<probe>.<view>.jsonl into this directory (--csv writes them "
                                                  "beside the CSV files too). Never written into a run."),
    gate: list[str] = typer.Option([], "--gate", metavar="GATE", help=_GATE_HELP),
    findings: Path | None = typer.Option(None, "--findings", metavar="FILE", help="A phantom run over imported "
                                         "traces: write one JSON line per flagged field, keyed by the source's ids "
                                         "(see docs/audit-traces.md)."),
) -> None:
    """Leaderboards and per-model tables for one or many finished (or partial) runs. Reads the runs, never
    writes into them (a read-only or archived output reports the same)."""
    from runner.analysis import warmup
    from runner.analysis.leaderboard import summarize
    from runner.output import Output
    from runner.reporting.listings import write_listings
    from runner.reporting.terminal import print_summary

    warmup.start()  # the statistics' kernels load while the outputs are opened and read (runner.analysis.warmup)

    def said(line: str) -> None:  # --quiet prints nothing (errors still do)
        if not quiet:
            err.print(Text(one_line(line)), soft_wrap=True)

    try:
        gates = _parse_gates(gate)  # a malformed gate is bad input, found before any work
        summary = summarize([Output.open(o) for o in out_dirs])  # each output opened once, passed down
        listings = {}
        for directory in (listings_dir, csv_dir):
            if directory is not None:
                listings.update(write_listings(summary, directory))
        if not quiet:
            print_summary(summary, out, details=details and not no_details, listings=listings)
            if not details or no_details:  # (--details says where each listing went, beside its view)
                for path in dict.fromkeys(listings.values()):
                    said(f"wrote {path}")
        if findings is not None:
            from runner.cli.audit import run_findings

            if len(out_dirs) != 1:
                raise UserError("--findings takes one run", hint="report each run with its own --findings FILE")
            n, events = run_findings(out_dirs[0], findings)
            said(f"wrote {n} finding(s) to {findings}" + (f" and {events} evaluation event(s) beside it"
                                                         if events else ""))
        if json_file is not None:
            from runner.reporting.summary_json import write_json

            write_json(summary, json_file)
            said(f"wrote {json_file}")
        if csv_dir is not None:
            from runner.reporting.summary_csv import write_csv

            write_csv(summary, csv_dir)
            said(f"wrote {csv_dir}/*.csv")
        if html_file is not None:
            from runner.reporting.html import write_html

            write_html(summary, html_file)
            said(f"wrote {html_file}")
        if badge_dir is not None:
            from runner.reporting.badges import write_badges

            badges = write_badges(summary, badge_dir)
            said(f"wrote {len(set(badges))} badge(s) into {badge_dir}")
        if gates:  # gates on intervals (runner.analysis.gates)
            _interval_gates(summary, gates)
    except UserError as exc:
        raise fail(exc) from None


def _floats(text: str, what: str) -> list[float]:
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise fail(UserError(f"{what}: expected comma-separated numbers, got {text!r}")) from None
    if not all(math.isfinite(v) for v in values):  # an int() of inf would overflow: refused as written
        raise fail(UserError(f"{what}: expected finite numbers, got {text!r}"))
    return values


@app.command()
def plan(
    arm_a: str = typer.Option(..., "--arm-a", help="Expected rate of each arm-A condition, comma-separated (e.g. 0.09,0.17)."),
    arm_b: str = typer.Option(..., "--arm-b", help="Expected rate of each arm-B condition, comma-separated (e.g. 0.017)."),
    sd: float = typer.Option(1.0, "--sd", help="Prompt-level heterogeneity: logit-normal sd of cell rates across prompts."),
    shared: float = typer.Option(0.0, "--shared", help="Share of that variance common to a prompt's cells (0–1)."),
    prompts: str = typer.Option("6,12,24,48", "--prompts", help="Prompt counts to try."),
    runs: str = typer.Option("5,10,20,40", "--runs", help="Runs per cell to try."),
    budget_trials: int | None = typer.Option(None, "--budget-trials", help="At most this many trials."),
    budget_usd: float | None = typer.Option(None, "--budget-usd", help="At most this many dollars (needs --cost-per-trial)."),
    cost_per_trial: float | None = typer.Option(None, "--cost-per-trial", help="USD per trial (see `trialgrid report` for a measured one)."),
    target: float = typer.Option(0.8, "--target-power", help="Power the design must reach."),
    alpha: float = typer.Option(0.05, "--alpha", help="Significance level of the cell-level permutation test."),
    sims: int = typer.Option(500, "--sims", help="Simulated studies per design."),
    seed: int = typer.Option(0, "--seed"),
) -> None:
    """Simulate power and interval width of prompts × runs designs and recommend one."""
    from runner.analysis.planner import plan_designs, same_budget_tradeoffs
    from runner.reporting.plan import print_plan

    a, b = _floats(arm_a, "--arm-a"), _floats(arm_b, "--arm-b")
    try:
        result = plan_designs(a + b, [1] * len(a) + [0] * len(b), prompts=[int(x) for x in _floats(prompts, "--prompts")],
                              runs=[int(x) for x in _floats(runs, "--runs")], sd=sd, shared=shared, alpha=alpha,
                              target_power=target, budget_trials=budget_trials, budget_usd=budget_usd,
                              cost_per_trial=cost_per_trial, n_sims=sims, seed=seed)
    except ValueError as exc:
        raise fail(UserError(str(exc))) from None
    print_plan(result, same_budget_tradeoffs(result), out, sd=sd, alpha=alpha)


@app.command()
def template(
    kind: str = typer.Argument(..., help="Probe kind, e.g. misselection."),
    dest: Path | None = typer.Option(None, "--out", "-o", help="Write here instead of stdout (refuses to overwrite)."),
) -> None:
    """Write a starter case file for a probe kind."""
    from runner.probes import PROBES

    probe = PROBES.get(kind)
    if probe is None or not probe.template:
        raise fail(UserError(f"no template for probe kind {kind!r}: expected one of {', '.join(PROBES)}"))
    if dest is None:
        sys.stdout.write(probe.template)
        return
    if dest.exists():
        raise fail(UserError("file exists; not overwriting", file=dest))
    dest.write_text(probe.template)
    plain(f"wrote {dest}")


@app.command()
def serve(
    port: int = typer.Option(8000, "--port", "-p", help="Port on 127.0.0.1 (0: any free port, printed at start)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Loopback address to bind (127.x.x.x, localhost or ::1 only)."),
    latency_ms: float = typer.Option(0.0, "--latency-ms", min=0, help="Mean response latency."),
    latency_dist: str = typer.Option("fixed", "--latency-dist", help="fixed, uniform, exponential or lognormal."),
    latency_spread_ms: float = typer.Option(0.0, "--latency-spread-ms", min=0,
                                            help="uniform: half-width; lognormal: standard deviation."),
    faults: float = typer.Option(0.0, "--faults", min=0, max=1,
                                 help="Fault every response with this probability, all kinds mixed evenly."),
    fault: list[str] = typer.Option([], "--fault", help="KIND=RATE, repeatable; kinds: 429 500 503 529 slow reset malformed truncated disconnect stall bad_chunk drip."),
    fault_seed: int = typer.Option(0, "--fault-seed", help="Seed of the fault and latency draws."),
    retry_after_s: float = typer.Option(1.0, "--retry-after", min=0, help="Retry-After of an injected 429 (s)."),
    slow_s: float = typer.Option(30.0, "--slow-s", min=0, help="How long a 'slow' fault holds its answer (s)."),
    reject: list[str] = typer.Option([], "--reject", help="Parameter rule, repeatable: drop:P, rename:OLD:NEW, "
                                     "require:P=V[:tools], each optionally @MODEL_GLOB."),
    rpm: int | None = typer.Option(None, "--rpm", min=1, help="The server's own limit per API key, with real 429s."),
    rpm_window_s: float = typer.Option(60.0, "--rpm-window-s", min=0.001, help="Window of --rpm (s)."),
    rpm_mode: str = typer.Option("window", "--rpm-mode", help="How --rpm is enforced: window (a sliding window, one "
                                 "long Retry-After when full) or bucket (a token bucket with short Retry-Afters, "
                                 "as the vendors enforce)."),
    rpm_burst: int | None = typer.Option(None, "--rpm-burst", min=1, help="--rpm-mode bucket: the bucket's size "
                                         "(default: one second's worth of --rpm)."),
    rate_headers: bool = typer.Option(True, "--rate-headers/--no-rate-headers", help="Send the vendor's rate-limit "
                                      "headers on every answer while --rpm is set (off: 429s carry only Retry-After)."),
    key_env: list[str] = typer.Option([], "--key-env", help="Accept only the API key held by this environment "
                                      "variable (repeatable); default: any key."),
    batch_delay_s: float = typer.Option(0.0, "--batch-delay-s", min=0, help="Batch APIs: seconds until a batch ends."),
    batch_error_rate: float = typer.Option(0.0, "--batch-error-rate", min=0, max=1,
                                           help="Batch APIs: share of requests answered with a 500 error result."),
    batch_expire_rate: float = typer.Option(0.0, "--batch-expire-rate", min=0, max=1,
                                            help="Batch APIs: share of requests left unprocessed, as expired."),
    echo_key: bool = typer.Option(False, "--echo-key", help="Fault: repeat the request's API key in every answer's "
                                  "text and every error message (a client must never write it)."),
    keys_of: Path | None = typer.Option(None, "--keys", metavar="SWEEP", help="Answer model `oracle` from this sweep's "
                                     "case keys (the oracle persona), so a sweep whose HTTP model is `oracle` proves "
                                     "its cases passable over the wire."),
) -> None:
    """Serve the simulated agent over the OpenAI and Anthropic wire formats on loopback, with faults and limits."""
    import ipaddress
    import os

    from runner.sim.serve import ServeOptions, parse_fault, parse_rule, serve_forever

    try:
        if host != "localhost" and not ipaddress.ip_address(host).is_loopback:
            raise ValueError(f"--host {host} is not a loopback address; trialgrid serve only listens on this machine")
        mix = ServeOptions.mixed_faults(faults) if faults else {}
        for spec in fault:
            kind, rate = parse_fault(spec)
            mix[kind] = rate
        keys = []
        for name in key_env:
            if not os.environ.get(name, "").strip():
                raise ValueError(f"--key-env {name}: environment variable {name} is not set")
            keys.append(os.environ[name].strip())
        options = ServeOptions(host=host, port=port, latency_ms=latency_ms, latency_dist=latency_dist,
                               latency_spread_ms=latency_spread_ms, faults=mix, fault_seed=fault_seed,
                               fault_retry_after_s=retry_after_s, slow_s=slow_s,
                               rules=[parse_rule(r) for r in reject], rpm=rpm, rpm_window_s=rpm_window_s,
                               rpm_mode=rpm_mode, rpm_burst=rpm_burst, rate_headers=rate_headers,
                               keys=tuple(keys), batch_delay_s=batch_delay_s, batch_error_rate=batch_error_rate,
                               batch_expire_rate=batch_expire_rate,
                               echo_key=echo_key)
    except ValueError as exc:
        raise fail(UserError(str(exc))) from None
    if keys_of is not None:
        from runner.config.sweep import load_sweep
        from runner.sim.oracle import learn

        try:
            learn(load_sweep(keys_of).probes)
        except UserError as exc:
            raise fail(exc) from None
    try:
        serve_forever(options, _print_line)
    except OSError as exc:
        raise fail(UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                              hint="choose another --port, or --port 0 for any free one")) from None


register_view(app)  # `trialgrid view` (runner/cli/view.py)
_register_audit(app)  # trialgrid audit, trialgrid sample (runner/cli/audit.py)
_register_check(app)  # trialgrid check (runner/cli/check.py)


# Optional parts of trialgrid plug in through entry points (pyproject.toml), so that
# ``runner`` never imports them: cluster mode registers its commands (submit, status,
# logs) here, and its ``ray`` run backend under ``trialgrid.backends``, which
# ``runner.execution.backends.registry`` looks up for ``runner.run``.
_COMMANDS = "trialgrid.commands"


def load_plugins(target: typer.Typer) -> None:
    """Add the commands registered under ``trialgrid.commands`` (each a ``register(app)``)."""
    for entry in metadata.entry_points(group=_COMMANDS):
        try:
            entry.load()(target)
        except Exception as exc:
            warn([f"commands from {entry.value} not loaded: {exc}"])


def main() -> None:
    try:
        load_plugins(app)  # may import cluster mode (Ray): Ctrl-C here is still a clean exit
        app()
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
