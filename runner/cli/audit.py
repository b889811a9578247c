"""``trialgrid audit`` and ``trialgrid sample``: audit imported traces with the baseline (offline), label a sample.

Why a module of its own: the audit path does not go through a sweep (``runner.probes.phantom.audit`` says
why), so it has its own commands: ``audit`` writes and reports an audit directory (``fields.parquet``),
``sample`` writes the labelling sheet from one, and ``audit DIR --labels FILE`` reads the labels back. The
decisions are in ``runner.probes.phantom``: ``audit``, ``report``, ``calibration``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from runner.cli.console import fail, note, plain, warn
from runner.core.errors import UserError
from runner.core.heap import release_freed

if TYPE_CHECKING:
    import polars as pl


def _is_audit_dir(paths: list[Path]) -> bool:
    from runner.probes.phantom.audit import FIELDS_FILE

    return len(paths) == 1 and paths[0].is_dir() and (paths[0] / FIELDS_FILE).is_file()


def _run_rows(run: Path) -> pl.DataFrame:
    """The ``ok`` phantom rows of a run: the auditor's verdicts (a phantom row always has ``baseline_fields``)."""
    import polars as pl

    from runner.output import Output

    frame = Output.open(run).scan()
    if "baseline_fields" not in frame.collect_schema().names():
        raise UserError("the run holds no phantom audits", file=run, hint="run a sweep with a phantom probe")
    cols = ["model", "condition", "case_id", "run", "pred_fields", "baseline_fields", "auditor_error"]
    return frame.filter((pl.col("status") == "ok") & pl.col("baseline_fields").is_not_null()).select(cols).collect()


def audit(
    paths: list[Path] = typer.Argument(None, help="Trace files (JSON lines, as `trialgrid import traces` writes "
                                       "them), or one audit directory to report again.", show_default=False),
    out_dir: Path | None = typer.Option(None, "--out", "-o", help="The audit directory to write (fields.parquet)."),
    run: Path | None = typer.Option(None, "--run", help="A phantom run's output over the same traces: its "
                                    "auditor's verdicts go beside the baseline's."),
    hide_results: bool = typer.Option(False, "--hide-results", help="Audit as the results_hidden condition (the "
                                      "earlier tool results withheld)."),
    workers: int = typer.Option(0, "--workers", min=0, help="Processes for the baseline (0: one per core)."),
    labels: Path | None = typer.Option(None, "--labels", help="A labelling sheet filled in by a person "
                                       "(`trialgrid sample`): scores against people, calibrated rates."),
    findings: Path | None = typer.Option(None, "--findings", help="Write one JSON line per flagged field, keyed by "
                                         "the source's ids (and OTel gen_ai.evaluation.result events beside it)."),
    listings: Path | None = typer.Option(None, "--listings", metavar="DIR", help="Write the disagreements, by "
                                         "direction, as JSON lines here."),
    seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap intervals."),
    listen: str | None = typer.Option(None, "--listen", metavar="[HOST:]PORT", help="Receive OTLP/HTTP traces "
                                      "(POST /v1/traces, protobuf or JSON) and audit each call as it arrives, "
                                      "into --out, until Ctrl-C. Loopback unless HOST says otherwise."),
    token_env: str | None = typer.Option(None, "--token-env", metavar="VAR", help="With --listen: senders must "
                                         "send the token in this environment variable as a bearer token "
                                         "(required off loopback)."),
    export_to: str | None = typer.Option(None, "--export-to", metavar="URL", help="With --listen: send each "
                                         "finding as an OTel gen_ai.evaluation.result event to this OTLP/HTTP "
                                         "endpoint (a Collector's http://HOST:4318, or its /v1/logs URL); headers "
                                         "from OTEL_EXPORTER_OTLP_HEADERS."),
) -> None:
    """Audit traces for phantom arguments with the containment baseline — offline, nothing is sent — and report
    flag rates per tool argument (and agreement with an auditor run, and precision / recall where gold exists)."""
    if listen is not None:
        _listen(listen, token_env, out_dir, bool(paths) or run is not None or labels is not None, export_to)
        return
    if export_to is not None:
        raise fail(UserError("--export-to sends the findings of traces received with --listen",
                             hint="trialgrid audit --listen 4318 --out live/ --export-to http://collector:4318; "
                                  "an audit of files writes its events with --findings"))
    from runner.probes.phantom import audit as A
    from runner.probes.phantom.calibration import audit_views, read_labels, write_findings
    from runner.reporting.terminal import print_views

    summary: A.AuditSummary | None = None
    try:
        if not paths:
            raise UserError("give trace files to audit (or one audit directory), or --listen PORT to receive them",
                            hint="e.g. trialgrid audit traces/traces.jsonl --out audit/")
        if _is_audit_dir(paths):
            if run is not None or out_dir is not None:
                raise UserError("an audit directory is reported as it is; --run and --out write a new one",
                                file=paths[0], hint="give the trace files to audit them again")
            directory = paths[0]
        else:
            if out_dir is None:
                raise UserError("--out DIR is needed to audit trace files", hint="e.g. --out audit/")
            for p in paths:
                if not p.exists():
                    raise UserError("no such file", file=p,
                                    hint="give the traces.jsonl that `trialgrid import traces` wrote (or one audit directory)")
                if not p.is_file():
                    raise UserError("not a trace file", file=p, hint="give JSON lines files (or one audit directory)")
            rows = _run_rows(run) if run is not None else None
            summary = A.audit_files(paths, out_dir, hide_results=hide_results, run_rows=rows,
                                    workers=workers or (os.cpu_count() or 1))
            release_freed()  # the audit's buffers go back before the report reads what it wrote
            warn([f"skipped {line}" for line in summary.notes])
            skipped = ", ".join(f"{n} {r}" for r, n in sorted(summary.skipped.items()))
            note(f"audited {summary.traces} trace(s), {summary.calls} call(s), {summary.fields} field(s)"
                 + (f"; skipped {skipped}" if skipped else "") + f" → {out_dir}"
                 + ("" if rows is not None else " (baseline only: nothing left this machine)"))
            directory = out_dir
        auditor = bool(A.read_meta(directory).get("auditor"))
        if auditor or labels is not None:  # the disagreements and the labels' join need the units themselves
            fields = A.read_fields(directory, A.VIEW_COLUMNS + (A.LISTING_COLUMNS if auditor else ()))
        else:  # baseline only: the rates from per-conversation counts, memory independent of the calls
            fields = A.read_counts(directory)
        from runner.analysis.warmup import say_if_compiling

        say_if_compiling()  # the rates' intervals: a fresh install compiles their kernels first
        views = audit_views(fields, seed=seed, labels=read_labels(labels) if labels is not None else None)
        written: dict[str, Path] = {}
        if listings is not None:
            from runner.core.safety import confined

            listings.mkdir(parents=True, exist_ok=True)
            for view in views:
                if view.listing:
                    path = confined(listings, f"{view.key}.jsonl")
                    with path.open("w", encoding="utf-8") as fh:
                        for r in view.table.iter_rows(named=True):
                            fh.write(json.dumps({k: v for k, v in r.items() if v is not None},
                                                ensure_ascii=False) + "\n")
                    written[view.key] = path
        print_views(views, listings=written)
        if findings is not None:
            n, events = write_findings(A.read_fields(directory, flagged_only=True), findings)
            plain(f"wrote {n} finding(s) to {findings}"
                  + (f" and {events} gen_ai.evaluation.result event(s) beside it" if events else ""))
    except UserError as exc:
        raise fail(exc) from None
    except OSError as exc:
        raise fail(UserError(exc.strerror or type(exc).__name__, file=exc.filename)) from None


def _listen(listen: str, token_env: str | None, out_dir: Path | None, offline_flags: bool,
            export_to: str | None = None) -> None:
    """``audit --listen``: the OTLP receiver (``runner.importers.traces.receiver``) until Ctrl-C."""
    from runner.importers.traces.receiver import Listen, parse_listen, serve_receiver

    try:
        if offline_flags:
            raise UserError("--listen receives traces; trace files, --run and --labels are for an audit of files",
                            hint="audit what was received afterwards: trialgrid audit OUT/traces.jsonl --out DIR")
        if out_dir is None:
            raise UserError("--listen needs --out DIR: where the received calls and their findings are written",
                            hint="e.g. trialgrid audit --listen 4318 --out live/")
        token = None
        if token_env is not None:
            token = os.environ.get(token_env)
            if not token:
                raise UserError(f"--token-env {token_env}: the variable is not set, or empty")
        host, port = parse_listen(listen)
        url = None
        if export_to is not None:
            from runner.importers.traces.export import export_url

            url = export_url(export_to)
        state = serve_receiver(out_dir, Listen(host, port, token), started=note, export_to=url)
    except UserError as exc:
        raise fail(exc) from None
    except OSError as exc:
        if exc.filename:
            raise fail(UserError(exc.strerror or type(exc).__name__, file=exc.filename)) from None
        raise fail(UserError(f"cannot listen on {listen}: {exc.strerror or exc}", hint="is the port in use?")) from None
    note(f"stopped: {state.requests:,} request(s), {state.calls:,} call(s) audited, {state.findings:,} finding(s) "
         f"in {out_dir / 'findings.jsonl'}; the flag rates: trialgrid audit {out_dir / 'traces.jsonl'} "
         f"--out {out_dir / 'report'}"
         + (f"; {state.exported:,} event(s) exported to {url}" if url else ""))


def sample(
    directory: Path = typer.Argument(..., help="An audit directory (`trialgrid audit … --out DIR`)."),
    n: int = typer.Option(..., "--n", min=1, help="Rows of the sheet, spread evenly over the strata."),
    sheet: Path | None = typer.Option(None, "--out", "-o", help="The sheet to write (default DIR/sample.csv)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the draw."),
) -> None:
    """Write a stratified labelling sheet (CSV): tool × baseline verdict × auditor verdict, one row per (call,
    field) with the value and a context excerpt; fill in `label` and read it back with `audit DIR --labels`."""
    from runner.probes.phantom import audit as A
    from runner.probes.phantom.calibration import write_sheet

    try:
        fields = A.read_fields(directory)
        files = [str(f) for f in A.read_meta(directory).get("files", [])]
        target = sheet or directory / "sample.csv"
        if target.exists():
            raise UserError("file exists; not overwriting (it may hold labels)", file=target)
        rows = write_sheet(fields, files, target, n, seed)
    except UserError as exc:
        raise fail(exc) from None
    plain(f"wrote {rows} row(s) to {target}: fill in the label column (phantom or grounded), then "
          f"`trialgrid audit {directory} --labels {target}`")


def run_findings(run: Path, target: Path) -> tuple[int, int]:
    """``trialgrid report OUT --findings FILE``: the flagged fields of a phantom run, keyed by the source's ids
    (read from the trace files its sweep names), written as ``write_findings`` does; (findings, events)."""
    import tempfile

    import polars as pl

    from runner.output import Output
    from runner.probes.phantom import audit as A
    from runner.probes.phantom.calibration import write_findings

    output = Output.open(run)
    manifest = output.manifest
    traces = [p.get("traces") for p in manifest.sweep.probes or () if p.get("kind") == "phantom"]
    if not traces or manifest.sweep_file is None:
        raise UserError("--findings: the run has no phantom probe (or was imported, without its trace files)",
                        file=run)
    base = (manifest.sweep_path(run) or Path(".")).parent
    paths = [base / str(t) for t in traces if t]
    for path in paths:
        if path.suffix.lower() not in (".jsonl", ".ndjson") or not path.is_file():
            raise UserError("--findings reads JSON lines trace files (as `trialgrid import traces` writes them)",
                            file=path, hint="or run `trialgrid audit TRACES --out DIR --run OUT --findings FILE`")
    with tempfile.TemporaryDirectory(prefix="trialgrid-findings-") as tmp:
        A.audit_files(paths, Path(tmp), run_rows=_run_rows(run))
        fields = A.read_fields(Path(tmp))
    return write_findings(fields.filter(pl.col("model") != A.NO_AUDITOR), target)


def register(app: typer.Typer) -> None:
    """Add ``audit`` and ``sample`` to the ``trialgrid`` command."""
    app.command()(audit)
    app.command()(sample)
