"""Crash-safe trial writer: rows in, Arrow IPC parts out.

A run may be killed at any moment (SIGKILL, OOM, a lost Ray node, a full disk) and
must resume without losing or duplicating trials. Measured on this project's
machines: the body of an Arrow IPC *file* is an IPC *stream* after an 8-byte magic,
and a stream cut off mid-write keeps every complete record batch readable, while
``polars.scan_ipc`` needs the file's footer and a Parquet file cut off mid-write is
unreadable. So each worker's ``TrialSink`` writes an IPC file under the name
``part-W-NNNNN.arrows`` while it runs (unbuffered: each batch reaches the OS as it
is written), and finalizing a part is writing the footer and renaming it to
``part-W-NNNNN.arrow`` — no second copy, so a part needs its own size free, never
twice. Only finalized files match ``trials/*.arrow``, so a glob scan never sees a
half-written part. After a crash, ``repair_parts`` turns leftover parts into files,
keeping the complete batches and dropping a torn tail (older trialgrid versions wrote
plain streams; they are repaired the same way).

Rows are converted column by column with ``pa.array(values, type=field.type)``:
Arrow's C++ converter walks nested Python values (lists, dicts for structs) faster
than any per-type flattening written in Python (see ``benchmarks/sink_throughput.py``).

A write the disk refuses (ENOSPC) raises ``UserError`` naming the part and the space
the batch needed; the sink then writes nothing more (its open part keeps every
complete batch for the next resume's repair).

Concurrency contract: one ``TrialSink`` per worker name per directory at a time;
``repair_parts`` only while no sink writes to the directory — the output's lock
(``runner.output.lock``) guarantees both for a run.
"""

from __future__ import annotations

import asyncio
import errno
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from runner.core.calls import first_in_batch
from runner.core.errors import ErrorKind, UserError, warn
from runner.core.redact import scrub_batch
from runner.core.safety import not_regular
from runner.core.schema import ONCE_PER_BATCH
from runner.output.checksums import ChecksummedWriter, with_scheme
from runner.output.journal import JOURNAL_GLOB, Journal, journal_path, read_journal
from runner.output.unfinished import UnfinishedPart
from runner.output.verified import note_written

__all__ = [
    "TRIALS_DIR",
    "RepairNote",
    "ReplayNote",
    "TrialSink",
    "completed_trial_keys",
    "repair_parts",
    "replay_journals",
    "salvage_part",
    "to_record_batch",
    "trial_keys",
]

TRIALS_DIR = "trials"
#: where a part, stream or journal that cannot be read is moved (``trials/damaged/``)
DAMAGED_DIR = "damaged"
_STREAM_SUFFIX = ".arrows"
_FILE_SUFFIX = ".arrow"
_TMP_SUFFIX = ".arrow.tmp"
_WORKER_RE = re.compile(r"[A-Za-z0-9_.]+(?:-[A-Za-z0-9_.]+)*")
# A torn tail surfaces as ArrowInvalid (truncated length prefix or metadata) or as
# OSError (truncated body); both are the expected shape of a killed writer.
_TORN = (pa.ArrowInvalid, OSError, EOFError)
#: a journaling sink writes its appended rows to the journal at the end of the event-loop iteration that appended
#: them, in one write, and at the latest after this many rows (docs/output.md: the durability bound)
JOURNAL_ROWS = 64


def to_record_batch(rows: Sequence[Mapping[str, Any]], schema: pa.Schema) -> pa.RecordBatch:
    """Convert rows (mappings, missing keys meaning null) into one batch of exactly ``schema``.

    Keys are not checked here (``TrialSink.append`` checks them as rows arrive). A value
    Arrow cannot convert raises ``TypeError`` naming the column and the first bad row.
    """
    arrays = []
    for field in schema:
        name = field.name
        try:
            values = list(map(itemgetter(name), rows))
        except KeyError:  # some row lacks the column: it is null there
            values = [row.get(name) for row in rows]
        if name in ONCE_PER_BATCH:  # content stored once per batch (runner.core.calls)
            values = first_in_batch(values)
        try:
            array = pa.array(values, type=field.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError) as exc:
            raise TypeError(_conversion_error(name, field.type, values, rows, exc)) from exc
        if not field.nullable and array.null_count:
            index = next(i for i, v in enumerate(values) if v is None)
            raise TypeError(
                f"column {name!r} is not nullable but row {index}{_row_label(rows[index])} has no value"
            )
        arrays.append(array)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def to_record_batch_salvaged(rows: Sequence[Mapping[str, Any]], schema: pa.Schema) -> pa.RecordBatch:
    """``to_record_batch``, except that a row a value of which cannot be converted does not lose the batch: that
    row is written as an ``internal`` error row, the values that could not be held null and named in its
    ``error``, everything else (the answer, the calls) kept. A value the wire layer let through unbounded is a
    bug of trialgrid's, so ``internal``; one bad row never costs the others."""
    try:
        return to_record_batch(rows, schema)
    except TypeError:
        pass
    kept = []
    for row in rows:
        try:
            to_record_batch([row], schema)
        except TypeError:
            row = _salvaged(row, schema)
        kept.append(row)
    return to_record_batch(kept, schema)


def _salvaged(row: Mapping[str, Any], schema: pa.Schema) -> dict[str, Any]:
    """``row`` with each value its column cannot hold set to null, as an ``internal`` error row saying which."""
    fixed, bad = dict(row), []
    for field in schema:
        value = fixed.get(field.name)
        if value is None or field.name in ONCE_PER_BATCH:
            continue
        try:
            pa.array([value], type=field.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError):
            bad.append(f"{field.name} = {value!r:.80}")
            fixed[field.name] = None
    why = f"values the output cannot hold, stored as null: {'; '.join(bad) or 'none found'}"
    earlier = fixed.get("error")
    fixed.update(status="error", error_kind=ErrorKind.INTERNAL.value,
                 error=f"{earlier}; {why}" if earlier else why)
    return fixed


def _conversion_error(
    name: str, type_: pa.DataType, values: list[Any], rows: Sequence[Mapping[str, Any]], exc: BaseException
) -> str:
    # Only on the error path: convert value by value to name the offending row.
    for index, value in enumerate(values):
        try:
            pa.array([value], type=type_)
        except Exception:
            return (
                f"column {name!r} ({type_}) cannot hold row {index}{_row_label(rows[index])} "
                f"value {value!r:.200}: {exc}"
            )
    return f"column {name!r} ({type_}) could not be converted: {exc}"


def _row_label(row: Mapping[str, Any]) -> str:
    trial_id = row.get("trial_id")
    return f" (trial_id {trial_id!r})" if trial_id is not None else ""


class TrialSink:
    """One writer per worker. Rows in, Arrow IPC parts out.

    ``append`` buffers a row; the buffer is written as one record batch to the open
    stream part when it holds ``batch_rows`` rows or when ``flush_seconds`` have
    passed since the last flush (checked on append, there is no background thread),
    so a crash loses at most the batch in flight. A part holding ``part_rows`` rows
    is finalized and the next one is opened on the next flush. Parts are created
    lazily: a sink that never writes a row leaves no file behind.

    The sink keeps a reference to each appended row until it is flushed; do not
    mutate a row after appending it. A sink that is not closed (a crash) leaves its
    open part as a stream, which ``repair_parts`` finalizes on resume.

    ``journal``: write each appended row ahead to ``trials/journal-W.jsonl``
    (``runner.output.journal``) before buffering it, so a crash loses no appended row
    (``replay_journals`` writes them on resume); truncated after each batch, removed
    by ``close``. A run's sinks journal (``Session.sink``); importers and rescore,
    which can simply start again, do not.
    """

    def __init__(
        self,
        out_dir: Path,
        schema: pa.Schema,
        *,
        worker: str = "w0",
        batch_rows: int = 4096,
        flush_seconds: float = 2.0,
        part_rows: int = 1_000_000,
        clock: Callable[[], float] = time.monotonic,
        journal: bool = False,
    ) -> None:
        if not isinstance(schema, pa.Schema):
            raise TypeError(f"schema must be a pyarrow.Schema, got {type(schema).__name__}")
        if not _WORKER_RE.fullmatch(worker):
            raise ValueError(f"worker name {worker!r} must be letters, digits, '_', '.', inner '-'")
        if batch_rows < 1 or part_rows < 1:
            raise ValueError(f"batch_rows and part_rows must be >= 1, got {batch_rows} and {part_rows}")
        if flush_seconds < 0:
            raise ValueError(f"flush_seconds must be >= 0, got {flush_seconds}")
        self.trials_dir = Path(out_dir) / TRIALS_DIR
        self.trials_dir.mkdir(parents=True, exist_ok=True)
        self.schema = schema
        self.worker = worker
        self._names = frozenset(schema.names)
        self._batch_rows = batch_rows
        self._flush_seconds = flush_seconds
        self._part_rows = part_rows
        self._clock = clock
        self._buffer: list[Mapping[str, Any]] = []
        self._flush_at = min(batch_rows, part_rows)
        self._last_flush = clock()
        self._rows_written = 0
        self._part_written = 0
        self._next_seq = _next_free_seq(self.trials_dir, worker)
        self._stream_path: Path | None = None
        self._file: pa.NativeFile | None = None
        self._writer: ChecksummedWriter | None = None
        self._finalized: list[Path] = []
        self._closed = False
        self._broken: UserError | None = None
        self._journaling = journal
        self._journal: Journal | None = None
        self._journal_pending: list[Mapping[str, Any]] = []  # appended, not yet journaled (``_drain_journal``)
        self._deferred: Exception | None = None  # what the loop's ``_drain_soon`` raised

    @property
    def rows_written(self) -> int:
        """Rows written to disk (flushed) by this sink, over all its parts."""
        return self._rows_written

    @property
    def rows_buffered(self) -> int:
        return len(self._buffer)

    @property
    def finalized_parts(self) -> tuple[Path, ...]:
        """The ``.arrow`` files this sink has finalized so far, in order."""
        return tuple(self._finalized)

    def append(self, row: Mapping[str, Any]) -> None:
        if self._closed:
            raise RuntimeError(f"TrialSink {self.worker!r} in {self.trials_dir} is closed")
        if not row.keys() <= self._names:
            unknown = sorted(set(row.keys()) - self._names)
            raise KeyError(
                f"row{_row_label(row)} has keys not in the trial schema: {unknown}; "
                f"schema columns are {self.schema.names}"
            )
        buffer = self._buffer
        if self._journaling:
            if self._broken is not None:
                raise self._broken
            if self._deferred is not None:
                raise self._deferred
            buffer.append(row)
            pending = self._journal_pending
            pending.append(row)
            if len(pending) == 1:
                try:
                    asyncio.get_running_loop().call_soon(self._drain_soon)
                except RuntimeError:  # no event loop: the row is written now
                    self._drain_journal()
            elif len(pending) >= JOURNAL_ROWS:
                self._drain_journal()
        else:
            buffer.append(row)
        if len(buffer) >= self._flush_at or self._clock() - self._last_flush >= self._flush_seconds:
            self.flush()

    def _drain_journal(self) -> None:
        """Write the rows appended since the last drain to the journal, in one write.

        Called at the end of the event-loop iteration that appended them (or at once, without a loop, and after
        ``JOURNAL_ROWS`` rows). A row already flushed into a part is not journaled (it is on disk); a value JSON
        cannot hold sends the buffered rows to the part at once instead; a refused write breaks the sink."""
        rows, self._journal_pending = self._journal_pending, []
        if not rows or self._broken is not None or self._closed:
            return
        try:
            if self._journal is None:
                self._journal = Journal(journal_path(self.trials_dir, self.worker), {
                    k.decode(): v.decode() for k, v in (self.schema.metadata or {}).items()})
            self._journal.append_many(rows)
        except TypeError:  # a value JSON cannot hold: the rows go to the part at once instead
            self.flush()
        except OSError as exc:
            raise self._break(exc, 1 << 16) from None

    def _drain_soon(self) -> None:
        """``_drain_journal`` as the event loop's callback: what it raises is raised by the next ``append``/``close``."""
        try:
            self._drain_journal()
        except Exception as exc:
            self._deferred = exc

    def flush(self) -> None:
        """Write buffered rows as one record batch to the open stream part.

        The bytes reach the OS (the file is unbuffered) but are not fsynced: that
        survives the process dying, which is the failure this sink is built for. A row a
        value of which cannot be converted is written as an ``internal`` error row naming
        it (``to_record_batch_salvaged``): the rest of the batch is never lost for it.
        """
        self._last_flush = self._clock()
        if not self._buffer:
            return
        rows, self._buffer = self._buffer, []
        self._journal_pending = []  # these rows reach the part now: no need to journal them
        self._write(to_record_batch_salvaged(rows, self.schema))
        if self._journal is not None:
            try:
                self._journal.clear()  # its rows are in the part now
            except OSError as exc:
                raise self._break(exc, 1 << 16) from None

    def _write(self, batch: pa.RecordBatch) -> None:
        if self._broken is not None:
            raise self._broken
        batch = scrub_batch(batch)  # every key of the run out of every text column, nested ones too (free without keys)
        try:
            if self._writer is None:
                self._open_part()
            assert self._writer is not None
            self._writer.write_batch(batch)
        except OSError as exc:
            raise self._break(exc, batch.nbytes) from None
        self._rows_written += batch.num_rows
        self._part_written += batch.num_rows
        if self._part_written >= self._part_rows:
            try:
                self._finalize_part()
            except OSError as exc:
                raise self._break(exc, 1 << 16) from None
        self._flush_at = min(self._batch_rows, self._part_rows - self._part_written)

    def write_batch(self, batch: pa.RecordBatch) -> None:
        """Write rows already converted with ``to_record_batch`` (e.g. by a Ray worker).

        Buffered rows are flushed first, so the order of rows on disk is the order they
        reached the sink. The batch's schema must equal the sink's (metadata aside).
        """
        if self._closed:
            raise RuntimeError(f"TrialSink {self.worker!r} in {self.trials_dir} is closed")
        if not batch.schema.equals(self.schema, check_metadata=False):
            raise TypeError(f"batch schema differs from the trial schema:\n{batch.schema}\nvs\n{self.schema}")
        self.flush()
        if batch.num_rows == 0:
            return
        if batch.schema.metadata != self.schema.metadata:
            batch = pa.RecordBatch.from_arrays(batch.columns, schema=self.schema)
        self._write(batch)

    def close(self) -> None:
        """Flush, then finalize the open stream into an IPC file. Idempotent."""
        if self._closed:
            return
        try:
            self.flush()
            if self._deferred is not None:  # the loop's journal write failed after the last append
                raise self._deferred
        finally:
            # Even if the last batch failed to convert, the batches already on disk are
            # complete and get finalized.
            self._closed = True
            try:
                if self._writer is not None and self._broken is None:
                    try:
                        self._finalize_part()
                    except OSError as exc:
                        raise self._break(exc, 1 << 16) from None
            finally:
                if self._journal is not None:  # kept when a row may not have reached a part
                    self._journal.close(remove=self._broken is None and not self._buffer)

    def _break(self, exc: OSError, needed: int) -> Exception:
        """After a refused write nothing more is written: the open part keeps its complete batches for the
        next resume to repair. Returns the exception to raise (``UserError`` for a full disk)."""
        where = self._stream_path or self.trials_dir
        for handle in (self._file,):
            try:
                if handle is not None and not handle.closed:
                    handle.close()
            except OSError:
                pass
        self._writer = self._file = None
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            free = shutil.disk_usage(self.trials_dir).free if self.trials_dir.exists() else 0
            self._broken = UserError(
                f"no space left on the device writing {where}: the batch needed about "
                f"{_mib(needed)} MiB, {_mib(free)} MiB are free",
                hint="free some space (or move the output) and rerun the same command: written trials are kept "
                     "and the rest run again")
            return self._broken
        self._broken = UserError(f"cannot write {where}: {exc.strerror or exc}",
                                 hint="fix the cause and rerun the same command: written trials are kept")
        return self._broken

    def __enter__(self) -> TrialSink:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _open_part(self) -> None:
        while True:
            seq = self._next_seq
            self._next_seq += 1
            stem = f"part-{self.worker}-{seq:05d}"
            stream_path = self.trials_dir / f"{stem}{_STREAM_SUFFIX}"
            try:
                fd = os.open(stream_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                continue
            # Holding the stream name reserves the seq; a finalized file with the same
            # stem means another sink of this worker got there first.
            if (self.trials_dir / f"{stem}{_FILE_SUFFIX}").exists():
                os.close(fd)
                os.unlink(stream_path)
                continue
            break
        self._stream_path = stream_path
        self._file = pa.OSFile(fd, mode="wb")
        # an IPC *file* under the stream's name: its body reads as a stream if the footer never comes; each batch
        # carries its checksum (runner.output.checksums)
        self._writer = ChecksummedWriter(self._file, with_scheme(self.schema))
        self._part_written = 0

    def _finalize_part(self) -> None:
        """Write the footer and rename the part into place: no copy, so no extra space is needed."""
        assert self._writer is not None and self._file is not None and self._stream_path is not None
        self._writer.close()
        self._file.close()
        stream_path = self._stream_path
        self._writer = self._file = None
        final = _final_path(stream_path)
        _fsync(stream_path)
        os.rename(stream_path, final)
        _fsync(final.parent)
        note_written(final)  # its checksums were computed here, from the batches written: this process trusts it
        self._stream_path = None
        self._finalized.append(final)
        self._part_written = 0


@dataclass(frozen=True, slots=True)
class RepairNote:
    """What ``repair_parts`` did with one leftover stream (which is deleted either way)."""

    stream: Path
    part: Path | None  # the finalized file, None when no complete batch survived
    batches: int  # complete batches kept from the stream
    rows: int
    torn_tail: bool  # bytes after the last complete batch were dropped
    already_finalized: bool = False  # crash between rename and delete: the stream was a duplicate

    def __str__(self) -> str:
        if self.already_finalized:
            return f"{self.stream.name}: already finalized as {_final_path(self.stream).name}; removed the stream"
        tail = ", dropped a torn tail" if self.torn_tail else ""
        if self.part is None:
            return f"{self.stream.name}: no complete batch{tail}; removed"
        return f"{self.stream.name} -> {self.part.name}: kept {self.batches} batches ({self.rows} rows){tail}"


def set_aside(path: Path, detail: str) -> None:
    """Move ``path`` (of ``trials/``) to ``trials/damaged/`` unopened, with a ``TrialgridWarning``: what is under a
    part's or a journal's name but is no file to read."""
    where = path.parent / DAMAGED_DIR
    where.mkdir(exist_ok=True)
    os.replace(path, where / path.name)
    warn(f"moved {path.name} to trials/{DAMAGED_DIR}/ unread: it {detail}; its trials run again")


def repair_parts(trials_dir: Path) -> list[RepairNote]:
    """Finalize the parts a crash left behind in ``trials_dir``; one note per leftover part.

    Leftover ``.arrow.tmp`` files (a crash during a repair) are deleted first; their
    source is still there and is repaired again. A part whose footer was written (a
    crash between closing and renaming it) is renamed as is; any other keeps its
    complete batches in a new file. Never raises on damaged parts: one that cannot even
    yield its schema is treated as having no complete batch. Refuses (``UserError``)
    when the disk lacks the space for the copy. Must not run while a sink is writing to
    the directory (the output's lock guarantees it).
    """
    trials_dir = Path(trials_dir)
    if not trials_dir.is_dir():
        return []
    for tmp in sorted(trials_dir.glob(f"part-*{_TMP_SUFFIX}")):
        tmp.unlink()
    notes = []
    for stream in sorted(trials_dir.glob(f"part-*{_STREAM_SUFFIX}")):
        kind = not_regular(stream)
        if kind is not None:
            set_aside(stream, f"is {kind}, not an unfinished part")
            continue
        final = _final_path(stream)
        if final.exists():
            stream.unlink()
            notes.append(RepairNote(stream, final, 0, 0, False, already_finalized=True))
            continue
        complete = _complete_file(stream)
        if complete is not None:
            os.rename(stream, final)
            notes.append(RepairNote(stream, final, *complete, False))
            continue
        _need_space(trials_dir, stream.stat().st_size, f"to repair {stream}")
        batches, rows, torn = salvage_part(stream, final)
        stream.unlink()
        notes.append(RepairNote(stream, final if batches else None, batches, rows, torn))
    if notes:
        _fsync(trials_dir)
    return notes


def _complete_file(path: Path) -> tuple[int, int] | None:
    """(batches, rows) when ``path`` reads as a whole IPC file (footer included), else None."""
    try:
        reader = ipc.open_file(str(path))
        return reader.num_record_batches, sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))
    except _TORN:
        return None


def _mib(n: int) -> int:
    return max(1, -(-n // (1 << 20)))


def _need_space(where: Path, size: int, why: str) -> None:
    free = shutil.disk_usage(where).free
    if free < size + (1 << 20):
        raise UserError(f"no space left on the device {why}: about {_mib(size + (1 << 20))} MiB are needed, "
                        f"{_mib(free)} MiB are free", file=where,
                        hint="free that much space and rerun the same command: written trials are kept")


def _trial_id_batches(trials_dir: Path, parts: Sequence[Path] | None = None) -> Iterator[pa.Array]:
    """The ``trial_id`` column of every finalized part (or of ``parts``), batch by batch (nothing else is read)."""
    trials_dir = Path(trials_dir)
    if not trials_dir.is_dir():
        return
    streams = sorted(p.name for p in trials_dir.glob(f"part-*{_STREAM_SUFFIX}"))
    if streams:
        raise RuntimeError(f"{trials_dir} has unrepaired stream parts {streams}; run repair_parts first")
    for part in (sorted(trials_dir.glob(f"part-*{_FILE_SUFFIX}")) if parts is None else parts):
        with pa.OSFile(str(part), "rb") as source:
            schema = ipc.open_file(source).schema
            index = schema.get_field_index("trial_id")
            if index < 0:
                raise KeyError(f"{part} has no 'trial_id' column")
            source.seek(0)
            reader = ipc.open_file(source, options=ipc.IpcReadOptions(included_fields=[index]))
            for i in range(reader.num_record_batches):
                yield reader.get_batch(i).column(0).drop_null()


_HEX = np.full(256, 255, dtype=np.uint64)
_HEX[np.frombuffer(b"0123456789abcdef", dtype=np.uint8)] = np.arange(16, dtype=np.uint64)
_SHIFTS = np.arange(60, -1, -4, dtype=np.uint64)


def trial_keys(ids: pa.Array) -> np.ndarray:
    """Trial ids (16 lowercase hex chars) as uint64, vectorised; other shapes go through ``int``."""
    ids = ids.cast(pa.string())
    offsets = np.frombuffer(ids.buffers()[1], dtype=np.int32)[ids.offset: ids.offset + len(ids) + 1]
    data = np.frombuffer(ids.buffers()[2], dtype=np.uint8)[offsets[0]: offsets[-1]] if len(ids) else np.empty(0, np.uint8)
    if len(ids) and np.all(np.diff(offsets) == 16):
        nibbles = _HEX[data.reshape(-1, 16)]
        if not (nibbles == 255).any():
            return np.bitwise_or.reduce(nibbles << _SHIFTS, axis=1)
    return np.array([int(x, 16) for x in ids.to_pylist()], dtype=np.uint64)


def completed_trial_keys(trials_dir: Path, parts: Sequence[Path] | None = None) -> np.ndarray:
    """Sorted uint64 keys of every written trial id (of ``parts``, if given): 8 bytes a trial, for resuming huge
    grids. A Python set of 10 million id strings costs about 1 GB; this costs 80 MB.
    """
    columns = [trial_keys(column) for column in _trial_id_batches(trials_dir, parts)]
    keys = np.concatenate(columns) if columns else np.empty(0, dtype=np.uint64)
    keys.sort()
    return keys


def _final_path(stream: Path) -> Path:
    return stream.with_suffix(_FILE_SUFFIX)


def _next_free_seq(trials_dir: Path, worker: str) -> int:
    pattern = re.compile(rf"part-{re.escape(worker)}-(\d+)(?:\.arrows|\.arrow|\.arrow\.tmp)")
    seqs = [int(m.group(1)) for p in trials_dir.iterdir() if (m := pattern.fullmatch(p.name))]
    return max(seqs, default=-1) + 1


def salvage_part(source_path: Path, final: Path) -> tuple[int, int, bool]:
    """Copy the complete record batches of ``source_path`` into ``final`` (IPC file, fsynced tmp + rename).

    The source may be an unfinished part (an IPC file without its footer) or a finished
    part cut short; its batches are read by ``UnfinishedPart`` until the first incomplete
    one, and a batch whose checksum fails is left out, so its trials run again. The copy
    is written with fresh checksums, batch by batch, so memory stays at one batch.
    Returns (batches, rows, torn tail dropped); with zero complete batches nothing is
    written.
    """
    tmp = final.with_name(final.name + ".tmp")
    batches = rows = 0
    writer: ChecksummedWriter | None = None
    sink: pa.NativeFile | None = None
    part = UnfinishedPart(source_path)
    try:
        for batch in part.batches():
            if writer is None:
                assert part.schema is not None
                sink = pa.OSFile(str(tmp), "wb")
                writer = ChecksummedWriter(sink, with_scheme(part.schema))
            writer.write_batch(batch)
            batches += 1
            rows += batch.num_rows
        if writer is None:
            return 0, 0, part.torn
        writer.close()
        assert sink is not None
        sink.close()
        _fsync(tmp)
        os.replace(tmp, final)
        _fsync(final.parent)
        return batches, rows, part.torn
    finally:
        # On failure the half-written tmp is abandoned, so its writer needs no footer.
        if sink is not None and not sink.closed:
            sink.close()
        if tmp.exists():
            tmp.unlink()


def _fsync(path: Path) -> None:
    """fsync a file, or a directory (which makes a rename in it durable)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True, slots=True)
class ReplayNote:
    """What ``replay_journals`` did with one journal (which is deleted, or set aside when it cannot be replayed)."""

    journal: Path
    rows: int  # rows written to a new part
    already_written: int  # rows a part already held (a kill between a batch and the journal's truncation)
    torn: bool
    part: Path | None = None
    refused: str | None = None  # why nothing was replayed (the journal is then in trials/damaged/)

    def __str__(self) -> str:
        if self.refused is not None:
            return f"{self.journal.name}: not replayed ({self.refused}); moved to damaged/"
        tail = ", dropped a torn last line" if self.torn else ""
        part = f" into {self.part.name}" if self.part is not None else ""
        return (f"{self.journal.name}: replayed {self.rows} answered trials{part} "
                f"({self.already_written} already written){tail}")


def replay_journals(trials_dir: Path, schema: pa.Schema) -> list[RepairNote | ReplayNote]:
    """Write the rows the journals a crash left hold (``runner.output.journal``) into parts; one note each.

    Run after ``repair_parts`` and before the resume set is read, holding the output's lock. A row whose
    (``trial_id``, ``finished_at``) a part already holds is not written again. The part carries the schema
    metadata the journal recorded (its sweep id and session), so the rows count as the session that answered
    them; ``schema`` gives the columns. A journal whose rows do not convert goes to ``trials/damaged/``.
    """
    trials_dir = Path(trials_dir)
    notes: list[RepairNote | ReplayNote] = []
    journals = sorted(trials_dir.glob(JOURNAL_GLOB)) if trials_dir.is_dir() else []
    for path in journals:
        kind = not_regular(path)
        if kind is not None:
            set_aside(path, f"is {kind}, not a journal")
            continue
        content = read_journal(path)
        rows, written = content.rows, 0
        if rows and content.metadata is not None:
            seen = _written_pairs(trials_dir, {r.get("trial_id") for r in rows})
            kept = [r for r in rows if (r.get("trial_id"), r.get("finished_at")) not in seen]
            written, rows = len(rows) - len(kept), kept
        if not rows or content.metadata is None:
            path.unlink()
            notes.append(ReplayNote(path, 0, written, content.torn))
            continue
        worker = path.name[len("journal-"):-len(".jsonl")]
        try:
            if not rows[0].keys() <= set(schema.names) or not _WORKER_RE.fullmatch(worker):
                raise TypeError("its rows do not have the trial schema's columns")
            batch = to_record_batch(rows, schema.with_metadata(content.metadata))
            with TrialSink(trials_dir.parent, batch.schema, worker=worker) as sink:
                sink.write_batch(batch)
        except (TypeError, KeyError, UserError) as exc:
            damaged = trials_dir / "damaged"
            damaged.mkdir(exist_ok=True)
            os.replace(path, damaged / path.name)
            notes.append(ReplayNote(path, 0, written, content.torn, refused=str(exc).splitlines()[0][:200]))
            continue
        path.unlink()
        notes.append(ReplayNote(path, len(rows), written, content.torn, sink.finalized_parts[-1]))
    if notes:
        _fsync(trials_dir)
    return notes


def _written_pairs(trials_dir: Path, ids: set[Any]) -> set[tuple[Any, Any]]:
    """(trial_id, finished_at) of the finished parts' rows whose id is in ``ids`` (two columns read)."""
    import pyarrow.compute as pc  # here, not at the top: every reader imports this module, and only a resume needs it

    wanted = pa.array([i for i in ids if isinstance(i, str)], type=pa.string())
    pairs: set[tuple[Any, Any]] = set()
    for part in sorted(trials_dir.glob(f"part-*{_FILE_SUFFIX}")):
        try:
            with pa.memory_map(str(part)) as source:
                reader = ipc.open_file(source)
                names = reader.schema.names
                if "trial_id" not in names or "finished_at" not in names:
                    continue
                for i in range(reader.num_record_batches):
                    batch = reader.get_batch(i)
                    ids_column = batch.column("trial_id")
                    mask = pc.is_in(ids_column, value_set=wanted)
                    if not pc.any(mask).as_py():
                        continue
                    chosen = batch.filter(mask)
                    finished = chosen.column("finished_at").cast(pa.int64())
                    pairs.update(zip(chosen.column("trial_id").to_pylist(), finished.to_pylist(), strict=True))
        except _TORN:
            continue  # a damaged part: quarantine_parts deals with it; its rows do not count
    return pairs
