"""Cluster mode's part of the ``trialgrid`` command line, found through entry points.

``runner`` must never import ``cluster``, yet ``trialgrid run --ray`` and
``trialgrid job submit`` are one command line. pyproject.toml registers, under the
entry-point groups ``runner.cli.app`` looks up by name:

- ``trialgrid.backends``: ``ray = cluster.cli:ray_backend`` — the backend ``runner.run`` picks for
  ``mode="ray"`` (``trialgrid run --ray``);
- ``trialgrid.commands``: ``cluster = cluster.cli:register`` — adds the ``job`` group
  (``trialgrid job submit|status|logs``: Ray Jobs) to the app.

The lookup runs on every ``trialgrid`` command (``--version`` and ``--help`` too), so this
module imports nothing heavy at load — not Ray, not the sweep, engine or backend modules
(each of those costs a noticeable part of a second): every command and the backend import
what they need when they run. Ray itself is an extra (``pip install 'trialgrid[ray]'``);
without it, ``run --ray`` and these commands say so in one line (``cluster.session.require_ray``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from runner.core.errors import UserError
from runner.core.messages import logger

if TYPE_CHECKING:
    from runner.config.sweep import LoadedSweep
    from runner.execution.backends import Plan
    from runner.execution.options import RunOptions
    from runner.execution.run import RunResult

_ADDRESS_ENV = "RAY_ADDRESS"


class _RayBackend:
    """``trialgrid run SWEEP --ray ADDRESS`` and ``runner.run(..., mode="ray")``: the same run, on Ray.

    A budget and the response cache are shared across the workers (``cluster.spend``,
    ``cluster.cache``); batch mode asked for with ``--ray`` never gets here — it runs on
    the driver (``runner.execution.modes`` holds the rules of every mode).
    """

    name = "ray"

    def run(self, loaded: LoadedSweep, out: Path, options: RunOptions, plan: Plan) -> RunResult:
        from cluster.options import RayOptions
        from cluster.session import require_ray

        given = {k: v for k, v in (("address", options.address), ("workers", options.workers)) if v is not None}
        ray_options = RayOptions.of({**options.backend_options, **given})
        require_ray("--ray")  # before the output is touched
        from cluster.driver import run_on_ray

        return run_on_ray(loaded, out, options, ray_options)


#: what the ``trialgrid.backends`` entry point ``ray`` names
ray_backend = _RayBackend()


def _stderr(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()


def _stdout(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def register(app: typer.Typer) -> None:
    """Add the Ray Jobs commands to the ``trialgrid`` app, as the group ``trialgrid job``."""
    from cluster.session import require_ray
    from runner.cli import err, fail, out, plain

    job = typer.Typer(help="Run a sweep as a Ray Job on a cluster, and follow it (submit, status, logs).",
                      no_args_is_help=True, add_completion=False)
    app.add_typer(job, name="job")

    address_option = typer.Option(..., "--address", envvar=_ADDRESS_ENV,
                                  help="The head's Ray Jobs (dashboard) address, e.g. http://HEAD:8265 "
                                       f"(default: ${_ADDRESS_ENV}).")

    @job.command()
    def submit(
        sweep: Path = typer.Argument(..., help="Sweep file (YAML), inside the project directory."),
        address: str = address_option,
        out_dir: str = typer.Option(..., "--out", "-o", help="Output directory on the head node (absolute path)."),
        workers: int | None = typer.Option(None, "--workers", min=1, help="Worker actors (default: one per CPU)."),
        project: Path = typer.Option(Path("."), "--project",
                                     help="Directory uploaded as the job's working directory (default: here)."),
        strict_params: bool = typer.Option(False, "--strict-params", help="No remedies: a rejected parameter fails."),
        cache: str | None = typer.Option(None, "--cache", metavar="DIR",
                                         help="Response cache directory on the head node (absolute path), served "
                                              "to every worker by one actor there."),
        wait: bool = typer.Option(True, "--wait/--no-wait", help="Follow the job's log until it ends."),
    ) -> None:
        """Run a sweep on a Ray cluster through Ray Jobs (the project directory travels with it)."""
        try:
            require_ray("trialgrid job submit")
            from cluster import jobs
            from runner.config.sweep import load_sweep
            from runner.execution.modes import RAY, plan
            from runner.execution.options import RunOptions

            # a broken sweep, or one that cannot run on Ray, fails here, not on the cluster
            plan(load_sweep(sweep), None, RunOptions(mode=RAY, workers=workers, cache=cache))
            job_id = jobs.submit(sweep, address=address, out=out_dir, project=project, workers=workers,
                                 strict_params=strict_params, cache=cache)
        except UserError as exc:
            raise fail(exc) from None
        plain(f"submitted job {job_id} to {address}; output: {out_dir} on the head node")
        plain(f"  follow: trialgrid job logs {job_id} --address {address} --follow")
        out.print(job_id, markup=False, highlight=False)
        if wait:
            state = jobs.follow(job_id, address=address, write=_stderr)
            plain(f"job {job_id}: {state}")
            if state != "SUCCEEDED":
                raise typer.Exit(1)

    @job.command()
    def status(job_id: str = typer.Argument(..., help="Job id printed by submit."),
               address: str = address_option) -> None:
        """Print a submitted job's status (PENDING, RUNNING, SUCCEEDED, FAILED, STOPPED) and its run's summary.

        The state goes to stdout; the summary (trials done, rate per worker, requests in
        flight, limiter waits, re-queued chunks, spend) to stderr, read from the output's
        manifest, which the driver rewrites as it goes — when the output directory is
        readable here (on the head node, or a shared filesystem).
        """
        try:
            require_ray("trialgrid job status")
            from cluster import jobs
            from cluster.watch import output_summary

            out.print(jobs.status(job_id, address=address), markup=False, highlight=False)
            where = jobs.output_dir(job_id, address=address)
        except UserError as exc:
            raise fail(exc) from None
        if where is not None:
            err.print(output_summary(Path(where)), markup=False, highlight=False)

    @job.command()
    def logs(job_id: str = typer.Argument(..., help="Job id printed by submit."),
             address: str = address_option,
             follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing until the job ends.")) -> None:
        """Print a submitted job's log (the driver's output: progress, remedies, the report)."""
        try:
            require_ray("trialgrid job logs")
            from cluster import jobs

            if follow:
                jobs.follow(job_id, address=address, write=_stdout)
            else:
                sys.stdout.write(jobs.logs(job_id, address=address))
        except UserError as exc:
            raise fail(exc) from None


def job_main(argv: list[str] | None = None) -> int:
    """``python -m cluster run SWEEP --out OUT``: the entrypoint of a submitted job (driver on the head).

    The run goes through ``runner.run`` as every other run does (the mode and its rules are
    ``runner.execution.modes``'); an address means Ray.
    """
    import argparse

    parser = argparse.ArgumentParser(prog="python -m cluster", description="Run a sweep on the Ray cluster "
                                     "this process belongs to (the entrypoint `trialgrid job submit` gives a job).")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run")
    run.add_argument("sweep", type=Path)
    run.add_argument("--out", required=True, type=Path)
    run.add_argument("--workers", type=int, default=None)
    run.add_argument("--address", default=os.environ.get("TRIALGRID_RAY_ADDRESS", "auto"))
    run.add_argument("--strict-params", action="store_true")
    run.add_argument("--cache", type=Path, default=None)
    args = parser.parse_args(argv)
    from runner.cli.console import messages_as_lines

    with messages_as_lines():  # what the run says goes to the job's log (stderr), as on the command line
        return _job_run(args)


def _job_run(args: Any) -> int:
    """The job's run (``args``: ``job_main``'s parsed arguments), what it says going to the job's log."""
    from cluster.session import ray_session
    from runner.execution import modes
    from runner.execution.backends import register_backend
    from runner.reporting.terminal import print_report

    say = logger.info
    out = args.out.resolve()
    # a job's head may run the uploaded code without installed entry points: name the Ray backend here
    register_backend(modes.RAY, ray_backend)
    try:
        with ray_session(args.address, ship_code=False):  # the job's runtime env carries the code
            result = modes.run(args.sweep, out, address=args.address, workers=args.workers, cache=args.cache,
                               strict_params=args.strict_params, quiet=True)
            if result.stopped:
                say(f"stopped: {result.stopped}")
            say(f"{result.stats.done:,} trials run ({result.skipped:,} already done) in {result.elapsed_s:.1f} s; "
                f"counts: {result.counts}; output: {out}")
            try:
                os.getcwd()
            except FileNotFoundError:  # Ray reclaimed the job's working directory once its workers were gone
                os.chdir(out)
            print_report(out)
    except UserError as exc:
        say(f"error: {exc}")
        return 2
    return 0
