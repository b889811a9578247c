"""Audit your own traces: the containment baseline over imported (gold-less) phantom traces, at scale, offline.

Why a direct path and not a sweep: a sweep turns every trace into an engine trial (a spec, a seeded Agent,
a row with its recorded calls and common columns), which is right when each trial asks a model — the
rate limits, cache, batch APIs and Ray earn their keep there — but the baseline asks nothing: it is one
pure function of the trace (``phantom.baseline_fields``). At a million calls a day the trial machinery
would cost far more than the rule it carries, so ``trialgrid audit`` streams the trace files line by line
(bounded memory: a line is parsed, audited and forgotten), applies the same rule, and writes one row per
(call, field) to ``DIR/fields.parquet`` in row groups. Nothing leaves the machine on this path. An auditor
model is a phantom sweep over the same ``traces.jsonl`` (``runner.probes.phantom.probe``), run like any sweep;
``trialgrid audit … --run OUT`` reads that run's verdicts into the same field table, beside the baseline.

The field table is the one shape every later step reads: the flag rates per tool argument with intervals
clustered by conversation, the auditor–baseline agreement (kappa) and the disagreements split by direction
(``report``), the labelling sheet and the calibration against people, and the findings joined back
to the source's ids (``calibration``).
"""

from __future__ import annotations

import json
import math
import multiprocessing
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import ValidationError

from runner.core.errors import UserError
from runner.core.idset import IdSet, digests
from runner.core.jsonlines import BadLine, NotJSON, parse_line, raw_lines
from runner.core.readprogress import ReadProgress
from runner.core.safety import confined
from runner.core.skips import Skips
from runner.probes.phantom.probe import Trace, baseline_fields, conversation_of
from runner.probes.phantom.report import COUNT

FIELDS_FILE = "fields.parquet"
#: the field table aggregated per (model, condition, conversation, field, verdicts), summed while auditing
COUNTS_FILE = "counts.parquet"
META_FILE = "audit.json"
#: a trace line longer than this is skipped (a hostile 1 GB line never reaches the JSON parser)
MAX_LINE_BYTES = 16 << 20
#: the field value as stored for the sheet and the findings, cut to this many characters
MAX_VALUE_CHARS = 200
_BATCH_ROWS = 65_536
#: lines a worker audits at a time
_CHUNK_LINES = 4_096
#: the model column of the baseline-only table (no auditor ran)
NO_AUDITOR = ""

SCHEMA = pa.schema([
    ("model", pa.string()), ("condition", pa.string()), ("run", pa.int32()),
    ("trace", pa.string()), ("conversation", pa.string()), ("tool", pa.string()), ("arg", pa.string()),
    ("field", pa.string()), ("value", pa.string()),
    ("baseline", pa.bool_()), ("auditor", pa.bool_()), ("gold", pa.bool_()),
    ("file", pa.int32()), ("line", pa.int64()),
    ("source_format", pa.string()), ("source_file", pa.string()), ("source_record", pa.int64()),
    ("trace_id", pa.string()), ("span_id", pa.string()), ("call_id", pa.string()),
])


@dataclass
class AuditSummary:
    """What one ``audit_files`` pass read and wrote."""

    calls: int = 0
    fields: int = 0
    traces: int = 0
    #: skipped lines by reason, and the first few, one readable line each (file, line, what is wrong)
    skips: Skips = field(default_factory=Skips)

    @property
    def skipped(self) -> Counter[str]:
        return self.skips.by_reason

    @property
    def notes(self) -> list[str]:
        return self.skips.lines

    def skip(self, reason: str, where: str, detail: str) -> None:
        self.skips.skip(reason, f"{where}: {detail}")


def _value_text(value: Any) -> str:
    cls = value.__class__
    if cls is str:
        text = value
    elif cls is int or (cls is float and math.isfinite(value)):  # as json.dumps writes them, without the encoder
        text = cls.__repr__(value)
    else:
        text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS - 1] + "…"


def trace_fields(trace: Trace) -> list[tuple[str, str, str, str]]:
    """(tool, arg, ``tool.arg``, value text) of every top-level argument of the trace's calls, once per field."""
    out: dict[str, tuple[str, str, str, str]] = {}
    for call in trace.calls:
        tool = call.tool
        for arg, value in call.args.items():
            name = f"{tool}.{arg}"
            if name not in out:
                out[name] = (tool, arg, name, _value_text(value))
    return list(out.values())


#: the columns that differ between the rows of one (trace, verdict): the rest are written once and repeated
_PER_FIELD = ("tool", "arg", "field", "value", "baseline", "auditor", "gold")
_PER_TRACE = ("model", "condition", "run", "trace", "conversation", "file", "line", "source_format", "source_file",
              "source_record", "trace_id", "span_id", "call_id")


class _Columns:
    """Column lists for one row group of the field table: per field the few columns that differ, per (trace,
    verdict) the rest once, repeated over its fields when the batch is built (twenty appends a row
    were a tenth of an audit)."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.cols: dict[str, list[Any]] = {f.name: [] for f in SCHEMA}
        self._per_trace = [self.cols[name] for name in _PER_TRACE]
        self.repeat: list[int] = []
        self.rows = 0

    def __len__(self) -> int:
        return self.rows

    def add(self, trace: Trace, file_index: int, line: int, verdicts: Iterable[tuple[str, str, int, list[str],
            list[str] | None]]) -> int:
        """One row per field of ``trace`` per (model, condition, run, baseline, auditor) verdict; rows added."""
        fields = trace_fields(trace)
        k = len(fields)
        if not k:
            return 0
        tools, args, names, values = zip(*fields, strict=True)
        gold = None if trace.gold_phantoms is None else set(trace.gold_phantoms)
        gold_col = [None] * k if gold is None else [name in gold for name in names]
        src = trace.source
        per_trace = (trace.id, conversation_of(trace), file_index, line) + (
            (src.format, src.file, src.record, src.trace_id, src.span_id, src.call_id) if src else (None,) * 6)
        c = self.cols
        n = 0
        for model, condition, run, base, pred in verdicts:
            for column, value in zip(self._per_trace, (model, condition, run, *per_trace), strict=True):
                column.append(value)
            c["tool"] += tools
            c["arg"] += args
            c["field"] += names
            c["value"] += values
            base_set = set(base)
            c["baseline"] += [name in base_set for name in names]
            if pred is None:
                c["auditor"] += [None] * k
            else:
                pred_set = set(pred)
                c["auditor"] += [name in pred_set for name in names]
            c["gold"] += gold_col
            self.repeat.append(k)
            n += k
        self.rows += n
        return n

    def batch(self) -> pa.RecordBatch:
        at = pa.array(np.repeat(np.arange(len(self.repeat), dtype=np.int64), self.repeat))
        arrays = [pa.array(self.cols[f.name], f.type) if f.name in _PER_FIELD
                  else pa.array(self.cols[f.name], f.type).take(at) for f in SCHEMA]
        self._reset()
        return pa.RecordBatch.from_arrays(arrays, schema=SCHEMA)


def _raw_lines(path: Path, summary: AuditSummary) -> Iterator[tuple[int, bytes]]:
    """(line number, bytes) of each non-blank line no longer than ``MAX_LINE_BYTES``; a longer one is skipped
    without ever being held whole."""
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise UserError(f"cannot read the trace file: {exc.strerror}", file=path) from None
    with fh:
        for number, raw in raw_lines(fh, MAX_LINE_BYTES):
            if isinstance(raw, BadLine):
                summary.skip(raw.reason, f"{path}:{number}", f"longer than {MAX_LINE_BYTES >> 20} MiB; skipped")
            else:
                yield number, raw


def _parse(raw: bytes, where: str, summary: AuditSummary) -> Trace | None:
    """The trace on one line, or ``None`` with the reason counted."""
    try:
        data = parse_line(raw)
    except NotJSON as exc:
        summary.skip("not JSON", where, f"not valid JSON ({str(exc)[:80]})")
        return None
    if not isinstance(data, dict):
        summary.skip("not a trace", where, f"a trace is an object, got {type(data).__name__}")
        return None
    tools = data.get("tools")
    if tools.__class__ is list and all(t.__class__ is dict for t in tools):
        # what ``Trace.tools`` accepts of parsed JSON (objects' keys are strings), and the audit never reads:
        # not validated item by item (it was half of the validation)
        data["tools"] = None
    try:
        return Trace.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        summary.skip("not a trace", where, f"{loc or 'trace'}: {first['msg']}")
    except RecursionError:
        summary.skip("not a trace", where, "nested too deep")
    return None


def iter_traces(path: Path, summary: AuditSummary) -> Iterator[tuple[int, Trace]]:
    """(line number, trace) of each good line of a JSON lines trace file; a bad line is counted and skipped."""
    for number, raw in _raw_lines(path, summary):
        trace = _parse(raw, f"{path}:{number}", summary)
        if trace is not None:
            yield number, trace


#: what a worker returns for one chunk: its rows, what it skipped, and for the repeat check the (trace id, line)
#: of each trace it audited and the ids' digests (``idset.digests``)
_Chunk = tuple[pa.RecordBatch, AuditSummary, list[tuple[str, int]], bytes]


def baseline_chunk(file_index: int, path: str, lines: list[tuple[int, bytes]], hide_results: bool) -> _Chunk:
    """The baseline's rows of one chunk of lines (run in a worker process), what it skipped, and (trace id,
    line) of each trace it audited with the ids' digests, for the duplicate check."""
    summary = AuditSummary()
    cols = _Columns()
    condition = "results_hidden" if hide_results else "results_visible"
    ids: list[tuple[str, int]] = []
    for number, raw in lines:
        trace = _parse(raw, f"{path}:{number}", summary)
        if trace is None:
            continue
        try:
            flagged = baseline_fields(trace, hide_results)
        except RecursionError:  # arguments or results nested deeper than the rule walks: one line, not a crash
            summary.skip("not a trace", f"{path}:{number}", "nested too deep to audit")
            continue
        ids.append((trace.id, number))
        summary.calls += len(trace.calls)
        summary.fields += cols.add(trace, file_index, number, [(NO_AUDITOR, condition, 0, flagged, None)])
    return cols.batch(), summary, ids, digests(i for i, _ in ids)


def _chunks(paths: Sequence[Path], summary: AuditSummary,
            size: int) -> Iterator[tuple[int, str, list[tuple[int, bytes]], int]]:
    """(file index, path, up to ``size`` numbered lines, about how many bytes of the file are read through them)."""
    for file_index, path in enumerate(paths):
        chunk: list[tuple[int, bytes]] = []
        read = 0
        for item in _raw_lines(path, summary):
            chunk.append(item)
            read += len(item[1]) + 1
            if len(chunk) >= size:
                yield file_index, str(path), chunk, read
                chunk = []
        if chunk:
            yield file_index, str(path), chunk, read


def _merge(summary: AuditSummary, part: AuditSummary) -> None:
    summary.calls += part.calls
    summary.fields += part.fields
    summary.skips.merge(part.skips)


def _baseline_batches(paths: Sequence[Path], summary: AuditSummary, hide_results: bool,
                      workers: int) -> Iterator[pa.RecordBatch]:
    """The baseline's row batches over every file, in input order, chunks audited by ``workers`` processes
    (bounded: at most two chunks per worker in flight); duplicates of an earlier trace id are dropped."""
    seen = IdSet()

    def keep(batch: pa.RecordBatch, part: AuditSummary, ids: list[tuple[str, int]], digested: bytes,
             path: str) -> pa.RecordBatch:
        dup_lines = []
        for i in seen.add(digested):
            trace_id, line = ids[i]
            dup_lines.append(line)
            part.skip("duplicate id", f"{path}:{line}", f"duplicate trace id {trace_id!r}; skipped")
        _merge(summary, part)
        summary.traces += len(ids) - len(dup_lines)
        if dup_lines:
            mask = pc.invert(pc.is_in(batch.column("line"), pa.array(dup_lines, pa.int64())))
            dropped = batch.filter(mask)
            summary.fields -= batch.num_rows - dropped.num_rows
            summary.calls -= len(dup_lines)  # an imported trace holds one call; a hand-written one may hold more
            return dropped
        return batch

    progress: dict[int, ReadProgress] = {}

    def kept(chunk: _Chunk, path: str, file_index: int, read: int) -> pa.RecordBatch:
        batch = keep(*chunk, path)
        if file_index not in progress:
            progress[file_index] = ReadProgress(Path(path), "traces audited")
        progress[file_index].update(summary.traces, read)
        return batch

    chunks = _chunks(paths, summary, _CHUNK_LINES)
    if workers <= 1:
        for file_index, path, lines, read in chunks:
            yield kept(baseline_chunk(file_index, path, lines, hide_results), path, file_index, read)
        return
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        pending: deque[tuple[Future[_Chunk], str, int, int]] = deque()
        for file_index, path, lines, read in chunks:
            pending.append((pool.submit(baseline_chunk, file_index, path, lines, hide_results), path, file_index,
                            read))
            if len(pending) >= 2 * workers:
                future, path, file_index, read = pending.popleft()
                yield kept(future.result(), path, file_index, read)
        while pending:
            future, path, file_index, read = pending.popleft()
            yield kept(future.result(), path, file_index, read)


def _verdict_index(rows: pl.DataFrame) -> dict[str, list[tuple[str, str, int, list[str], list[str] | None]]]:
    """A phantom run's rows by trace id: (model, condition, run, baseline fields, auditor fields or None)."""
    out: dict[str, list[tuple[str, str, int, list[str], list[str] | None]]] = {}
    for r in rows.sort("model", "condition", "case_id", "run").iter_rows(named=True):
        pred = None if r["auditor_error"] is not None else list(r["pred_fields"] or [])
        out.setdefault(r["case_id"], []).append(
            (r["model"], r["condition"], int(r["run"]), list(r["baseline_fields"] or []), pred))
    return out


def _with_auditor(paths: Sequence[Path], summary: AuditSummary,
                  index: dict[str, list[tuple[str, str, int, list[str], list[str] | None]]],
                  write: Callable[[pa.RecordBatch], None]) -> None:
    """One row per field per audit of a phantom run (in this process: a run's traces are as many as it asked)."""
    cols = _Columns()
    seen = IdSet()
    for file_index, path in enumerate(paths):
        for line, trace in iter_traces(path, summary):
            if seen.add(digests([trace.id])):
                summary.skip("duplicate id", f"{path}:{line}", f"duplicate trace id {trace.id!r}; skipped")
                continue
            verdicts = index.get(trace.id, [])
            if not verdicts:
                summary.skip("not in the run", f"{path}:{line}", f"trace {trace.id!r} has no audit in the run")
                continue
            summary.traces += 1
            summary.calls += len(trace.calls)
            summary.fields += cols.add(trace, file_index, line, verdicts)
            if len(cols) >= _BATCH_ROWS:
                write(cols.batch())
    if len(cols):
        write(cols.batch())


def audit_files(paths: Sequence[Path], out: Path, *, hide_results: bool = False,
                run_rows: pl.DataFrame | None = None, workers: int = 1) -> AuditSummary:
    """Audit every trace of ``paths`` (JSON lines) into ``out/fields.parquet``; return what was read.

    Without ``run_rows`` the baseline alone audits each trace, as the auditor would see it under
    ``results_visible`` (or ``results_hidden`` with ``hide_results``). With ``run_rows`` (a phantom run's
    ``ok`` rows: model, condition, case_id, run, pred_fields, baseline_fields, auditor_error) each trace gets
    one row per field per audit of the run, the auditor's verdict beside the baseline's; a trace the run did
    not audit is counted as skipped. ``workers`` > 1 audits the baseline's chunks of lines in that many
    processes (the rows come out in input order either way).
    """
    out.mkdir(parents=True, exist_ok=True)
    target = confined(out, FIELDS_FILE)
    tmp = confined(out, FIELDS_FILE + ".part")
    summary = AuditSummary()
    condition = "results_hidden" if hide_results else "results_visible"
    counts = ClusterCounts()
    with pq.ParquetWriter(tmp, SCHEMA, compression="zstd") as writer:

        def write(batch: pa.RecordBatch) -> None:
            if batch.num_rows:
                writer.write_batch(batch)
                counts.add(batch)

        if run_rows is None:
            for batch in _baseline_batches(paths, summary, hide_results, workers):
                write(batch)
        else:
            _with_auditor(paths, summary, _verdict_index(run_rows), write)
    if summary.traces == 0:
        tmp.unlink(missing_ok=True)
        reasons = ", ".join(f"{n} {r}" for r, n in summary.skipped.items()) or "the files are empty"
        raise UserError(f"no trace could be audited ({reasons})", file=paths[0] if len(paths) == 1 else None,
                        hint=summary.notes[0] if summary.notes else "write one trace per line "
                        "(`trialgrid import traces` makes them)")
    counts_tmp = confined(out, COUNTS_FILE + ".part")
    counts.write(counts_tmp)
    counts.clear()
    counts_tmp.replace(confined(out, COUNTS_FILE))
    tmp.replace(target)
    meta = {"files": [str(p) for p in paths], "condition": condition, "calls": summary.calls,
            "traces": summary.traces, "fields": summary.fields, "skipped": dict(summary.skipped),
            "auditor": run_rows is not None}
    confined(out, META_FILE).write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return summary


#: the columns the report's views read (the values and source ids only where an auditor ran: its disagreements)
VIEW_COLUMNS = ("model", "condition", "run", "trace", "conversation", "tool", "field", "baseline", "auditor", "gold")
LISTING_COLUMNS = ("value", "trace_id", "span_id", "call_id")


def read_fields(directory: Path, columns: Sequence[str] | None = None, *, flagged_only: bool = False) -> pl.DataFrame:
    """The field table an audit wrote into ``directory`` (only ``columns``, only flagged rows, where asked: a
    million calls' table is read a column at a time)."""
    path = directory / FIELDS_FILE
    if not path.is_file():
        raise UserError(f"not an audit directory: no {FIELDS_FILE} in it", file=directory,
                        hint="write one with `trialgrid audit TRACES… --out DIR`")
    lazy = pl.scan_parquet(path)
    if flagged_only:
        lazy = lazy.filter(pl.col("baseline") | pl.col("auditor").fill_null(False))
    return (lazy.select(list(columns)) if columns is not None else lazy).collect()


#: what an aggregated field table keeps of each unit (``read_counts``): the rates' and kappa's inputs
COUNT_KEYS = ("model", "condition", "conversation", "field", "baseline", "auditor", "gold")
#: the bits of a packed key (``ClusterCounts``): verdicts, then the (model, condition, field), then the conversation
_VERDICT_BITS, _GROUP_BITS, _CONV_BITS = 5, 24, 34
#: (key, count) pairs kept unmerged at most (or as many as the merged ones, if more)
_MERGE_ROWS = 1 << 20
#: rows of a slice of the counts as they are written (a Parquet row group each)
_COUNT_ROWS = 1 << 18


class ClusterCounts:
    """The field table summed per (model, condition, conversation, field, verdicts) as its batches go by.

    Why here and not a group_by over the written table: at a million calls that table has four million rows and
    three million such keys, and polars' hash aggregation over their strings peaked at 1.6 GiB. Here each batch
    is reduced to its keys at once — the strings of model, condition and field to a small group number, the
    conversation to a number in the order first seen, the three verdicts to one of 18 codes, all packed into one
    int64 — and the (key, count) pairs are kept sorted in numpy, merged with the new ones whenever these reach
    the kept ones' size. Memory follows the distinct keys (two int64 each, plus each conversation's string once),
    never the units. ``table`` gives what ``read_counts`` returns: the conversation as its rank in sorted order,
    as the views need only which units share one."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        """Forget every count (the memory goes with them)."""
        self._names: tuple[dict[str, int], dict[str, int], dict[str, int]] = ({}, {}, {})  # model, condition, field
        self._groups: dict[int, int] = {}  # packed (model, condition, field) numbers → group number
        self._convs: dict[str, int] = {}
        self._keys = np.empty(0, np.int64)
        self._counts = np.empty(0, np.int64)
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []
        self._pending_rows = 0

    @staticmethod
    def _codes(column: pa.Array | pa.ChunkedArray, ids: dict[Any, int]) -> np.ndarray:
        """Each value's number in ``ids`` (new values numbered as they come), through the batch's dictionary."""
        enc = pc.dictionary_encode(column.fill_null(""))
        if isinstance(enc, pa.ChunkedArray):
            enc = enc.combine_chunks()
        local = np.fromiter((ids.setdefault(v, len(ids)) for v in enc.dictionary.to_pylist()), np.int64,
                            count=len(enc.dictionary))
        return local[enc.indices.to_numpy(zero_copy_only=False)]

    @staticmethod
    def _verdict(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """0 for null, 1 for False, 2 for True."""
        code = pc.if_else(pc.is_null(column), 0, pc.if_else(column.fill_null(False), 2, 1))
        return np.asarray(pc.cast(code, pa.int64()).to_numpy(zero_copy_only=False))

    def add(self, batch: pa.RecordBatch) -> None:
        """Count one batch of the field table (``SCHEMA``'s columns; only ``COUNT_KEYS`` are read)."""
        m, c, f = (self._codes(batch.column(k), ids) for k, ids in zip(("model", "condition", "field"), self._names,
                                                                         strict=True))
        triple, at = np.unique((m << 42) | (c << 21) | f, return_inverse=True)
        group = np.fromiter((self._groups.setdefault(int(t), len(self._groups)) for t in triple), np.int64,
                            count=triple.size)[at.reshape(-1)]
        conv = self._codes(batch.column("conversation"), self._convs)
        if max(len(ids) for ids in self._names) >= 1 << 21 or len(self._groups) >= 1 << _GROUP_BITS \
                or len(self._convs) >= 1 << _CONV_BITS:
            raise UserError(f"too many distinct fields ({len(self._names[2])}) or conversations ({len(self._convs)}) "
                            "to count in one audit", hint="audit the traces in parts")
        verdict = (self._verdict(batch.column("baseline")) // 2 + 2 * self._verdict(batch.column("auditor"))
                   + 6 * self._verdict(batch.column("gold")))
        keys = (conv << (_GROUP_BITS + _VERDICT_BITS)) | (group << _VERDICT_BITS) | verdict
        uniq, n = np.unique(keys, return_counts=True)
        self._pending.append((uniq, n.astype(np.int64)))
        self._pending_rows += uniq.size
        if self._pending_rows >= max(self._keys.size, _MERGE_ROWS):
            self._merge()

    def _merge(self) -> None:
        """The pending pairs summed by key, then added into the kept ones (new keys inserted in order): the kept
        arrays are copied once, never sorted again."""
        if not self._pending:
            return
        keys = np.concatenate([k for k, _ in self._pending])
        counts = np.concatenate([n for _, n in self._pending])
        self._pending, self._pending_rows = [], 0
        order = np.argsort(keys, kind="stable")
        keys, counts = keys[order], counts[order]
        del order
        starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
        keys, counts = keys[starts], np.add.reduceat(counts, starts)
        at = np.searchsorted(self._keys, keys)
        old = at < self._keys.size
        old[old] = self._keys[at[old]] == keys[old]
        self._counts[at[old]] += counts[old]  # each kept key at most once: the pending keys are distinct
        new = ~old
        self._keys = np.insert(self._keys, at[new], keys[new])
        self._counts = np.insert(self._counts, at[new], counts[new])

    def batches(self, rows: int = _COUNT_ROWS) -> Iterator[pa.RecordBatch]:
        """The counts in slices of ``rows``: one row per key (``COUNT_KEYS``) with the units it stands for
        (``report.COUNT``); the strings as dictionaries, the conversation and the count as int32 where they fit.
        The slices share the dictionaries: a table of them holds each name once."""
        self._merge()
        names = list(self._convs)  # by number: dicts keep their insertion order
        rank = np.empty(len(names), np.int64)  # each conversation's rank in sorted order, from 1
        rank[np.fromiter(sorted(range(len(names)), key=names.__getitem__), np.int64, count=len(names))] = \
            np.arange(1, len(names) + 1)
        del names
        rank = _narrow(rank)
        counts = _narrow(self._counts)
        schema = _counts_schema(pa.from_numpy_dtype(rank.dtype), pa.from_numpy_dtype(counts.dtype))
        triples = np.array(list(self._groups), np.int64)  # by group number
        parts = [((triples >> shift) & ((1 << 21) - 1)).astype(np.int32) for shift in (42, 21, 0)]
        dictionaries = [pa.array(list(ids), pa.string()) for ids in self._names]  # each name by its number

        def verdicts(code: np.ndarray) -> pa.Array:
            return pa.array(code == 2, mask=code == 0)

        for lo in range(0, self._keys.size, rows):
            keys = self._keys[lo:lo + rows]
            verdict = keys & ((1 << _VERDICT_BITS) - 1)
            group = (keys >> _VERDICT_BITS) & ((1 << _GROUP_BITS) - 1)
            model, condition, name = (pa.DictionaryArray.from_arrays(part[group], d)
                                      for part, d in zip(parts, dictionaries, strict=True))
            yield pa.RecordBatch.from_arrays([
                model, condition, pa.array(rank[keys >> (_GROUP_BITS + _VERDICT_BITS)]), name,
                pa.array((verdict % 2).astype(bool)), verdicts((verdict // 2) % 3), verdicts((verdict // 6) % 3),
                pa.array(counts[lo:lo + rows])], schema=schema)

    def _schema(self) -> pa.Schema:
        """The schema of ``batches``, whether or not there are any."""
        return _counts_schema(pa.from_numpy_dtype(_narrow_type(np.array([len(self._convs)]))),
                              pa.from_numpy_dtype(_narrow_type(self._counts)))

    def write(self, path: Path) -> None:
        """The counts into a Parquet file, a slice at a time: at a million calls a whole table of them held
        100 MiB beside the counting's own arrays, the audit's peak; the report reads the file back after they
        are gone (``read_counts``)."""
        with pq.ParquetWriter(path, self._schema(), compression="zstd") as writer:
            for batch in self.batches():
                writer.write_batch(batch)

    def table(self) -> pl.DataFrame:
        """The counts as one frame (``batches``)."""
        frame = pl.from_arrow(pa.Table.from_batches(list(self.batches()), schema=self._schema()))
        assert isinstance(frame, pl.DataFrame)
        return frame


def _narrow_type(values: np.ndarray) -> type[np.integer[Any]]:
    """int32 where the (non-negative) values fit, else int64."""
    return np.int32 if not values.size or int(values.max()) < 1 << 31 else np.int64


def _narrow(values: np.ndarray) -> np.ndarray:
    """int64 values as int32 where they fit: a million calls' counts are three million rows of each."""
    return values.astype(_narrow_type(values), copy=False)


def _counts_schema(conversation: pa.DataType, count: pa.DataType) -> pa.Schema:
    """The aggregated field table's columns (``COUNT_KEYS`` and ``report.COUNT``)."""
    names = pa.dictionary(pa.int32(), pa.string())
    return pa.schema([("model", names), ("condition", names), ("conversation", conversation), ("field", names),
                      ("baseline", pa.bool_()), ("auditor", pa.bool_()), ("gold", pa.bool_()), (COUNT, count)])


def read_counts(directory: Path) -> pl.DataFrame:
    """The field table an audit wrote, aggregated: one row per (model, condition, conversation, field,
    verdicts) with the number of units it stands for (``report.COUNT``), as the audit summed them
    (``COUNTS_FILE``; for a directory written without it, summed now from the table, a row group at a time).
    What the flag rates, kappa and gold scores need, with the same numbers as the whole table, in memory that
    follows the conversations × fields, never the units."""
    path = directory / FIELDS_FILE
    if not path.is_file():
        raise UserError(f"not an audit directory: no {FIELDS_FILE} in it", file=directory,
                        hint="write one with `trialgrid audit TRACES… --out DIR`")
    if (directory / COUNTS_FILE).is_file():
        return pl.read_parquet(directory / COUNTS_FILE)
    counts = ClusterCounts()
    for batch in pq.ParquetFile(path).iter_batches(_BATCH_ROWS, columns=list(COUNT_KEYS)):
        counts.add(batch)
    return counts.table()


def read_meta(directory: Path) -> Mapping[str, Any]:
    path = directory / META_FILE
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        raise UserError(f"not an audit directory: {META_FILE} is missing or damaged", file=directory,
                        hint="write one with `trialgrid audit TRACES… --out DIR`") from None
    if not isinstance(meta, dict):
        raise UserError(f"{META_FILE} is not an object", file=path)
    return meta
