"""Which rows of an output directory count: its own parts, each trial once, the newest row.

Every reader of an output — resume, the report, ``runner.load``, diff, rescore, the
run's own counts — goes through this module (readers through ``runner.output.Output``,
which applies it once per command), so they agree on three rules:

* **Own parts only.** Every part carries its sweep id in its Arrow schema metadata
  (``trialgrid.sweep_id``); a part of another sweep copied into ``trials/`` is never
  counted. Readers refuse it in one line; a resume (holding the output's lock) moves
  it to ``trials/foreign/``.
* **Readable parts only.** A finished part that no longer reads (cut short, a bad
  copy) or whose checksums fail (``runner.output.checksums``: a flipped bit) is refused
  by readers in one line; a resume keeps every complete record batch whose checksum
  holds in a new part, moves the original to ``trials/damaged/`` and re-runs the rest.
* **The newest row wins.** ``--retry-errors`` writes a trial again; the row of the later
  session (the session index each part's record carries, a number the writer owns), then
  the later part and row, supersedes older rows of the same trial id, for every reader.
  No clock decides: a clock set back, a stepped clock or a Ray worker whose clock lags
  changes nothing (``finished_at`` is a record of when, never of which came after).

Finding the newest rows is a sort of every row, and even checking that no trial repeats
(``n_unique`` over every key) costs memory in proportion to the output (≈ 260 MiB per
million trials). So uniqueness is an invariant the writer keeps and records instead: a
session writes only trials its resume set does not hold, each once (the engines and
Ray's scheduler accept a trial's row once), so its parts repeat no trial of any part
written before it, except the error rows ``--retry-errors`` re-attempts. Each part a
session writes carries that record in its Arrow schema (``PartRecord``: the session,
as the manifest lists it, and how many older rows it may supersede); a salvaged part
keeps it (its rows are a subset). When every counted part carries a record of one of
the manifest's sessions and none supersedes, the rows are the trials, with no check of
any row; otherwise (a part written by an importer, rescore or an older version, a
record the manifest does not know, or a retry) the full check decides, as before.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from runner.core.errors import UserError, warn
from runner.core.manifest import Manifest, SessionRecord, read_manifest
from runner.core.safety import not_regular
from runner.output.checksums import NO_CHECKSUMS, sealed_rows, verify_part
from runner.output.keys import completed_trial_keys, trial_keys
from runner.output.repair import salvage_part, set_aside
from runner.output.sink import DAMAGED_DIR, TRIALS_DIR
from runner.output.verified import is_verified, note_verified

if TYPE_CHECKING:  # polars loads where rows are scanned: a resume that finds the grid whole reads none
    import polars as pl

__all__ = [
    "CELL",
    "DAMAGED_DIR",
    "FOREIGN_DIR",
    "SESSION_KEY",
    "SUPERSEDES_KEY",
    "SWEEP_ID_KEY",
    "PartIssue",
    "PartRecord",
    "Survey",
    "damaged_parts",
    "inspect_parts",
    "latest",
    "part_metadata",
    "proven_rows",
    "quarantine_parts",
    "readable_parts",
    "recorded_unique",
    "refuse_issues",
    "resume_keys",
    "resume_rows",
    "scan_latest",
    "session_token",
    "sorted_unique",
    "survey_parts",
]

SWEEP_ID_KEY = b"trialgrid.sweep_id"
SESSION_KEY = b"trialgrid.session"
SUPERSEDES_KEY = b"trialgrid.supersedes"
FOREIGN_DIR = "foreign"
_ROW = "__trialgrid_row"


@dataclass(frozen=True)
class PartIssue:
    """A finished part that does not count: ``damaged`` (does not read), ``foreign`` (another sweep's) or
    ``not a file`` (a FIFO, socket, device or folder under a part's name: never opened, a FIFO would block)."""

    path: Path
    problem: str  # "damaged" | "foreign" | "not a file"
    detail: str

    def __str__(self) -> str:
        return f"{self.path.name}: {self.detail}"


@dataclass(frozen=True)
class PartRecord:
    """What the writer recorded in a part's schema: the session that wrote it (``session_token``) and how many
    rows of older parts its rows may supersede (the error rows that session re-attempted; 0: none)."""

    session: str
    supersedes: int

    @property
    def session_index(self) -> int:
        """The writing session's place in the manifest (``session_token``), or -1 where the token has none."""
        head = self.session.split("|", 1)[0]
        return int(head) if head.isascii() and head.isdigit() else -1


def session_token(index: int, session: SessionRecord) -> str:
    """A session as a part names it: its place in the manifest, start time and process id (a part copied from
    another output of the same sweep names a session this manifest does not hold)."""
    return f"{index}|{session.started_at}|{session.pid}"


def part_metadata(token: str, supersedes: int) -> dict[str, str]:
    """The schema metadata a session's parts carry (besides the sweep id): its ``PartRecord``."""
    return {SESSION_KEY.decode(): token, SUPERSEDES_KEY.decode(): str(int(supersedes))}


def _record(metadata: Mapping[bytes, bytes] | None) -> PartRecord | None:
    metadata = metadata or {}
    token, supersedes = metadata.get(SESSION_KEY), metadata.get(SUPERSEDES_KEY)
    if token is None or supersedes is None:
        return None
    try:
        return PartRecord(token.decode(), int(supersedes))
    except (UnicodeDecodeError, ValueError):
        return None  # a damaged record: the full check decides


def recorded_unique(records: Sequence[PartRecord | None], manifest: Manifest | None) -> bool | None:
    """Whether the parts' records prove that no trial repeats (True), say that some may (False: a session
    superseded older rows), or prove nothing (None: a part without a record, or one naming a session the
    manifest does not hold): then the rows themselves are checked."""
    if manifest is None or not records:
        return None
    known = {session_token(i, s) for i, s in enumerate(manifest.sessions)}
    if any(r is None or r.session not in known for r in records):
        return None
    return not any(r.supersedes for r in records if r is not None)


def proven_rows(parts: Sequence[Path], manifest: Manifest) -> int | None:
    """How many trials ``parts`` hold, from their footers alone, when their writers' records prove each trial is
    one row (``recorded_unique``) and each part's seal states its rows; None when they prove nothing. The parts
    must have verified (``survey_parts``): a verified seal's count is the part's."""
    records: list[PartRecord | None] = []
    rows = 0
    for part in parts:
        try:
            with pa.OSFile(str(part)) as source:
                reader = ipc.open_file(source)
                records.append(_record(reader.schema.metadata))
                sealed = sealed_rows(reader)
        except (pa.ArrowInvalid, OSError):
            return None
        if sealed is None:
            return None
        rows += sealed
    return rows if recorded_unique(records, manifest) else None


def _part_order(path: Path, record: PartRecord | None) -> tuple[int, str]:
    """Parts oldest first by what their writer recorded: the session's place in the manifest (a part without a
    record, an import's or a rescore's, first), then the part's name (a session numbers its parts in order)."""
    return (record.session_index if record is not None else -1), path.name


def _footer(path: Path, verify: bool = True) -> pa.Schema | str:
    """The part's schema (its metadata holds the sweep id and the writer's record), or why it does not count:
    it does not read, or (``verify``) a batch, its schema or its seal fails its checksum
    (``runner.output.checksums``; a part written before checksums is not checked).

    Read through the file, a batch at a time, not through a memory map: verifying touches every page, and a map
    kept each page resident in the reader's memory until it closed (1.1 GB of RSS at a 1M-trial part, against
    73 MiB read a batch at a time, in the same time: ``benchmarks/view.py``)."""
    try:
        st = path.stat()
        with pa.OSFile(str(path)) as source:
            reader = ipc.open_file(source)
            if not verify or is_verified(st):  # unchanged since it last verified (``runner.output.verified``)
                return reader.schema
            verdict = verify_part(reader)
            schema = reader.schema
    except (pa.ArrowInvalid, OSError) as exc:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"does not read as an Arrow file ({text[:120]})"
    if verdict.problem == NO_CHECKSUMS:
        return verdict.problem
    if verdict.problem is not None:
        return f"{verdict.problem}: its bytes changed after it was written"
    note_verified(st)
    return schema


def damaged_parts(paths: Sequence[Path]) -> list[PartIssue]:
    """The parts among ``paths`` whose checksums fail or that no longer read: the check ``survey_parts`` skips
    when asked to read only the footers (``verify=False``)."""
    issues = []
    for path in paths:
        found = _footer(path)
        if isinstance(found, str):
            issues.append(PartIssue(path, "damaged", found))
    return issues


@dataclass(frozen=True)
class Survey:
    """An output's finished parts as their footers say: the ones that count (oldest first) with their records,
    and the ones that do not."""

    parts: list[Path]
    records: list[PartRecord | None]
    issues: list[PartIssue]


def survey_parts(trials_dir: Path, sweep_id: str | None, verify: bool = True) -> Survey:
    """The finished parts that count, their records, and the ones that do not. Reads each footer and (``verify``)
    checks each batch's checksum; with ``verify`` False, a damaged batch is found later by ``damaged_parts``."""
    survey = Survey([], [], [])
    if not trials_dir.is_dir():
        return survey
    for path in sorted(trials_dir.glob("*.arrow")):
        kind = not_regular(path)
        if kind is not None:
            survey.issues.append(PartIssue(path, "not a file", f"is {kind}, not a trial part"))
            continue
        schema = _footer(path, verify)
        if isinstance(schema, str):
            survey.issues.append(PartIssue(path, "damaged", schema))
            continue
        written = (schema.metadata or {}).get(SWEEP_ID_KEY)
        if sweep_id is not None and written is not None and written.decode(errors="replace") != sweep_id:
            survey.issues.append(PartIssue(path, "foreign", f"belongs to sweep {written.decode(errors='replace')!r}, "
                                                            f"not this output's {sweep_id!r}"))
            continue
        survey.parts.append(path)
        survey.records.append(_record(schema.metadata))
    order = sorted(range(len(survey.parts)), key=lambda i: _part_order(survey.parts[i], survey.records[i]))
    survey.parts[:], survey.records[:] = [survey.parts[i] for i in order], [survey.records[i] for i in order]
    return survey


def inspect_parts(trials_dir: Path, sweep_id: str | None) -> tuple[list[Path], list[PartIssue]]:
    """(the finished parts that count, oldest first; the ones that do not). Reads only each footer."""
    survey = survey_parts(trials_dir, sweep_id)
    return survey.parts, survey.issues


def refuse_issues(trials_dir: Path, issues: list[PartIssue]) -> None:
    """A reader's refusal of parts that do not count: one ``UserError`` line naming the first, and what to do."""
    if issues:
        first = issues[0]
        more = f" (and {len(issues) - 1} more)" if len(issues) > 1 else ""
        if first.problem == "foreign":
            hint = "move it out of trials/ (or rerun the sweep on this output: resume moves it to trials/foreign/)"
        elif first.problem == "not a file":
            hint = "move it out of trials/ (or rerun the sweep on this output: resume moves it to trials/damaged/)"
        else:
            hint = ("rerun the sweep on this output (`trialgrid run SWEEP --out OUT`): it keeps the part's complete, "
                    "verified batches, moves the original to trials/damaged/ and re-runs the missing trials")
        raise UserError(f"{first.problem} trial part {trials_dir / first.path.name}: {first.detail}{more}", hint=hint)


def readable_parts(out: Path) -> list[Path]:
    """The parts a reader scans (``runner.output.Output.open`` reads them once for every reader of a command);
    ``UserError`` in one line for a damaged or foreign part, or none at all."""
    manifest = read_manifest(out)
    trials_dir = out / TRIALS_DIR
    good, issues = inspect_parts(trials_dir, manifest.sweep_id if manifest is not None else None)
    refuse_issues(trials_dir, issues)
    if not good:
        raise UserError(f"no finished trial files in {trials_dir}",
                        hint="run a sweep into this directory first; a crashed run is repaired by rerunning it")
    return good


def trial_key(names: list[str]) -> list[str]:
    """What identifies a trial's rows: its id, with the cell it determines in a run (probe, model, case,
    condition, run) — so an import whose source reuses an id across cells (AgentProp's session ids) never has
    distinct rows collapsed."""
    return [c for c in ("probe", "model", "case_id", "condition", "run", "trial_id") if c in names]


def latest(frame: pl.LazyFrame) -> pl.LazyFrame:
    """Each trial once: its newest row, the last one in ``frame``'s order (parts oldest first, as the survey
    orders them by their writers' sessions; never by a clock)."""
    names = frame.collect_schema().names()
    return (frame.with_row_index(_ROW)
            .unique(subset=trial_key(names), keep="last", maintain_order=False)
            .sort(_ROW).drop(_ROW))


def scan_latest(parts: list[Path], unique: bool | None = None,
                records: Sequence[PartRecord | None] | None = None) -> pl.LazyFrame:
    """A lazy scan of ``parts`` with superseded rows removed (nothing extra to do when no trial repeats).

    ``unique`` is what the parts' records say (``recorded_unique``): True, no row is read to decide; False,
    the newest rows are found without first counting; None, the rows are counted to decide. With False and the
    ``records`` (one per part), only trials a superseding part (a ``--retry-errors`` session's) holds can repeat:
    the others are kept as they are and only those are sorted (``_latest_retried``), not every row."""
    import polars as pl

    frame = pl.scan_ipc([str(p) for p in parts], glob=False)  # literal paths: OUT may hold [ or *
    key = trial_key(frame.collect_schema().names())
    if "trial_id" not in key or unique:
        return frame
    if unique is False:
        if records is not None and len(records) == len(parts) and all(r is not None for r in records):
            return _latest_retried(parts, records, key)
        return latest(frame)
    counts = frame.select(pl.len().alias("rows"), pl.struct(key).n_unique().alias("ids")).collect()
    if counts["rows"][0] == counts["ids"][0]:
        return frame
    return latest(frame)


def _latest_retried(parts: list[Path], records: Sequence[PartRecord | None], key: list[str]) -> pl.LazyFrame:
    """``latest`` when the records name the parts that may supersede: every part before the first superseding
    one repeats no trial (its sessions wrote only trials not yet written), so its rows stand unless a later part
    holds their trial; only those trials' rows and the later parts are sorted. Rows of retried trials come after
    the others (``latest`` keeps the parts' order)."""
    import polars as pl

    first = next(i for i, r in enumerate(records) if r is not None and r.supersedes)
    older = pl.scan_ipc([str(p) for p in parts[:first]], glob=False) if first else None
    newer = pl.scan_ipc([str(p) for p in parts[first:]], glob=False)
    if older is None:
        return latest(newer)
    again = newer.select(key).unique()
    return pl.concat([older.join(again, on=key, how="anti", nulls_equal=True),
                      latest(pl.concat([older.join(again, on=key, how="semi", nulls_equal=True), newer]))])


@dataclass(frozen=True)
class ResumeSet:
    """What a resume skips: the sorted uint64 keys of trial ids done, and the error rows it re-attempts by kind."""

    done: np.ndarray
    retry: dict[str, int]


CELL = ("probe", "case_id", "condition", "run", "model")


def resume_rows(parts: list[Path], retry_kinds: Collection[str] | None = None) -> tuple[list[pa.RecordBatch], dict[str, int]]:
    """The rows a resume re-attempts: (``retry_kinds``) the trials whose newest row is an error of one of those
    kinds, as record batches of ``trial_id`` and the cell columns the parts have, and their count by kind. Every
    other row written is done (``column_batches`` reads them: no query engine for a plain resume)."""
    if not retry_kinds or not parts:
        return [], {}
    import polars as pl

    frame = pl.scan_ipc([str(p) for p in parts], glob=False)  # literal paths: OUT may hold [ or *
    names = frame.collect_schema().names()
    cols = [c for c in ("trial_id", *CELL) if c in names]
    picked = [c for c in (*cols, "status", "error_kind", "finished_at") if c in names]
    again = (pl.col("status") == "error") & pl.col("error_kind").fill_null("").is_in(list(retry_kinds))
    redo = latest(frame.select(picked)).filter(again).collect(engine="streaming")
    retry = {str(k): int(n) for k, n in redo.group_by("error_kind").len().iter_rows()}
    return redo.select(cols).to_arrow().to_batches(), retry


def resume_keys(parts: list[Path], retry_kinds: Collection[str] | None = None) -> ResumeSet:
    """Trial ids a resume skips, as sorted uint64 keys: every id written, read a batch at a time, less the trials
    re-attempted (``resume_rows``)."""
    if not parts:
        return ResumeSet(np.empty(0, dtype=np.uint64), {})
    redo, retry = resume_rows(parts, retry_kinds)
    done = sorted_unique(completed_trial_keys(parts[0].parent, parts))
    if redo:
        again = np.concatenate([trial_keys(batch.column("trial_id").drop_null()) for batch in redo])
        done = done[~np.isin(done, again)]
    return ResumeSet(done, retry)


def sorted_unique(keys: np.ndarray) -> np.ndarray:
    """``np.unique`` of keys already sorted, in one linear pass (``np.unique`` sorts again: with numpy ≥ 2.3 it
    measured ≈ n^1.25, 1 CPU s at 1M keys and 5.7 s at 4M, where this takes milliseconds)."""
    if len(keys) < 2:
        return keys
    keep = np.empty(len(keys), dtype=bool)
    keep[0] = True
    np.not_equal(keys[1:], keys[:-1], out=keep[1:])
    return keys if keep.all() else keys[keep]


def _free_bytes(path: Path) -> int:
    return shutil.disk_usage(path).free


def quarantine_parts(trials_dir: Path, sweep_id: str) -> list[Path]:
    """Under the output's lock: move foreign parts to ``trials/foreign/``; salvage damaged ones (their complete
    batches stay as a new part, the original goes to ``trials/damaged/``), each with a ``TrialgridWarning``.
    Returns the parts that count."""
    good, issues = inspect_parts(trials_dir, sweep_id)
    for issue in issues:
        where = trials_dir / (FOREIGN_DIR if issue.problem == "foreign" else DAMAGED_DIR)
        where.mkdir(exist_ok=True)
        moved = where / issue.path.name
        if issue.problem == "foreign":
            os.replace(issue.path, moved)
            warn(f"moved {issue.path.name} to trials/{FOREIGN_DIR}/: it {issue.detail}; its rows are not counted")
            continue
        if issue.problem == "not a file":
            set_aside(issue.path, issue.detail)
            continue
        size = issue.path.stat().st_size
        if _free_bytes(trials_dir) < size + (1 << 20):
            raise UserError(f"no space to repair the damaged part {issue.path}: it needs about "
                            f"{(size >> 20) + 1} MiB free", hint="free that much space and rerun the same command")
        os.replace(issue.path, moved)
        batches, rows, _ = salvage_part(moved, issue.path)
        if batches:
            good.append(issue.path)
        warn(f"damaged part {issue.path.name} ({issue.detail}): kept {batches} complete batches ({rows:,} rows); "
             f"the original is in trials/{DAMAGED_DIR}/; its other trials run again")
    return good
