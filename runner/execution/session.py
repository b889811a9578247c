"""One session of a sweep on an output directory: the lifecycle every backend runs inside.

A run in any mode — local, batch, Ray — is the same session around a different middle.
``Session`` owns everything that is not "turn pending specs into rows":

- the output's **lock** (``runner.output.lock``), held from ``open`` to ``finish``;
- the **manifest** (``runner.output.manifest``): started (or resumed) on open, with the
  prices, budget and ``strict_params`` in force this session, finished once;
- opening the **output**: repair of parts a crash left, quarantine, the written schema,
  the resume set (``--retry-errors`` included), and the lines that say so;
- **remedy notices** (``learned``): recorded in the manifest and written at once (a crash
  keeps them), and the one announcement line;
- **cache statistics** (``record_cache``) into the session's entry;
- the **budget**: one ``CostMeter`` in front of the sink, started from what the output
  already spent, and the budget **stop** with its reason;
- the typed **status** (``RunStatus``) and the **finish**, exactly once however the run
  ends: ``complete``, ``stopped_budget``, ``interrupted`` (an exception or a signal once
  trials started), ``failed`` (before any started).

A backend opens a session, builds what it needs (providers, vendors, Ray actors),
calls ``begin``, writes rows into ``sink(...)`` — through ``metered`` — while
``should_stop`` is false, and returns ``result(stats)``::

    with Session(loaded, out, options) as session:
        runner = build(...)              # an exception here: the session ends "failed"
        session.begin()                  # from here an exception ends it "interrupted"
        with session.sink("local") as sink:
            stats = engine(session.pending(), runner, session.metered(sink), stop=session.should_stop)
        if stats.stopped:
            session.stop()               # the budget left trials unstarted
    return session.result(stats)

The states are ``new → open → running → finished`` (``Phase``); ``finish`` from any of
them ends the session once. Ray keeps its own pieces (dispatcher, shared services,
watch) in ``cluster``; the lifecycle is this one.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from runner.config.sweep import LoadedSweep
from runner.core.errors import UserError
from runner.core.manifest import CacheStats, Manifest, RemedyRecord, RunStatus, write_manifest
from runner.core.messages import note, say
from runner.core.schema import trial_schema
from runner.core.types import TrialSpec
from runner.execution.budget import CostMeter
from runner.execution.engine import EngineStats
from runner.execution.grid import grid_of, skip_done
from runner.execution.options import RunOptions
from runner.output.columns import column_batches, part_columns
from runner.output.lock import OutputLock, lock_output
from runner.output.manifest import finish_manifest, start_manifest, sweep_snapshot
from runner.output.parts import (
    CELL,
    part_metadata,
    proven_rows,
    quarantine_parts,
    resume_keys,
    resume_rows,
    session_token,
    survey_parts,
)
from runner.output.reader import Output, spent_in
from runner.output.repair import RepairNote, ReplayNote, repair_parts, replay_journals
from runner.output.sink import TrialSink
from runner.providers.remedies import Learned

if TYPE_CHECKING:
    from runner.analysis.verdict import Ending

__all__ = ["Phase", "RunResult", "Session", "count_statuses", "grid_of"]


@dataclass
class RunResult:
    """What a run returns, whichever backend ran it (``Session.result``)."""

    out: Path
    total: int
    skipped: int
    stats: EngineStats
    counts: dict[str, int]
    elapsed_s: float
    repaired: list[RepairNote | ReplayNote] = field(default_factory=list)
    status: RunStatus = RunStatus.COMPLETE
    stopped: str | None = None  # why scheduling stopped early (a spent budget, a batch refused); rerun to continue
    #: the output as the session left it (manifest and part footers read once, at the finish): the report, the
    #: verdict and ``--fail-on`` after a run read this object instead of opening the output again
    output: Output | None = None
    #: how the run ended and its exit code (``runner.run`` judges it once the backend is done)
    ending: Ending | None = None

    @property
    def exit_code(self) -> int:
        """The exit code ``trialgrid run`` exits with for this run (0 before it was judged)."""
        return self.ending.exit_code if self.ending is not None else 0


def count_statuses(trials_dir: Path, manifest: Manifest | None = None) -> dict[str, int]:
    """Rows by status, each trial once (its newest row), over the parts that count (``Output.counts``);
    ``manifest``: the one the writer holds (else it is read)."""
    return Output.open(trials_dir.parent, manifest=manifest, strict=False).counts()


def _finished_output(out: Path, manifest: Manifest) -> tuple[Output, dict[str, int]]:
    """The output at a session's finish, opened with the manifest the writer holds, and its counts by status."""
    output = Output.open(out, manifest=manifest, strict=False)
    return output, output.counts()


class Phase(Enum):
    """Where a session is: ``finish`` decides ``failed`` or ``interrupted`` from it."""

    NEW = "new"
    OPEN = "open"  # output opened, lock held, manifest started; the backend is setting up
    RUNNING = "running"  # ``begin`` was called: trials may be in flight
    FINISHED = "finished"


class Session:
    """One session of ``loaded`` on ``out`` (see the module's docstring for what it owns).

    Progress lines (resuming, repaired parts) and the note announcing each newly learned
    remedy go to ``runner.core.messages``. Of ``options`` (``RunOptions``) the session reads
    ``strict_params`` (recorded in the manifest), ``retry_errors`` (error rows of those
    kinds are attempted again), ``wait`` (wait for another process writing ``out`` instead
    of refusing) and ``limit``; ``remedies_apply_to`` ends the remedy announcement (batch
    mode's remedies apply to its live requests only).
    """

    def __init__(self, loaded: LoadedSweep, out: Path, options: RunOptions | None = None, *,
                 remedies_apply_to: str = "every later request") -> None:
        options = options or RunOptions()
        self.loaded, self.out = loaded, out
        #: run at most this many of the pending trials (a try: ``--limit``); None: all of them
        self.limit = options.limit
        #: a try's flags, recorded in its session (the report then says how to run the whole grid)
        self.picks = options.pick_flags
        self.strict_params, self.retry_kinds, self.wait = options.strict_params, options.retry_kinds, options.wait
        self.remedies_apply_to = remedies_apply_to
        self.phase = Phase.NEW
        self.grid = grid_of(loaded)
        #: a ``--case`` try's trials, as grid indexes in grid order (None: the whole grid)
        self._picked = (np.asarray(self.grid.indexes_of(frozenset(options.cases)), dtype=np.int64)
                        if options.cases else None)
        #: the trials this session's output is to hold
        self.total = len(self.grid) if self._picked is None else len(self._picked)
        self.status: RunStatus = RunStatus.RUNNING
        self.counts: dict[str, int] = {}
        self.output: Output | None = None
        self.elapsed_s = 0.0
        self.stopped: str | None = None  # the reason, once finished ``stopped_budget``
        #: the budget's meter (None without a budget); every row reaching the output passes it (``metered``)
        self.meter: CostMeter | None = None
        self._stop_asked = False
        self._stop_reason: str | None = None
        self._sinks: list[TrialSink] = []
        self._started: float | None = None
        self._lock: OutputLock | None = None
        # set by ``open``
        self.manifest: Manifest
        self.repaired: list[RepairNote | ReplayNote] = []
        #: the trials already written: sorted grid indexes (``Grid.indexes``), or sorted uint64 keys of their ids
        #: when the grid's cells do not name one index each (``_by_index`` False)
        self.done: np.ndarray = np.empty(0, dtype=np.int64)
        self._by_index = True
        self.retrying: dict[str, int] = {}  # error rows re-attempted this session, by kind
        self.schema: pa.Schema

    # -- lifecycle -------------------------------------------------------------------------------------------------

    def __enter__(self) -> Session:
        self.open()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.finish(exc)

    def open(self) -> None:
        """Take the lock, start the manifest, repair and check the parts, read what is done.

        Raises ``UserError`` for a mismatched ``out``, or one another process writes
        (``wait``: wait for it instead); the lock is released again then.
        """
        assert self.phase is Phase.NEW, "a session opens once"
        loaded, out = self.loaded, self.out
        self._lock = lock_output(out, wait=self.wait)
        try:
            self.manifest = start_manifest(out, loaded, self.total, retry_kinds=self.retry_kinds,
                                           picks=self.picks)
            trials_dir = self.trials_dir
            trials_dir.mkdir(exist_ok=True)
            self.repaired = [*repair_parts(trials_dir)]
            # answers a crash left in the journals (runner.output.journal) become rows: done, not re-sent
            self.repaired += replay_journals(trials_dir, trial_schema(loaded.schema_fields))
            for note in self.repaired:
                say(f"repaired {note}")
            parts = quarantine_parts(trials_dir, loaded.sweep_id)
            _check_written_schema(parts, trials_dir, trial_schema(loaded.schema_fields))
            _count_crashed(self.manifest, parts)
            done, retry, self._by_index = self._resume_set(parts)
            # the record every part of this session carries (runner.output.parts): readers trust it instead of
            # checking every row for a repeated trial
            index = len(self.manifest.sessions) - 1
            token = session_token(index, self.manifest.sessions[index])
            self.schema = trial_schema(loaded.schema_fields, metadata={
                "trialgrid.sweep_id": loaded.sweep_id, **part_metadata(token, sum(retry.values()))})
            sweep = loaded.sweep
            if sweep.budget is not None:  # what earlier sessions spent counts against the budget
                usd, tokens = spent_in(trials_dir, sweep.prices, manifest=self.manifest)
                self.meter = CostMeter(None, sweep.prices, sweep.budget, usd, tokens)
        except BaseException:
            self._lock.release()
            raise
        self.done, self.retrying = done, retry
        manifest = self.manifest
        manifest.strict_params = self.strict_params
        # prices and budget may change between sessions (they are not the sweep's identity): record the ones in force
        in_force = sweep_snapshot(loaded)
        manifest.sweep.prices, manifest.sweep.budget = in_force.prices, in_force.budget
        if self.retry_kinds is not None:
            what = ", ".join(f"{n:,} {k}" for k, n in sorted(retry.items())) or "none"
            say(f"retrying error rows of kind {', '.join(self.retry_kinds)}: {what}")
        if len(self.done):
            say(f"resuming: {len(self.done):,} of {self.total:,} trials already written, running the rest")
        self.phase = Phase.OPEN

    def _resume_set(self, parts: list[Path]) -> tuple[np.ndarray, dict[str, int], bool]:
        """(what is done, the error rows re-attempted by kind, whether ``done`` holds grid indexes)."""
        if not parts:
            return np.empty(0, dtype=np.int64), {}, True
        if self.grid.indexable and set(CELL) <= set(part_columns(parts[0])):
            redo, retry = resume_rows(parts, self.retry_kinds)
            if not redo and proven_rows(parts, self.manifest) == len(self.grid):
                # each row a distinct trial of this grid (the sessions that wrote them ran only trials not yet
                # written), as many as the grid has: all done, and not a row read to know it
                return np.arange(len(self.grid), dtype=np.int64), retry, True
            done = self.grid.indexes(column_batches(parts, CELL))
            if redo:  # every row written is done but the trials re-attempted
                done = np.setdiff1d(done, self.grid.indexes(redo), assume_unique=True)
            return done, retry, True
        resume = resume_keys(parts, self.retry_kinds)
        return resume.done, resume.retry, False

    def begin(self) -> None:
        """The backend is set up; trials start now (an exception from here ends the session ``interrupted``)."""
        assert self.phase is Phase.OPEN, f"begin() on a session that is {self.phase.value}"
        self.phase = Phase.RUNNING
        self._started = time.perf_counter()

    def finish(self, error: BaseException | None = None) -> None:
        """Record how this session ended and release the output; a second call does nothing.

        ``error`` is what is ending the run, if anything: before ``begin`` an ``Exception``
        means ``failed``; after it, or a ``KeyboardInterrupt`` at any point, ``interrupted``.
        While ``error`` is on its way out, a manifest that cannot be written (a full disk) is
        said in a line instead of replacing it.
        """
        if self.phase in (Phase.NEW, Phase.FINISHED):
            return
        if error is None:
            self.status = RunStatus.STOPPED_BUDGET if self._stop_asked else RunStatus.COMPLETE
        elif self.phase is Phase.RUNNING or not isinstance(error, Exception):
            self.status = RunStatus.INTERRUPTED
        else:
            self.status = RunStatus.FAILED
        if self.status is RunStatus.STOPPED_BUDGET:
            self.stopped = self._stop_reason or (self.meter.reason() if self.meter is not None else "stopped")
            self.manifest.sessions[-1].stopped = self.stopped
        self.elapsed_s = time.perf_counter() - self._started if self._started is not None else 0.0
        written = sum(sink.rows_written for sink in self._sinks)  # rows on disk, even if interrupted
        try:
            self.output, self.counts = _finished_output(self.out, self.manifest)
            finish_manifest(self.out, self.manifest, status=self.status, trials_run=written, counts=self.counts,
                            elapsed_s=self.elapsed_s)
        except (OSError, UserError) as exc:
            if error is None:
                raise
            say(f"could not record the end of this session in the manifest: {exc}")
        finally:
            self.phase = Phase.FINISHED
            if self._lock is not None:
                self._lock.release()  # even if the manifest could not be written: the next run marks it crashed

    def result(self, stats: EngineStats) -> RunResult:
        """What the run returns, once finished: ``stats`` are the backend's counts of this session's trials."""
        assert self.phase is Phase.FINISHED, "result() after the session finished"
        stats.stopped = self.status is RunStatus.STOPPED_BUDGET
        # a part that turned bad during the run is a reader's refusal: readers then open the output themselves
        output = self.output if self.output is not None and not self.output.issues else None
        return RunResult(self.out, self.total, len(self.done), stats, self.counts, self.elapsed_s, self.repaired,
                         self.status, self.stopped, output)

    # -- what a backend reads and writes ---------------------------------------------------------------------------

    @property
    def trials_dir(self) -> Path:
        return self.out / "trials"

    def pending(self) -> Iterator[TrialSpec]:
        """The grid's specs not yet written, in grid order (lazily; the done ones are never built), at most
        ``limit`` of them, of ``cases`` only when given."""
        if self._picked is not None:  # a try of some cases: only their specs are built
            wanted = self._picked
            if self._by_index:
                wanted = wanted[~np.isin(wanted, self.done)]
            specs: Iterator[TrialSpec] = (self.grid.spec_at(int(i)) for i in wanted)
            if not self._by_index:
                specs = skip_done(specs, self.done)
        else:
            specs = self.grid.pending(self.done) if self._by_index else skip_done(self.grid, self.done)
        return specs if self.limit is None else itertools.islice(specs, self.limit)

    def sink(self, worker: str) -> TrialSink:
        """A writer for this session's rows (use it as a context manager); its rows count as the session's."""
        engine = self.loaded.sweep.engine
        sink = TrialSink(self.out, self.schema, worker=worker, batch_rows=engine.batch_rows,
                         flush_seconds=engine.flush_seconds, journal=engine.write_ahead)
        self._sinks.append(sink)
        return sink

    def metered(self, sink: Any) -> Any:
        """What the backend writes rows into: ``sink``, behind the budget's meter when there is a budget.

        Rows (``append``) and record batches (``write_batch``) are both counted.
        """
        if self.meter is None:
            return sink
        assert self.meter.sink in (None, sink), "one metered sink per session"
        self.meter.sink = sink
        return self.meter

    def should_stop(self) -> bool:
        """Whether to start no new trial: the budget is spent (or a stop was recorded)."""
        return self._stop_asked or (self.meter is not None and self.meter.exhausted())

    @property
    def stopping(self) -> bool:
        """Whether ``stop`` was called: the session will end ``stopped_budget``."""
        return self._stop_asked

    def stop(self, reason: str | None = None) -> None:
        """Record that the budget left trials unstarted: the session ends ``stopped_budget``.

        ``reason`` is the line that says why (default: the meter's words at the finish,
        e.g. "budget of $0.50 reached ($0.5012 and 1,234 tokens spent)"); the first one
        recorded is kept.
        """
        self._stop_asked = True
        if reason is not None and self._stop_reason is None:
            self._stop_reason = reason

    def save(self) -> None:
        """Write the manifest now (a remedy, a batch, Ray's live summary: what a crash must not lose)."""
        write_manifest(self.out, self.manifest)

    def learned(self, entry: Learned | Mapping[str, Any]) -> None:
        """A parameter remedy learned for the first time (``Learned``, or its JSON from Ray's remedy actor).

        Appended to the manifest and written at once, so a crash keeps it, and announced in one line.
        """
        record = RemedyRecord.model_validate(entry.as_json() if isinstance(entry, Learned) else dict(entry))
        self.manifest.remedies.append(record)
        self.save()
        note(f"remedy learned for {record.provider} model {record.model_id!r}: {record.remedy} "
             f"(the server said: {record.server_message}); applied to {self.remedies_apply_to}, "
             "recorded in the manifest")

    def record_cache(self, stats: Mapping[str, Any]) -> None:
        """This session's response-cache counts (``ResponseCache.stats()`` or the Ray cache actor's) into its
        manifest entry, and its hits into the run's total."""
        counts = CacheStats.model_validate({k: stats[k] for k in ("dir", "hits", "misses", "stored")})
        self.manifest.sessions[-1].cache = counts
        self.manifest.cache_hits = (self.manifest.cache_hits or 0) + counts.hits


def _count_crashed(manifest: Manifest, parts: list[Path]) -> None:
    """A crashed session's ``trials_run``: the rows its parts hold now (it died before recording them)."""
    crashed = {session_token(i, s): s for i, s in enumerate(manifest.sessions)
               if s.status == RunStatus.CRASHED and s.finished_at is None}
    if not crashed or not parts:
        return
    survey = survey_parts(parts[0].parent, manifest.sweep_id)
    rows = dict.fromkeys(crashed, 0)
    for part, record in zip(survey.parts, survey.records, strict=True):
        if record is not None and record.session in rows:
            rows[record.session] += _rows_in(part)
    for token, session in crashed.items():
        session.trials_run = rows[token]


def _rows_in(part: Path) -> int:
    """Rows of a finished part, from its batches' headers (memory-mapped: no column is read)."""
    with pa.memory_map(str(part)) as source:
        reader = ipc.open_file(source)
        return sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))


def _check_written_schema(parts: list[Path], trials_dir: Path, schema: pa.Schema) -> None:
    """Refuse to resume into parts of another shape: one glob must scan as one table."""
    part = parts[0] if parts else None
    if part is None:
        return
    written = ipc.open_file(str(part)).schema
    if written.equals(schema, check_metadata=False):
        return
    missing = [n for n in schema.names if n not in written.names]
    extra = [n for n in written.names if n not in schema.names]
    detail = "; ".join(x for x in (f"this version adds {missing}" if missing else "",
                                   f"the output has {extra}" if extra else "") if x) or "column types differ"
    raise UserError(f"{trials_dir} was written with a different row schema ({detail})",
                    hint="resume with the trialgrid version that started the run, or start again in a new --out")
