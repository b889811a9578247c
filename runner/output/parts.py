"""Which rows of an output directory count: its own parts, each trial once, the newest row.

Every reader of an output — resume, the report, ``runner.load``, diff, rescore, the
run's own counts — goes through this module (readers through ``runner.output.Output``,
which applies it once per command), so they agree on three rules:

* **Own parts only.** Every part carries its sweep id in its Arrow schema metadata
  (``trialgrid.sweep_id``); a part of another sweep copied into ``trials/`` is never
  counted. Readers refuse it in one line; a resume (holding the output's lock) moves
  it to ``trials/foreign/``.
* **Readable parts only.** A finished part that no longer reads (cut short, a bad
  copy) is refused by readers in one line; a resume keeps every complete record batch
  in a new part, moves the original to ``trials/damaged/`` and re-runs the rest.
* **The newest row wins.** ``--retry-errors`` writes a trial again; the row with the
  latest ``finished_at`` (then the later part, then the later row) supersedes older
  rows of the same trial id, for every reader.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc

from runner.core.errors import UserError, warn
from runner.core.manifest import read_manifest
from runner.output.sink import TRIALS_DIR, completed_trial_keys, salvage_part, trial_keys

__all__ = [
    "DAMAGED_DIR",
    "FOREIGN_DIR",
    "SWEEP_ID_KEY",
    "PartIssue",
    "inspect_parts",
    "latest",
    "quarantine_parts",
    "readable_parts",
    "refuse_issues",
    "resume_keys",
    "scan_latest",
]

SWEEP_ID_KEY = b"trialgrid.sweep_id"
DAMAGED_DIR = "damaged"
FOREIGN_DIR = "foreign"
_ROW = "__trialgrid_row"


@dataclass(frozen=True)
class PartIssue:
    """A finished part that does not count: ``damaged`` (does not read) or ``foreign`` (another sweep's)."""

    path: Path
    problem: str  # "damaged" | "foreign"
    detail: str

    def __str__(self) -> str:
        return f"{self.path.name}: {self.detail}"


def _part_order(path: Path) -> tuple[int, str]:
    try:
        return path.stat().st_mtime_ns, path.name
    except OSError:
        return 0, path.name


def _footer(path: Path) -> bytes | str | None:
    """The part's sweep id (None: not recorded), or why it does not read (a str)."""
    try:
        schema = ipc.open_file(str(path)).schema
        found: bytes | str | None = (schema.metadata or {}).get(SWEEP_ID_KEY)
    except (pa.ArrowInvalid, OSError) as exc:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"does not read as an Arrow file ({text[:120]})"
    return found


def inspect_parts(trials_dir: Path, sweep_id: str | None) -> tuple[list[Path], list[PartIssue]]:
    """(the finished parts that count, oldest first; the ones that do not). Reads only each footer."""
    if not trials_dir.is_dir():
        return [], []
    good: list[Path] = []
    issues: list[PartIssue] = []
    for path in sorted(trials_dir.glob("*.arrow"), key=_part_order):
        written = _footer(path)
        if isinstance(written, str):
            issues.append(PartIssue(path, "damaged", written))
            continue
        if sweep_id is not None and written is not None and written.decode(errors="replace") != sweep_id:
            issues.append(PartIssue(path, "foreign", f"belongs to sweep {written.decode(errors='replace')!r}, "
                                                     f"not this output's {sweep_id!r}"))
            continue
        good.append(path)
    return good, issues


def refuse_issues(trials_dir: Path, issues: list[PartIssue]) -> None:
    """A reader's refusal of parts that do not count: one ``UserError`` line naming the first, and what to do."""
    if issues:
        first = issues[0]
        more = f" (and {len(issues) - 1} more)" if len(issues) > 1 else ""
        if first.problem == "foreign":
            hint = "move it out of trials/ (or rerun the sweep on this output: resume moves it to trials/foreign/)"
        else:
            hint = ("rerun the sweep on this output (`trialgrid run SWEEP --out OUT`): it keeps the part's complete "
                    "batches, moves the rest to trials/damaged/ and re-runs the missing trials")
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


def _key(names: list[str]) -> list[str]:
    """What identifies a trial's rows: its id, with the cell it determines in a run (probe, model, case,
    condition, run) — so an import whose source reuses an id across cells (AgentProp's session ids) never has
    distinct rows collapsed."""
    return [c for c in ("probe", "model", "case_id", "condition", "run", "trial_id") if c in names]


def latest(frame: pl.LazyFrame) -> pl.LazyFrame:
    """Each trial once: its newest row (latest ``finished_at``, then the later part and row)."""
    names = frame.collect_schema().names()
    order = [c for c in ("finished_at",) if c in names]
    return (frame.with_row_index(_ROW)
            .sort([*order, _ROW], nulls_last=False)
            .unique(subset=_key(names), keep="last", maintain_order=False)
            .sort(_ROW).drop(_ROW))


def scan_latest(parts: list[Path]) -> pl.LazyFrame:
    """A lazy scan of ``parts`` with superseded rows removed (nothing extra to do when no trial repeats)."""
    frame = pl.scan_ipc([str(p) for p in parts], glob=False)  # literal paths: OUT may hold [ or *
    key = _key(frame.collect_schema().names())
    if "trial_id" not in key:
        return frame
    counts = frame.select(pl.len().alias("rows"), pl.struct(key).n_unique().alias("ids")).collect()
    if counts["rows"][0] == counts["ids"][0]:
        return frame
    return latest(frame)


@dataclass(frozen=True)
class ResumeSet:
    """What a resume skips: the sorted uint64 keys of trial ids done, and the error rows it re-attempts by kind."""

    done: np.ndarray
    retry: dict[str, int]


def resume_keys(parts: list[Path], retry_kinds: Collection[str] | None = None) -> ResumeSet:
    """Trial ids a resume skips: every id written, except (``retry_kinds``) ids whose newest row is an error of
    one of those kinds."""
    if not parts:
        return ResumeSet(np.empty(0, dtype=np.uint64), {})
    frame = pl.scan_ipc([str(p) for p in parts], glob=False)  # literal paths: OUT may hold [ or *
    retry: dict[str, int] = {}
    if retry_kinds:
        names = frame.collect_schema().names()
        cols = [c for c in ("trial_id", "status", "error_kind", "finished_at") if c in names]
        newest = latest(frame.select(cols)).collect()
        again = (pl.col("status") == "error") & pl.col("error_kind").fill_null("").is_in(list(retry_kinds))
        redo = newest.filter(again)
        retry = {str(k): int(n) for k, n in redo.group_by("error_kind").len().iter_rows()}
        ids = newest.filter(~again)["trial_id"]
        keys = trial_keys(ids.to_arrow()) if len(ids) else np.empty(0, dtype=np.uint64)
        keys.sort()
        return ResumeSet(keys, retry)
    # every id written, read a batch at a time into 8-byte keys
    return ResumeSet(np.unique(completed_trial_keys(parts[0].parent, parts)), retry)


def _free_bytes(path: Path) -> int:
    return shutil.disk_usage(path).free


def quarantine_parts(trials_dir: Path, sweep_id: str, say: Callable[[str], None] | None = None) -> list[Path]:
    """Under the output's lock: move foreign parts to ``trials/foreign/``; salvage damaged ones (their complete
    batches stay as a new part, the original goes to ``trials/damaged/``), each with a ``TrialgridWarning``
    (``say`` is kept for callers and unused). Returns the parts that count."""
    good, issues = inspect_parts(trials_dir, sweep_id)
    for issue in issues:
        where = trials_dir / (FOREIGN_DIR if issue.problem == "foreign" else DAMAGED_DIR)
        where.mkdir(exist_ok=True)
        moved = where / issue.path.name
        if issue.problem == "foreign":
            os.replace(issue.path, moved)
            warn(f"moved {issue.path.name} to trials/{FOREIGN_DIR}/: it {issue.detail}; its rows are not counted")
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
