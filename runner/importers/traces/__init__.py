"""``trialgrid import traces``: production trace files → phantom traces, one per tool call, for the baseline audit.

Each reader (``otlp``, ``pairs``, ``langfuse``, ``inspect_log``) knows one format; the shared core
(``_core``) makes the record every format ends as — a ``runner.probes.phantom.probe.Trace`` with exactly
one call, its context, the tools offered and the source's own ids (``TraceSource``) — and writes
``DIR/traces.jsonl`` (one trace per line, loadable by a ``kind: phantom`` sweep as
``traces: DIR/traces.jsonl``) and ``DIR/import.json`` (what was read, imported and skipped, by reason).
Calls whose context the source cut short go to ``DIR/traces-incomplete.jsonl`` instead, each with its
reason, and are counted apart: kept, never audited as if the user had said nothing.

A bad record is skipped in one line naming its file, record and what is wrong (at most a few lines per
reason; every count is in ``import.json``); the import fails (``UserError``, exit 2) when it imports
nothing, naming why. Formats:

====================  ================================================================================
``otlp``              OTLP JSON traces: OTel GenAI spans (current and older flattened attributes),
                      OpenInference spans, ``execute_tool`` spans (``otlp``'s module docstring)
``openai-chat``       Chat Completions ``{"request", "response"}`` pairs, one per JSON line
``openai-responses``  Responses API pairs
``anthropic``         Anthropic Messages pairs (``tool_use`` / ``tool_result`` blocks)
``langfuse``          Langfuse observation exports (``GENERATION`` observations)
``inspect``           inspect_ai ``.eval`` / ``.json`` logs (needs inspect_ai)
``auto``              each file's first record (or its extension) decides; the choice is printed
====================  ================================================================================
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.core.errors import UserError
from runner.core.messages import say
from runner.core.readprogress import ReadProgress
from runner.core.safety import check_output_dir
from runner.importers.traces import inspect_log, langfuse, otlp, pairs
from runner.importers.traces._core import MAX_RECORD_BYTES, BadRecord, Sink, Where, records

FORMATS = ("auto", "otlp", "openai-chat", "openai-responses", "anthropic", "langfuse", "inspect")
TRACES_FILE, SUMMARY_FILE, INCOMPLETE_FILE = "traces.jsonl", "import.json", "traces-incomplete.jsonl"


@dataclass(frozen=True)
class ImportSummary:
    """What an import did: per-file formats, records read and bad, calls imported, skips and notes by reason."""
    files: dict[str, str]
    records: int
    bad_records: int
    imported: int
    imported_by: dict[str, int]
    skipped: dict[str, int]
    notes: dict[str, int]
    out: str
    #: calls kept apart (``INCOMPLETE_FILE``) because the source cut their context short, by reason
    incomplete: dict[str, int]

    def as_json(self) -> dict[str, Any]:
        return {"version": 1, "files": self.files, "records": self.records, "bad_records": self.bad_records,
                "imported": self.imported, "imported_by_format": self.imported_by, "skipped": self.skipped,
                "notes": self.notes, "traces": TRACES_FILE, "context_incomplete": self.incomplete,
                "context_incomplete_traces": INCOMPLETE_FILE if self.incomplete else None}


def detect(path: Path, limit: int = MAX_RECORD_BYTES) -> str:
    """The format of ``path`` from its extension or its first record; ``UserError`` when none fits."""
    if path.suffix == ".eval":
        return "inspect"
    first_bad: tuple[int, BadRecord] | None = None
    for number, value in records(path, limit):
        if isinstance(value, BadRecord):
            first_bad = first_bad or (number, value)
            continue
        if otlp.looks_like(value):
            return "otlp"
        if langfuse.looks_like(value):
            return "langfuse"
        kind = pairs.detect(value)
        if kind:
            return kind
        if isinstance(value, dict) and "eval" in value and "samples" in value:
            return "inspect"
        raise UserError("cannot tell the trace format: the first record that reads is none of them", file=path,
                        line=number or None, hint="pass --format: " + ", ".join(FORMATS[1:]))
    if first_bad is not None:
        raise UserError(f"no record reads: the first is {first_bad[1]}", file=path, line=first_bad[0] or None,
                        hint="is this a trace file? OTLP JSON, request/response pairs and Langfuse exports are JSON")
    raise UserError("the trace file holds no record", file=path)


def _record_reader(fmt: str, sink: Sink) -> Callable[[Any, Where], None]:
    if fmt == "otlp":
        return otlp.reader(sink)
    if fmt == "langfuse":
        return langfuse.reader(sink)
    return pairs.reader(fmt, sink)


def _read_file(path: Path, label: str, fmt: str, sink: Sink, limit: int) -> None:
    if fmt == "inspect":
        n = inspect_log.read(path, label, sink)
        sink.records += max(n, 1)
        sink.bad_records += 0 if n else 1
        return
    handle = _record_reader(fmt, sink)
    progress = ReadProgress(path, "calls imported")
    for rec, value in records(path, limit, lambda read: progress.update(sink.imported, read)):
        read_record(handle, sink, value, Where(label, rec))


def read_record(handle: Callable[[Any, Where], None], sink: Sink, value: Any, where: Where) -> None:
    """One record through its format's reader, counted: read, or bad (wholly, or every part of it skipped)."""
    sink.records += 1
    before_ok, before_bad = sink.imported + sum(sink.notes.values()), sum(sink.skipped.values())
    if isinstance(value, BadRecord):
        sink.bad(where, value)
        sink.bad_records += 1
        return
    try:
        handle(value, where)
    except BadRecord as exc:
        sink.bad(where, exc)
        sink.bad_records += 1
        return
    except RecursionError:
        sink.bad(where, BadRecord("nested too deeply", "the record nests too deeply to read"))
        sink.bad_records += 1
        return
    if sink.imported + sum(sink.notes.values()) == before_ok and sum(sink.skipped.values()) > before_bad:
        sink.bad_records += 1  # every part of it was skipped


def import_traces(paths: list[Path], out: Path, *, fmt: str = "auto", force: bool = False,
                  limit: int = MAX_RECORD_BYTES) -> ImportSummary:
    """Import every tool call in ``paths`` into ``out/traces.jsonl``; see the module docstring. What it reads and
    skips is said as it goes, through ``runner.core.messages`` (the ``trialgrid`` logger)."""
    if fmt not in FORMATS:
        raise UserError(f"unknown trace format {fmt!r}", hint="one of: " + ", ".join(FORMATS))
    unique: dict[Path, Path] = {}
    for p in paths:
        if not p.is_file():
            raise UserError("no such trace file", file=p)
        if p.resolve() in unique:
            say(f"{p}: given twice; read once")
        unique.setdefault(p.resolve(), p)
    paths = list(unique.values())
    check_output_dir(out, what="--out")
    target, summary_path = out / TRACES_FILE, out / SUMMARY_FILE
    if not force and (target.exists() or summary_path.exists()):
        raise UserError(f"{target} exists; not overwriting", hint="pass --force, or choose another --out")
    out.mkdir(parents=True, exist_ok=True)
    chosen: dict[str, str] = {}
    for p in paths:
        chosen[str(p)] = detect(p, limit) if fmt == "auto" else fmt
        if fmt == "auto":
            say(f"{p}: format {chosen[str(p)]} (detected)")
    partial, partial_incomplete = out / f".{TRACES_FILE}.partial", out / f".{INCOMPLETE_FILE}.partial"
    with partial.open("wb", buffering=1 << 20) as fh, partial_incomplete.open("wb") as incomplete_fh:
        sink = Sink(fh, incomplete_fh)
        for p in paths:
            _read_file(p, str(p), chosen[str(p)], sink, limit)
    summary = ImportSummary(files=chosen, records=sink.records, bad_records=sink.bad_records, imported=sink.imported,
                            imported_by=dict(sink.imported_by), skipped=dict(sink.skipped), notes=dict(sink.notes),
                            out=str(out), incomplete=dict(sink.incomplete))
    if not sink.imported and not sink.incomplete:
        partial.unlink()
        partial_incomplete.unlink()
        raise UserError(_nothing_imported(sink), hint="check --format, and the lines above for what is wrong")
    os.replace(partial, target)
    if sink.incomplete:
        os.replace(partial_incomplete, out / INCOMPLETE_FILE)
    else:
        partial_incomplete.unlink()
        (out / INCOMPLETE_FILE).unlink(missing_ok=True)  # an earlier import's (--force)
    summary_path.write_text(json.dumps(summary.as_json(), indent=1) + "\n", encoding="utf-8")
    return summary


def _nothing_imported(sink: Sink) -> str:
    """Why an import found no call to import: the records, and what each reason counted."""
    if sink.records and sink.bad_records == sink.records:
        return f"every record ({sink.records:,}) is bad; nothing imported"
    why = [f"{k} {v:,}" for k, v in sorted(sink.skipped.items())] + [f"{k} {v:,}" for k, v in sorted(sink.notes.items())]
    return (f"no tool call imported from {sink.records:,} record{'s' if sink.records != 1 else ''}"
            + (f" ({'; '.join(why)})" if why else ""))


__all__ = ["FORMATS", "ImportSummary", "detect", "import_traces", "read_record"]
