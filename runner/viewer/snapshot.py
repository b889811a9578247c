"""An output as the viewer sees it at one moment, re-read when a run still writing it changes.

Why a module of its own: every question the viewer answers (``runner.viewer.listing``, ``runner.viewer.trial``,
``runner.viewer.numbers``) starts from the same frame, a lazy polars plan over ``Output.scan()`` plus the complete
record batches of a part still being written; this module keeps that frame current and owns what is derived
from it once per snapshot. The writer is never disturbed: nothing here opens a file for writing inside the
output, and the open parts' batches are copied to the viewer's own temporary folder.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import polars as pl

from runner.core.calls import Blobs
from runner.core.errors import UserError
from runner.core.schema import CALL_COLUMNS, COMMON_FIELDS
from runner.output.parts import damaged_parts, latest, refuse_issues, trial_key
from runner.output.reader import Output
from runner.output.unfinished import UnfinishedPart

__all__ = ["COMMON", "OpenPart", "Snapshot", "Snapshots"]

#: the columns every output has (the rest, apart from the recorded calls, are a probe's outcomes)
COMMON = tuple(f.name for f in COMMON_FIELDS)
_T = TypeVar("_T")


def _unlink(files: Sequence[Path]) -> None:
    for f in files:
        f.unlink(missing_ok=True)


class OpenPart:
    """What was read of one part still being written (an Arrow IPC file without its footer yet: its body is a
    stream): its complete batches so far whose checksums hold (``runner.output.unfinished``, the reader crash repair
    uses too, so the live view shows no trial repair would drop), scanned lazily like a closed part. A re-read reads only the bytes written
    since, from where the last complete batch ended (the open part holds up to a million rows; reading all of it
    on every poll of a live run was the viewer's cost that grew with the run).

    The batches read are written, as they are, to Arrow files in ``spill`` (a folder of the viewer's own in the
    system's temporary folder, never in the output), one file per re-read, and scanned from there: held in memory,
    a 300k-row open part was 467 MiB of the server's heap, and a 1M-row one would be three times that. The part is
    read through the file, not a memory map: a map made on each poll stayed alive under the batches kept, so its
    pages were counted once per poll (2.8 GB after six polls of a 370k-row open part, ``benchmarks/view.py
    --live``). Nothing is written into the output, nothing locked."""

    def __init__(self, spill: Path) -> None:
        self.spill = spill
        self.inode = -1
        self.part: UnfinishedPart | None = None  # reads on from where the last complete, verified batch ended
        self.files: list[Path] = []  # the spilled batches, oldest first
        self.retired: list[Path] = []  # spilled files the next snapshot no longer scans (``Snapshots._read``)

    def read(self, path: Path) -> pl.LazyFrame | None:
        try:
            st = path.stat()
        except OSError:  # finalized and renamed since the listing: the next listing has it as a closed part
            return self.frame()
        if self.part is None or st.st_ino != self.inode or st.st_size < self.part.offset:  # another file: start again
            self.retired += self.files
            self.inode, self.part, self.files = st.st_ino, UnfinishedPart(path), []
        import pyarrow.ipc as ipc

        # each batch written out as soon as it is read: one batch in memory at a time, not the whole new stretch
        target = self.spill / f"{path.stem}-{st.st_ino}-{len(self.files):06d}.arrow"
        part, writer = self.part, None
        start = (part.offset, part.index, part.failed)
        try:
            for batch in part.batches():
                if writer is None:
                    assert part.schema is not None
                    writer = ipc.new_file(str(target), part.schema)
                writer.write_batch(batch)
        except BaseException:
            if writer is not None:
                writer.close()
            target.unlink(missing_ok=True)
            part.offset, part.index, part.failed = start  # read again next time
            raise
        if writer is not None:
            writer.close()
            self.files.append(target)
        return self.frame()

    def frame(self) -> pl.LazyFrame | None:
        return pl.scan_ipc([str(f) for f in self.files], glob=False) if self.files else None


@dataclass
class Snapshot:
    """An output as it was when last looked at: the frame every query starts from, and what is derived from it
    once (blobs, column values, the summary), filled in when first asked (``cached``)."""

    key: tuple[Any, ...]
    output: Output | None
    frame: pl.LazyFrame | None
    schema: pl.Schema
    stream_frame: pl.LazyFrame | None
    #: whether ``frame`` chooses each trial's newest row (a trial retried while the run goes on): then it is never
    #: cut into windows (each window would choose again over every row)
    newest: bool = False
    cache: dict[str, Any] = field(default_factory=dict)
    locks: dict[str, threading.Lock] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def cached(self, name: str, make: Callable[[], _T]) -> _T:
        """``make()`` once per snapshot, whichever thread asks first (the others wait for it: the analysis of a
        large output is not worth computing twice)."""
        with self.lock:
            lock = self.locks.setdefault(name, threading.Lock())
        with lock:
            if name not in self.cache:
                self.cache[name] = make()
            return self.cache[name]

    def outcomes(self) -> list[str]:
        """The probes' outcome columns: every column but the common ones and the recorded calls."""
        return [c for c in self.schema.names() if c not in COMMON and c not in CALL_COLUMNS]

    def good_rates(self) -> list[str]:
        """The outcome columns whose ``true`` is wanted, as the run's probes declare them (``Probe.good_rates``):
        the pages colour a flag by what it means."""
        from runner.probes import PROBES

        kinds = {p.kind for p in self.output.manifest.probes.values()} if self.output is not None else set()
        good = {r for kind in kinds if kind in PROBES for r in PROBES[kind].good_rates}
        return [c for c in self.outcomes() if c in good]

    def windows(self) -> list[pl.LazyFrame]:
        """Every trial as consecutive windows of rows (``runner.analysis.windows``: a finished output whose parts
        prove each trial is one row), else whole. A query over every trial runs window by window: polars keeps
        each page of the parts it touches mapped, and counted in the server's memory, until the query ends (the
        catalogue orders' distinct values alone held 387 MiB of pages at 1M trials)."""
        from runner.analysis.windows import VIEWER_WINDOW_ROWS, windows_of

        assert self.frame is not None
        output, frame = self.output, self.frame
        if self.newest or output is None or (output.parts and output.unique is not True):
            return [frame]  # each trial's newest row chosen in the frame: chosen over every row, at once
        # one row a trial: the closed parts' records prove it, and the open parts' keys repeat none (``_repeats``)
        return self.cached("windows", lambda: windows_of(output, frame, unique=True, rows=VIEWER_WINDOW_ROWS))

    def blobs(self) -> Blobs:
        """The call blobs of every part, the open ones' too: what a trial's recorded calls are decoded with."""
        def make() -> Blobs:
            blobs = self.output.blobs() if self.output is not None and self.output.parts else Blobs()
            stream = self.stream_frame
            if stream is not None and "call_blobs" in stream.collect_schema().names():
                blobs.add(stream.select(pl.col("call_blobs").explode()).drop_nulls().unnest("call_blobs")
                          .unique("id", keep="first").collect().iter_rows(named=True))
            return blobs
        return self.cached("blobs", make)


class Snapshots:
    """The snapshots of one output directory: the current one, read again when its trials or manifest change
    (a live run), and refused for good once a part is found damaged."""

    def __init__(self, path: Path, output: Output) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._open: dict[Path, OpenPart] = {}
        self._spill: Path | None = None  # the open parts' batches as read (``OpenPart``), made when first needed
        #: whether ``verify`` ran (``output`` may be opened with ``verify=False``, so the first page need not wait
        #: for every batch's checksum); after it, each snapshot checks its parts (``runner.output.verified``
        #: makes a part already checked cost a footer read)
        self._checked = False
        self._damage: UserError | None = None
        self._snap = self._read(self._key(), output)

    def _key(self) -> tuple[Any, ...]:
        trials = self.path / "trials"
        entries: list[tuple[str, int, int]] = []
        if trials.is_dir():
            with os.scandir(trials) as it:
                for e in it:
                    if e.name.endswith((".arrow", ".arrows")) and e.is_file():
                        st = e.stat()
                        entries.append((e.name, st.st_size, st.st_mtime_ns))
        try:
            manifest = (self.path / "manifest.json").stat().st_mtime_ns
        except OSError:
            manifest = 0
        return (manifest, tuple(sorted(entries)))

    def _read(self, key: tuple[Any, ...], output: Output | None = None) -> Snapshot:
        if output is None:
            output = Output.open(self.path, verify=False)
            if self._checked:  # a part finalized since is checked before it is shown
                self._check(output)
        frames: list[pl.LazyFrame] = [output.scan()] if output.parts else []
        streams = sorted(p for p in (self.path / "trials").glob("part-*.arrows")) if (self.path / "trials").is_dir() else []
        if streams and self._spill is None:
            self._spill = Path(tempfile.mkdtemp(prefix="trialgrid-view-"))
            weakref.finalize(self, shutil.rmtree, self._spill, True)  # at exit, or once this source is dropped
        before, spill = self._open, self._spill or Path(tempfile.gettempdir())  # (no stream: no spill made)
        self._open = {s: before.get(s) or OpenPart(spill) for s in streams}
        read = [f for f in (self._open[s].read(s) for s in streams) if f is not None]
        # spilled files the new snapshot does not scan (a part finalized since, or rewritten): removed once the
        # snapshot before it, which does, is no longer used by any request
        dropped = [f for s, part in before.items() if s not in self._open for f in part.files]
        for part in self._open.values():
            dropped += part.retired
            part.retired = []
        if dropped:
            previous = getattr(self, "_snap", None)
            if previous is None:
                _unlink(dropped)
            else:
                weakref.finalize(previous, _unlink, dropped)
        stream_frame: pl.LazyFrame | None = None
        if read:
            stream_frame = read[0] if len(read) == 1 else pl.concat(read, how="diagonal_relaxed")
        closed = frames[0] if frames else None
        if stream_frame is not None:
            frames.append(stream_frame)
        if not frames:
            return Snapshot(key, output, None, pl.Schema(), None)
        frame = pl.concat(frames, how="diagonal_relaxed") if len(frames) > 1 else frames[0]
        newest = stream_frame is not None and _repeats(closed, stream_frame)
        if newest:
            frame = latest(frame)  # a trial retried while the run goes on: its newest row
        return Snapshot(key, output, frame, frame.collect_schema(), stream_frame, newest)

    def current(self) -> Snapshot:
        """The output as it is now (``UserError`` once a part is found damaged: refused, as every reader does)."""
        key = self._key()
        with self._lock:
            if self._damage is not None:
                raise self._damage
            if key != self._snap.key:
                self._snap = self._read(key)
            return self._snap

    def _check(self, output: Output) -> None:
        """Check the checksums of ``output``'s parts (``runner.output.parts.damaged_parts``; a part unchanged since
        it verified is not read again, ``runner.output.verified``); a damaged one is remembered and raised, here
        and by every later ``snapshot``."""
        issues = damaged_parts([p for p in output.parts if p.exists()])  # a part gone since the listing: not counted
        if issues:
            try:
                refuse_issues(output.trials_dir, issues)
            except UserError as exc:
                self._damage = exc
                raise
        self._checked = True

    def verify(self) -> None:
        """Check every closed part's checksums before any value is trusted for long: the server runs this first,
        once the first page is answered (a 1M-trial part takes about 0.5 CPU s; requests go on meanwhile);
        ``UserError`` if one is damaged, and every request after it is refused (409)."""
        output = self.current().output
        if output is not None:
            self._check(output)


def _repeats(closed: pl.LazyFrame | None, stream: pl.LazyFrame) -> bool:
    """Whether some trial may have more than one row (then only its newest counts: ``runner.output.parts.latest``,
    which sorts every row, so it is applied only then), by the key ``latest`` uses. ``closed`` is already one
    row per trial (``Output.scan``), so only the open part's keys are compared, with each other and with the
    closed parts' key columns: hashing every row of a 1M-trial output took 296 MiB and 2 s on each re-read.
    Compared by a hash of the key (8 bytes a row; the keys themselves took 290 MiB at a 1M-row open part): two
    keys with one hash read as a repeat, so the newest rows are chosen, which is then only slower."""
    key = trial_key(stream.collect_schema().names())
    hashed = pl.struct(key).hash().alias("_key")
    keys = stream.select(hashed)
    counted = keys.select(pl.len().alias("rows"), pl.col("_key").n_unique().alias("distinct")).collect()
    if counted["rows"].item() != counted["distinct"].item():
        return True
    if closed is None:
        return False
    found = closed.select(hashed).join(keys, on="_key", how="semi").select(pl.len()).collect()
    return bool(found.item())
