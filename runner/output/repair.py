"""Crash repair of an output's ``trials/``: what a killed run left, made whole before the next one reads it.

A run may be killed at any moment. It leaves parts still being written
(``part-W-NNNNN.arrows``: an IPC file without its footer), copies of a repair it was
making (``.arrow.tmp``) and write-ahead journals (``journal-W.jsonl``) of rows answered
but not yet in a part. ``repair_parts`` turns each leftover part into a finished one
(its complete, verified batches read by ``runner.output.unfinished``, a torn tail
dropped); ``replay_journals`` writes the journals' rows that no part holds. Anything
under those names that is not a regular file is set aside, unread. Both run only
while the output's lock is held (``runner.output.lock``), before the resume set is
read; the writer is ``runner.output.sink``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc

from runner.core.errors import UserError, warn
from runner.core.safety import not_regular
from runner.output.checksums import ChecksummedWriter, with_scheme
from runner.output.journal import JOURNAL_GLOB, read_journal
from runner.output.sink import (
    _FILE_SUFFIX,
    _STREAM_SUFFIX,
    _TMP_SUFFIX,
    _WORKER_RE,
    DAMAGED_DIR,
    TrialSink,
    _final_path,
    _fsync,
    _need_space,
    to_record_batch,
)
from runner.output.unfinished import TORN, UnfinishedPart

__all__ = ["RepairNote", "ReplayNote", "repair_parts", "replay_journals", "salvage_part", "set_aside"]


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
    except TORN:
        return None


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
        except TORN:
            continue  # a damaged part: quarantine_parts deals with it; its rows do not count
    return pairs
