"""The ``trialgrid`` command line.

Exit codes: 0 ok; 1 the run finished but something the user asked to gate on
failed; 2 bad input (config, case file, output directory). Bad input prints one
located line on stderr, never a traceback.
"""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from runner.errors import UserError

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Measure how tool-calling LLM agents fail to ground what they do.")
err = Console(stderr=True, highlight=False)
out = Console(highlight=False)

EXIT_OK, EXIT_GATE, EXIT_BAD_INPUT = 0, 1, 2


def _version(value: bool) -> None:
    if value:
        try:
            version = metadata.version("trialgrid")
        except metadata.PackageNotFoundError:
            version = "unknown (not installed)"
        out.print(f"trialgrid {version}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _main(version: Optional[bool] = typer.Option(None, "--version", callback=_version, is_eager=True,
                                                  help="Print the version and exit.")) -> None:
    """trialgrid: grids of trials against tool-calling agents, with prompt-clustered statistics."""


def _fail(exc: UserError) -> "typer.Exit":
    err.print(f"[bold red]error:[/bold red] {exc}", markup=True, soft_wrap=True)
    return typer.Exit(EXIT_BAD_INPUT)


def _warn(lines: list[str]) -> None:
    for line in lines:
        err.print(f"[yellow]warning:[/yellow] {line}", soft_wrap=True)


@app.command()
def validate(sweep: Path = typer.Argument(..., help="Sweep file (YAML).")) -> None:
    """Check a sweep file and every file it names, without running anything."""
    from runner.config import load_sweep
    from runner.run import grid_of

    try:
        loaded = load_sweep(sweep)
    except UserError as exc:
        raise _fail(exc) from None
    _warn(loaded.warnings)
    grid = grid_of(loaded)
    out.print(f"{sweep}: ok — sweep {loaded.sweep.name!r} (id {loaded.sweep_id}), "
              f"{len(loaded.sweep.models)} model(s), {len(loaded.probes)} probe(s), {len(grid):,} trials")


@app.command()
def run(
    sweep: Path = typer.Argument(..., help="Sweep file (YAML)."),
    out_dir: Optional[Path] = typer.Option(None, "--out", "-o", help="Output directory (overrides the sweep's `output`)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar and no report; errors still print."),
    no_report: bool = typer.Option(False, "--no-report", help="Do not print the report at the end."),
) -> None:
    """Run a sweep (or resume it: trial ids already in the output are skipped)."""
    from runner.config import load_sweep
    from runner.report import print_report
    from runner.run import run_sweep

    try:
        loaded = load_sweep(sweep)
        _warn(loaded.warnings)
        target = out_dir or Path(loaded.sweep.output)
        say = (lambda s: None) if quiet else (lambda s: err.print(s, soft_wrap=True))
        result = run_sweep(loaded, target, quiet=quiet, say=say)
    except UserError as exc:
        raise _fail(exc) from None
    except KeyboardInterrupt:
        err.print("interrupted: finished trials are saved; rerun the same command to resume")
        raise typer.Exit(130) from None
    if not quiet:
        err.print(f"{result.stats.done:,} trials run ({result.skipped:,} already done) in {result.elapsed_s:.1f} s; "
                  f"counts: {result.counts}; output: {target}")
        if not no_report:
            print_report(target, out)


@app.command()
def report(out_dir: Path = typer.Argument(..., help="A run's output directory.")) -> None:
    """Print rates by model, probe and condition for a finished (or partial) run."""
    from runner.report import print_report

    try:
        print_report(out_dir, out)
    except UserError as exc:
        raise _fail(exc) from None


@app.command()
def template(
    kind: str = typer.Argument(..., help="Probe kind, e.g. misselection."),
    dest: Optional[Path] = typer.Option(None, "--out", "-o", help="Write here instead of stdout (refuses to overwrite)."),
) -> None:
    """Write a starter case file for a probe kind."""
    from runner.probes import PROBES

    probe = PROBES.get(kind)
    if probe is None or not probe.template:
        raise _fail(UserError(f"no template for probe kind {kind!r}: expected one of {', '.join(PROBES)}"))
    if dest is None:
        sys.stdout.write(probe.template)
        return
    if dest.exists():
        raise _fail(UserError("file exists; not overwriting", file=dest))
    dest.write_text(probe.template)
    err.print(f"wrote {dest}")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
