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
half-written part. After a crash, ``runner.output.repair`` turns leftover parts into
files, keeping the complete batches and dropping a torn tail; the resume set is
``runner.output.keys``.

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
from collections.abc import Callable, Mapping, Sequence
from operator import itemgetter
from pathlib import Path
from types import TracebackType
from typing import Any

import pyarrow as pa

from runner.core.calls import first_in_batch
from runner.core.errors import ErrorKind, UserError
from runner.core.redact import scrub_batch
from runner.core.schema import ONCE_PER_BATCH
from runner.output.checksums import ChecksummedWriter, with_scheme
from runner.output.journal import Journal, journal_path
from runner.output.verified import note_written

__all__ = ["TRIALS_DIR", "TrialSink", "to_record_batch", "to_record_batch_salvaged"]

TRIALS_DIR = "trials"
#: where a part, stream or journal that cannot be read is moved (``trials/damaged/``)
DAMAGED_DIR = "damaged"
_STREAM_SUFFIX = ".arrows"
_FILE_SUFFIX = ".arrow"
_TMP_SUFFIX = ".arrow.tmp"
_WORKER_RE = re.compile(r"[A-Za-z0-9_.]+(?:-[A-Za-z0-9_.]+)*")
# A torn tail surfaces as ArrowInvalid (truncated length prefix or metadata) or as
# OSError (truncated body); both are the expected shape of a killed writer.
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


def _mib(n: int) -> int:
    return max(1, -(-n // (1 << 20)))


def _need_space(where: Path, size: int, why: str) -> None:
    free = shutil.disk_usage(where).free
    if free < size + (1 << 20):
        raise UserError(f"no space left on the device {why}: about {_mib(size + (1 << 20))} MiB are needed, "
                        f"{_mib(free)} MiB are free", file=where,
                        hint="free that much space and rerun the same command: written trials are kept")


def _final_path(stream: Path) -> Path:
    return stream.with_suffix(_FILE_SUFFIX)


def _next_free_seq(trials_dir: Path, worker: str) -> int:
    pattern = re.compile(rf"part-{re.escape(worker)}-(\d+)(?:\.arrows|\.arrow|\.arrow\.tmp)")
    seqs = [int(m.group(1)) for p in trials_dir.iterdir() if (m := pattern.fullmatch(p.name))]
    return max(seqs, default=-1) + 1


def _fsync(path: Path) -> None:
    """fsync a file, or a directory (which makes a rename in it durable)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


