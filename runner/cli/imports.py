"""``trialgrid import``: other projects' data as trialgrid case files, sweeps and runs (BFCL, ungrounded, per-trial
tables, AgentProp-Bench, production traces).

Why a module of its own: each importer is the library's (``runner.importers``); these commands read the command
line and print what each import wrote and skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import typer
from rich.text import Text

from runner.cli.console import fail, out
from runner.cli.flags import command
from runner.core.errors import UserError

__all__ = ["TrialsFlags", "register"]

_import_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                         help="Convert other projects' data into trialgrid case files and a sweep.")


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


@dataclass(frozen=True)
class TrialsFlags:
    """``trialgrid import trials``' flags: the file, and which of its columns hold each of a trial's fields."""

    path: Path = typer.Argument(..., help="Per-trial data: a .csv or .parquet file, one row per trial.")
    dest: Path = typer.Option(..., "--out", "-o", help="Output directory for the imported run.")
    cluster: str = typer.Option(..., "--cluster", help="Column with the cluster (prompt / case / triple id).")
    condition: str = typer.Option(..., "--condition", help="Column with the condition.")
    outcome: list[str] = typer.Option(..., "--outcome", help="Outcome column, or NAME=COLUMN; repeat. The first is the headline.")
    model: str | None = typer.Option(None, "--model", help="Column with the model label.")
    model_name: str | None = typer.Option(None, "--model-name", help="One model label for every row (instead of --model).")
    run: str | None = typer.Option(None, "--run", help="Column with the run index (default: numbered per cell).")
    status: str | None = typer.Option(None, "--status", help="Column with the trial status.")
    ok: list[str] = typer.Option(["ok"], "--ok", help="Status value meaning the trial completed (case-insensitive); repeat.")
    error: str | None = typer.Option(None, "--error", help="Column with the error text of failed trials.")
    input_tokens: str | None = typer.Option(None, "--input-tokens", help="Column with input tokens.")
    output_tokens: str | None = typer.Option(None, "--output-tokens", help="Column with output tokens.")
    probe: str = typer.Option("imported", "--probe", help="Probe label in the output.")
    kind: str = typer.Option("imported", "--kind", help="Probe kind: a trialgrid kind (its rates and contrasts) or any label.")
    contrast: list[str] = typer.Option([], "--contrast", help="label:outcome:A1+A2:B1 — a test of arm A minus arm B; repeat.")
    force: bool = typer.Option(False, "--force", help="Replace a run already in --out.")


@_import_app.command("trials")
@command(TrialsFlags)
def import_trials_cmd(flags: TrialsFlags) -> None:
    """Import per-trial results from another harness as a trialgrid run (then `trialgrid report` it)."""
    from runner.importers.trials import TrialsMapping, import_trials, parse_contrast, parse_outcomes

    try:
        mapping = TrialsMapping(cluster=flags.cluster, condition=flags.condition, outcomes=parse_outcomes(flags.outcome), model=flags.model,
                                model_name=flags.model_name, run=flags.run, status=flags.status, ok_values=tuple(flags.ok), error=flags.error,
                                input_tokens=flags.input_tokens, output_tokens=flags.output_tokens, probe=flags.probe, kind=flags.kind,
                                contrasts=tuple(parse_contrast(c) for c in flags.contrast))
        counts = import_trials(flags.path, flags.dest, mapping, force=flags.force)
    except UserError as exc:
        raise fail(exc) from None
    out.print(Text(f"{sum(counts.values()):,} trials ({', '.join(f'{k} {v:,}' for k, v in sorted(counts.items()))}); "
                   f"wrote {flags.dest}; report it with: trialgrid report {flags.dest}"), soft_wrap=True)


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
        summary = import_traces(paths, dest, fmt=fmt, force=force, limit=max_record_mb * 1024 * 1024)
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


def register(app: typer.Typer) -> None:
    app.add_typer(_import_app, name="import")
