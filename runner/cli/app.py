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
import sys
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.text import Text
from typer._click.exceptions import BadParameter
from typer.core import TyperGroup

from runner.cli.audit import register as register_audit
from runner.cli.console import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    count_text,
    err,
    fail,
    messages_as_lines,
    out,
    plain,
    warn,
    warnings_as_lines,
)
from runner.cli.diff import register as register_diff
from runner.cli.gates import GATE_HELP, interval_gates, parse_gates
from runner.cli.imports import register as register_import
from runner.cli.plan import register as register_plan
from runner.cli.run import expand_retry_errors
from runner.cli.run import register as register_run
from runner.cli.serve import register as register_serve
from runner.cli.validate import register as register_validate
from runner.cli.view import register as register_view
from runner.core.errors import TrialgridError, UserError
from runner.core.safety import one_line
from runner.core.version import trialgrid_version


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


class _GuardedGroup(TyperGroup):
    """Every command: bad input, an OS failure or Ctrl-C end in one line on stderr, never a traceback."""

    def main(self, args: Any = None, *pos: Any, **kw: Any) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        return super().main(expand_retry_errors(argv), *pos, **kw)

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
    pass



# No locals in tracebacks: a provider's frames hold request headers, i.e. the API key.
app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None, pretty_exceptions_show_locals=False,
                  cls=_GuardedGroup, help="Measure how tool-calling LLM agents fail to ground what they do.")


def _version(value: bool) -> None:
    if value:
        out.print(f"trialgrid {trialgrid_version()}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _main(version: bool | None = typer.Option(None, "--version", callback=_version, is_eager=True,
                                                  help="Print the version and exit.")) -> None:
    """trialgrid: grids of trials against tool-calling agents, with prompt-clustered statistics."""


register_validate(app)  # trialgrid validate (runner/cli/validate.py)
register_run(app)  # trialgrid run (runner/cli/run.py)
register_diff(app)  # trialgrid diff (runner/cli/diff.py)


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
          f"{result.errors_kept:,} error rows kept as errors; {count_text(result.counts)}")


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
    gate: list[str] = typer.Option([], "--gate", metavar="GATE", help=GATE_HELP),
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
        gates = parse_gates(gate)  # a malformed gate is bad input, found before any work
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
            interval_gates(summary, gates)
    except UserError as exc:
        raise fail(exc) from None


register_plan(app)  # trialgrid plan (runner/cli/plan.py)


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


register_serve(app)  # trialgrid serve (runner/cli/serve.py)
register_view(app)  # `trialgrid view` (runner/cli/view.py)
register_audit(app)  # trialgrid audit, trialgrid sample (runner/cli/audit.py)
register_import(app)  # trialgrid import … (runner/cli/imports.py)


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
