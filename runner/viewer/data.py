"""What the viewer reads from an output: pages of trials, one trial's exchange, the counts behind each rate.

Why a module of its own: the viewer answers many small questions about one output (a page of 50 trials, a
count under a filter, one row's calls) while a run may still be writing it. Every answer is a lazy polars plan
over ``Output.scan()`` cut down before it is collected (``slice``, a one-row filter), so no request loads every
row and the server's memory does not grow with the output. A run still being written keeps its newest part
open as an Arrow stream (``runner.output.sink``): its complete record batches are read here too, so new trials
show up while the run goes on; the writer is never disturbed (the reader opens nothing for writing).

Filters arrive as text (the page's URL) and are checked against the output's own columns: an unknown column
or a value its type cannot hold is a ``ViewError`` (the server answers 400), never a polars exception.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import shutil
import tempfile
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
from polars.datatypes import DataTypeClass

from runner.core.calls import Blobs, RecordedCall, row_calls
from runner.core.constants import SUCCESS_RATES
from runner.core.errors import UserError
from runner.core.schema import CALL_COLUMNS, COMMON_FIELDS
from runner.output.parts import damaged_parts, latest, refuse_issues, trial_key
from runner.output.reader import Output
from runner.output.unfinished import UnfinishedPart

if TYPE_CHECKING:
    from runner.analysis.leaderboard import Summary

__all__ = ["EXCLUDE_PREFIX", "FILTER_PREFIX", "NOT_NULL_PREFIX", "NULL_PREFIX", "PAGE_MAX", "Query", "Source", "ViewError", "labels_for"]

#: a filter in a URL: ``f.COLUMN=VALUE`` (repeat it for any of several values); ``z.COLUMN=1``: the column is null;
#: ``n.COLUMN=1``: it is not null (a rate's denominator); ``x.COLUMN=VALUE``: it is none of these values
FILTER_PREFIX, NULL_PREFIX, NOT_NULL_PREFIX, EXCLUDE_PREFIX = "f.", "z.", "n.", "x."
PAGE_MAX = 500
#: the columns a trial list shows beside the outcome columns
LIST_COLUMNS = ("trial_id", "model", "probe", "case_id", "condition", "run", "status", "error_kind", "attempts",
                "latency_ms", "input_tokens", "output_tokens", "response_text")
_COMMON = tuple(f.name for f in COMMON_FIELDS)
#: common columns offered as filters (with their values listed)
FILTER_COMMON = ("model", "probe", "case_id", "condition", "run", "status", "error_kind", "provider", "model_id")
_SNIPPET = 240  # characters of a reply a list row carries
_DISTINCT_MAX = 500
_COUNTS_KEPT = 256  # counts remembered per snapshot (a few integers each)
_EXACT = 2**53  # the largest integer a JavaScript number holds exactly  # a column with more values than this is filtered by typing, not by a list


class ViewError(ValueError):
    """A request the viewer cannot answer as asked (unknown column, bad value): the server's 400."""


def labels_for(paths: Sequence[Path], outputs: Sequence[Output]) -> list[str]:
    """One label per output, as the report names runs: the sweep name, or the folder, made unique."""
    names = [o.manifest.sweep_name or p.name for p, o in zip(paths, outputs, strict=True)]
    return [n if names.count(n) == 1 else f"{n} ({p})" for n, p in zip(names, paths, strict=True)]


@dataclass(frozen=True)
class Query:
    """A trial list as the URL asks for it: filters, text, order and the page."""

    equals: tuple[tuple[str, tuple[str, ...]], ...] = ()
    nulls: tuple[str, ...] = ()
    not_nulls: tuple[str, ...] = ()
    excludes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    text: str = ""
    sort: str | None = None
    desc: bool = False
    offset: int = 0
    limit: int = 50

    @classmethod
    def parse(cls, params: Mapping[str, Any]) -> Query:
        """From a multi-valued mapping (aiohttp's ``request.query``): ``f.COL``, ``z.COL``, ``n.COL``, ``x.COL``,
        ``q``, ``sort``, ``desc``, ``offset``, ``limit``."""
        getall = getattr(params, "getall", None)
        equals: dict[str, list[str]] = {}
        excludes: dict[str, list[str]] = {}
        nulls: list[str] = []
        not_nulls: list[str] = []
        for key in dict.fromkeys(params):
            values = list(getall(key)) if getall else [params[key]]
            if key.startswith(FILTER_PREFIX):
                equals.setdefault(key[len(FILTER_PREFIX):], []).extend(values)
            elif key.startswith(EXCLUDE_PREFIX):
                excludes.setdefault(key[len(EXCLUDE_PREFIX):], []).extend(values)
            elif key.startswith(NULL_PREFIX):
                nulls.append(key[len(NULL_PREFIX):])
            elif key.startswith(NOT_NULL_PREFIX):
                not_nulls.append(key[len(NOT_NULL_PREFIX):])
        try:
            offset, limit = int(params.get("offset", 0)), int(params.get("limit", 50))
        except ValueError:
            raise ViewError("offset and limit must be whole numbers") from None
        if offset < 0 or not 1 <= limit <= PAGE_MAX:
            raise ViewError(f"offset must be >= 0 and limit between 1 and {PAGE_MAX}")
        return cls(tuple((k, tuple(v)) for k, v in equals.items()), tuple(nulls), tuple(not_nulls),
                   tuple((k, tuple(v)) for k, v in excludes.items()), str(params.get("q", "")),
                   params.get("sort") or None, params.get("desc") in ("1", "true"), offset, limit)


def _parse_value(column: str, dtype: pl.DataType | DataTypeClass, text: str) -> Any:
    if dtype == pl.Boolean:
        if text not in ("true", "false"):
            raise ViewError(f"filter {column}: expected true or false, got {text!r}")
        return text == "true"
    if dtype.is_integer():
        try:
            return int(text)
        except ValueError:
            raise ViewError(f"filter {column}: expected a whole number, got {text!r}") from None
    if dtype.is_float():
        try:
            return float(text)
        except ValueError:
            raise ViewError(f"filter {column}: expected a number, got {text!r}") from None
    return text


def _search_text(names: Sequence[str]) -> pl.Expr:
    """The arguments of every tool call a model made in the trial (the row's last response and every recorded
    call), one text: what the text search reads beside the reply. Nested joins rather than explodes: each list
    is joined where it lies, with no row copied."""
    text = pl.col("tool_calls").list.eval(pl.element().struct.field("arguments")).list.join("\n").fill_null("")
    if "calls" in names:
        every = pl.col("calls").list.eval(
            pl.element().struct.field("response").struct.field("tool_calls")
            .list.eval(pl.element().struct.field("arguments")).list.join("\n")).list.join("\n")
        text = pl.concat_str([text, every.fill_null("")], separator="\n")
    return text


def _text_match(names: Sequence[str], text: str) -> pl.Expr:
    """Rows whose reply, or the arguments of any tool call a model made (every recorded call), hold ``text``
    (case-insensitive, literally: the text escaped into a ``(?i)`` pattern, so no lower-cased copy of every
    reply is made)."""
    pattern = "(?i)" + re.escape(text)
    found = pl.col("response_text").str.contains(pattern).fill_null(False)
    return found | _search_text(names).str.contains(pattern).fill_null(False)


def _plain(value: Any) -> Any:
    """A polars value as JSON: floats that are not numbers become null, times ISO text, and integers a
    browser's number cannot hold exactly (seeds are 64-bit) their decimal text."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > _EXACT:
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _call_json(call: RecordedCall) -> dict[str, Any]:
    """One recorded call as the page shows it: the request as sent (tools in the order offered), the response."""
    req, resp = call.request, call.response

    def tool_call(c: Any) -> dict[str, Any]:
        return {"id": c.id, "name": c.name, "arguments": c.raw_arguments, "parse_error": c.parse_error}

    request = {"messages": [{"role": m.role, "content": m.content, "tool_calls": [tool_call(c) for c in m.tool_calls],
                             "tool_call_id": m.tool_call_id, "name": m.name} for m in req.messages],
               "tools": [{"name": t.name, "description": t.description, "parameters": t.parameters} for t in req.tools],
               "params": dict(req.params), "seed": req.seed, "tool_choice": req.tool_choice}
    response = None if resp is None else {
        "text": resp.text, "tool_calls": [tool_call(c) for c in resp.tool_calls], "finish_reason": resp.finish_reason,
        "input_tokens": resp.usage.input_tokens, "output_tokens": resp.usage.output_tokens, "cached": resp.cached,
        "calls_from_text": resp.calls_from_text, "remedies": list(resp.remedies)}
    return {"request": request, "response": response, "attempts": call.attempts, "latency_ms": call.latency_ms,
            "error_kind": call.error_kind, "error": call.error}


_CASE_FILE_MAX = 32 * 2**20  # a case file larger than this is not read for a trial's detail


@functools.lru_cache(maxsize=16)
def _case_file(path: Path, mtime_ns: int) -> tuple[str, Any] | None:
    """(sha256, parsed data) of a case file (``runner.core.sources``, as the probes read them), once per version."""
    from runner.core.sources import load_source

    try:
        source = load_source(path, what="case file")
    except UserError:
        return None
    return source.sha256, source.data


def _case_in(path: Path, case_id: str) -> tuple[str, Any] | None:
    """(the file's sha256, the record whose ``id`` is ``case_id``) in a case file: a list of records, or a
    mapping holding one (``cases:``, ``triples:``, ``tasks:``...)."""
    try:
        st = path.stat()
    except OSError:
        return None
    if not path.is_file() or st.st_size > _CASE_FILE_MAX:
        return None
    loaded = _case_file(path, st.st_mtime_ns)
    if loaded is None:
        return None
    sha, data = loaded
    lists = [data] if isinstance(data, list) else [v for v in data.values() if isinstance(v, list)] \
        if isinstance(data, dict) else []
    for items in lists:
        for item in items:
            if isinstance(item, dict) and str(item.get("id")) == case_id:
                return sha, item
    return None


def _is_hit(rate: str, value: Any) -> bool:
    """Whether an outcome column's value is the event its rate counts (a failure, for a success rate)."""
    return value is False if rate in SUCCESS_RATES else value is True


def _why(kind: str | None, row: Mapping[str, Any], outcomes: Sequence[str]) -> dict[str, Any]:
    """The verdict's reasons, from the trial's own outcome columns: each event that fired (a true flag; a false
    ``passed``) with what it means (the report's definitions, ``runner.reporting.outcomes``), and the evidence
    the probe recorded beside it (its lists and labels: which forbidden token and where, which argument is
    ungrounded, which stage was reached, what the action was)."""
    from runner.reporting.outcomes import definition

    fired: list[dict[str, Any]] = []
    quiet: list[dict[str, Any]] = []
    evidence: list[dict[str, Any]] = []
    for name in outcomes:
        value = row.get(name)
        meaning = definition(kind, name) if kind else None
        if isinstance(value, bool):
            entry = {"column": name, "value": value, "meaning": meaning}
            (fired if _is_hit(name, value) else quiet).append(entry)
        elif isinstance(value, list):
            if value:
                evidence.append({"column": name, "value": value, "meaning": meaning})
        elif value is not None and not isinstance(value, float):
            evidence.append({"column": name, "value": value, "meaning": meaning})
    if row.get("status") != "ok":
        fired.insert(0, {"column": "status", "value": row.get("status"),
                         "meaning": f"the trial failed ({row.get('error_kind') or 'error'}): it counts in no rate, "
                                    "only in the errors"})
    return {"fired": fired, "quiet": quiet, "evidence": evidence}


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


def _unlink(files: Sequence[Path]) -> None:
    for f in files:
        f.unlink(missing_ok=True)


class _OpenPart:
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
        self.retired: list[Path] = []  # spilled files the next snapshot no longer scans (``Source._read``)

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
class _Snapshot:
    """An output as it was when last looked at: the frame every query starts from, and what is derived from it
    once (blobs, column values, the summary), filled in when first asked."""

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


class Source:
    """One output given to ``trialgrid view``: re-read when its trials or manifest change (a live run)."""

    def __init__(self, path: Path, label: str, output: Output) -> None:
        self.path = path
        self.label = label
        self._lock = threading.Lock()
        self._open: dict[Path, _OpenPart] = {}
        self._spill: Path | None = None  # the open parts' batches as read (``_OpenPart``), made when first needed
        #: whether ``verify`` ran (``output`` may be opened with ``verify=False``, so the first page need not wait
        #: for every batch's checksum); after it, each snapshot checks its parts (``runner.output.verified``
        #: makes a part already checked cost a footer read)
        self._checked = False
        self._damage: UserError | None = None
        self._snap = self._read(self._key(), output)
        if self._snap.frame is not None:
            # one row read before the server listens: the first scan of a large part pays for reading its footer and
            # batch headers (0.5 s at 1M trials), which the first page would otherwise wait for
            self._snap.frame.slice(0, 1).collect()

    # -- the current snapshot ---------------------------------------------------------------------------------
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

    def _read(self, key: tuple[Any, ...], output: Output | None = None) -> _Snapshot:
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
        self._open = {s: before.get(s) or _OpenPart(spill) for s in streams}
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
            return _Snapshot(key, output, None, pl.Schema(), None)
        frame = pl.concat(frames, how="diagonal_relaxed") if len(frames) > 1 else frames[0]
        newest = stream_frame is not None and _repeats(closed, stream_frame)
        if newest:
            frame = latest(frame)  # a trial retried while the run goes on: its newest row
        return _Snapshot(key, output, frame, frame.collect_schema(), stream_frame, newest)

    def snapshot(self) -> _Snapshot:
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
        output = self.snapshot().output
        if output is not None:
            self._check(output)

    def _cached(self, snap: _Snapshot, name: str, make: Any) -> Any:
        """``make()`` once per snapshot, whichever thread asks first (the others wait for it: the analysis of a
        large output is not worth computing twice)."""
        with self._lock:
            lock = snap.locks.setdefault(name, threading.Lock())
        with lock:
            if name not in snap.cache:
                snap.cache[name] = make()
            return snap.cache[name]

    def _windows(self, snap: _Snapshot) -> list[pl.LazyFrame]:
        """The snapshot's every trial as consecutive windows of rows (``runner.analysis.windows``: a finished
        output whose parts prove each trial is one row), else whole. A query over every trial runs window by
        window: polars keeps each page of the parts it touches mapped, and counted in the server's memory, until
        the query ends (the catalogue orders' distinct values alone held 387 MiB of pages at 1M trials)."""
        from runner.analysis.windows import windows_of

        assert snap.frame is not None
        output = snap.output
        if snap.newest or output is None or (output.parts and output.unique is not True):
            return [snap.frame]  # each trial's newest row chosen in the frame: chosen over every row, at once
        # one row a trial: the closed parts' records prove it, and the open parts' keys repeat none (``_repeats``)
        return self._cached(snap, "windows", lambda: windows_of(output, snap.frame, unique=True))

    def warm(self) -> None:
        """Check the parts' checksums (``verify``), then compute, once, what the first requests of a page would
        otherwise wait for: the filter columns and the usage (the list page), the trial index and the call blobs
        (a trial), then the report's analysis (the slowest, for the rates page)."""
        self.verify()
        snap = self.snapshot()
        if snap.frame is None:
            return
        self.columns()  # the list page waits for these: first
        self.run_info()
        self._index(snap)
        self.blobs(snap)
        self.summary()

    # -- runs -------------------------------------------------------------------------------------------------
    def run_info(self) -> dict[str, Any]:
        """The run as the runs list shows it: status, trials by status, errors, tokens, cost, the sweep."""
        snap = self.snapshot()
        output = snap.output
        assert output is not None
        m = output.manifest
        usage: dict[str, Any] = {"trials": 0, "errors": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": None}
        if snap.frame is not None:
            from runner.analysis.windows import usage as windowed_usage

            table = self._cached(snap, "usage", lambda: windowed_usage(output, output.prices, self._windows(snap)))
            costs = table["cost_usd"]
            usage = {"trials": int(table["trials"].sum()), "errors": int(table["errors"].sum()),
                     "input_tokens": int(table["input_tokens"].sum()), "output_tokens": int(table["output_tokens"].sum()),
                     "cost_usd": float(costs.sum()) if costs.null_count() < len(costs) else None}
        return {"label": self.label, "path": str(self.path), "sweep_name": m.sweep_name, "sweep_id": m.sweep_id,
                "status": str(m.status), "live": snap.stream_frame is not None or str(m.status) == "running",
                "trials_total": m.trials_total, **usage,
                "settings": json.loads(m.sweep.model_dump_json())}

    # -- the trial list ---------------------------------------------------------------------------------------
    def columns(self) -> dict[str, Any]:
        """The columns a list can filter on, each with its kind and (when few) its values."""
        snap = self.snapshot()
        return self._cached(snap, "columns", lambda: self._columns(snap))

    def _columns(self, snap: _Snapshot) -> dict[str, Any]:
        if snap.frame is None:
            return {"common": [], "outcomes": []}
        schema = snap.schema
        outcome_names = [c for c in schema.names() if c not in _COMMON and c not in CALL_COLUMNS]

        def kind(dtype: pl.DataType) -> str:
            if dtype == pl.Boolean:
                return "bool"
            if dtype.is_numeric():
                return "number"
            if isinstance(dtype, pl.List):
                return "list"
            if dtype == pl.String or isinstance(dtype, pl.Categorical | pl.Enum):
                return "text"
            return "other"

        wanted = [c for c in (*FILTER_COMMON, *outcome_names) if c in schema and kind(schema[c]) != "other"]
        listed = [c for c in wanted if kind(schema[c]) in ("text", "list") or schema[c].is_integer()]
        values: dict[str, list[Any]] = {}
        windows = self._windows(snap)
        for c in listed:  # one column and one window at a time, streaming: one column's pages of one window
            col = pl.col(c).explode() if kind(schema[c]) == "list" else pl.col(c)
            found: pl.Series | None = None
            for w in windows:
                more = w.select(col.drop_nulls().unique().head(_DISTINCT_MAX + 1).alias(c)).collect(engine="streaming")[c]
                found = more if found is None else pl.concat([found, more]).unique()
                if len(found) > _DISTINCT_MAX:
                    break  # too many to list: filtered by typing
            values[c] = [] if found is None else found.sort().to_list()
        out: dict[str, list[dict[str, Any]]] = {"common": [], "outcomes": []}
        for c in wanted:
            entry: dict[str, Any] = {"name": c, "kind": kind(schema[c])}
            if c in values and len(values[c]) <= _DISTINCT_MAX:
                entry["values"] = [str(v) for v in values[c]]
            out["common" if c in _COMMON else "outcomes"].append(entry)
        return out

    def _filtered(self, snap: _Snapshot, query: Query, frame: pl.LazyFrame | None = None) -> pl.LazyFrame:
        """``query`` applied to ``frame`` (by default the snapshot's every trial; a slice of it when counting a
        text search a slice at a time)."""
        assert snap.frame is not None
        schema = snap.schema
        frame = snap.frame if frame is None else frame

        def member(column: str, values: tuple[str, ...]) -> pl.Expr:
            if column not in schema or column in CALL_COLUMNS:
                raise ViewError(f"no column {column!r} in this output")
            dtype = schema[column]
            if isinstance(dtype, pl.List):
                inner = dtype.inner
                assert inner is not None
                parsed = [_parse_value(column, inner, v) for v in values]
                return pl.any_horizontal([pl.col(column).list.contains(v) for v in parsed]).fill_null(False)
            return pl.col(column).is_in([_parse_value(column, dtype, v) for v in values]).fill_null(False)

        for column, values in query.equals:
            frame = frame.filter(member(column, values))
        for column, values in query.excludes:
            frame = frame.filter(~member(column, values))
        for column in (*query.nulls, *query.not_nulls):
            if column not in schema:
                raise ViewError(f"no column {column!r} in this output")
        for column in query.nulls:
            frame = frame.filter(pl.col(column).is_null())
        for column in query.not_nulls:
            frame = frame.filter(pl.col(column).is_not_null())
        if query.text:
            frame = frame.filter(_text_match(schema.names(), query.text))
        if query.sort is not None:
            if query.sort not in schema or query.sort in CALL_COLUMNS:
                raise ViewError(f"cannot sort by {query.sort!r}: no such column")
            frame = frame.sort(query.sort, descending=query.desc, nulls_last=True, maintain_order=True)
        return frame

    def page(self, query: Query, count: bool = True) -> dict[str, Any]:
        """One page of the trials ``query`` selects, and (``count``) how many it selects in all. The page alone
        stops reading once it has its rows (a slice of the filtered scan); the count reads every row the filters
        touch, so the page asks for it apart (``count``) and shows its rows first."""
        snap = self.snapshot()
        if snap.frame is None:
            return {"total": 0, "offset": query.offset, "rows": [], "outcomes": []}
        frame = self._filtered(snap, query)
        outcomes = self.outcomes(snap)
        cols = [c for c in LIST_COLUMNS if c in snap.schema] + outcomes
        selected = [pl.col(c).str.slice(0, _SNIPPET) if c == "response_text" else pl.col(c) for c in cols]
        if query.sort is not None and not snap.newest:
            # sorted: the positions of the page's rows found from the filter and sort columns alone, then those
            # rows read as one-row slices (sorting every column of every trial held 670 MiB at 1 M trials); a
            # live output is sorted whole (its newest-row-per-trial frame would be computed again for each slice)
            at = (self._filtered(snap, query, snap.frame.with_row_index("_pos")).slice(query.offset, query.limit)
                  .select("_pos").collect()["_pos"].to_list())
            rows = (pl.concat([snap.frame.slice(int(i), 1).select(selected) for i in at]).collect() if at
                    else frame.clear().select(selected).collect())
        else:
            rows = frame.slice(query.offset, query.limit).select(selected).collect()
        return {"total": self.count(query) if count else None, "offset": query.offset, "outcomes": outcomes,
                "rows": [_plain(r) for r in rows.iter_rows(named=True)]}

    def count(self, query: Query) -> int:
        """How many trials ``query``'s filters and text select: counted once per snapshot and selection (paging,
        sorting and previous / next ask again without reading the output)."""
        snap = self.snapshot()
        if snap.frame is None:
            return 0
        key = ("count", query.equals, query.nulls, query.not_nulls, query.excludes, query.text)
        with self._lock:
            known = snap.cache.get("counts", {}).get(key)
        if known is not None:
            return int(known)
        selection = Query(query.equals, query.nulls, query.not_nulls, query.excludes, query.text)
        # window by window (its filters are row by row, so the windows' counts add up): a text search decodes
        # every reply and every call's arguments, which read whole held 767 MiB at 1M trials; a live output whose
        # newest rows are chosen is counted whole (the choice would be made again for each window)
        total = sum(int(self._filtered(snap, selection, w).select(pl.len()).collect().item())
                    for w in self._windows(snap))
        with self._lock:
            counts = snap.cache.setdefault("counts", {})
            if len(counts) >= _COUNTS_KEPT:
                counts.pop(next(iter(counts)))
            counts[key] = total
        return total

    def neighbours(self, query: Query, trial_id: str, pos: int | None) -> dict[str, Any]:
        """The trials before and after ``trial_id`` in the list ``query`` selects (``pos``: where the page saw
        it; found again when the list moved since)."""
        snap = self.snapshot()
        if snap.frame is None:
            return {"pos": None, "prev": None, "next": None}
        frame = self._filtered(snap, query).select("trial_id")
        if pos is not None and pos >= 0:
            window = frame.slice(max(pos - 1, 0), 3).collect()["trial_id"].to_list()
            at = pos - max(pos - 1, 0)
            if at < len(window) and window[at] == trial_id:
                return {"pos": pos, "prev": window[at - 1] if at > 0 else None,
                        "next": window[at + 1] if at + 1 < len(window) else None}
        found = frame.with_row_index("_pos").filter(pl.col("trial_id") == trial_id).select("_pos").head(1).collect()
        if found.height == 0:
            return {"pos": None, "prev": None, "next": None}
        return self.neighbours(query, trial_id, int(found.item()))

    # -- one trial --------------------------------------------------------------------------------------------
    def blobs(self, snap: _Snapshot) -> Blobs:
        def make() -> Blobs:
            blobs = snap.output.blobs() if snap.output is not None and snap.output.parts else Blobs()
            stream = snap.stream_frame
            if stream is not None and "call_blobs" in stream.collect_schema().names():
                blobs.add(stream.select(pl.col("call_blobs").explode()).drop_nulls().unnest("call_blobs")
                          .unique("id", keep="first").collect().iter_rows(named=True))
            return blobs
        return self._cached(snap, "blobs", make)

    def trial(self, trial_id: str) -> dict[str, Any] | None:
        """One trial: every column of its row, and its recorded calls decoded (the request exactly as sent)."""
        snap = self.snapshot()
        if snap.frame is None:
            return None
        row = self._locate(snap, trial_id)
        return None if row is None else self._detail(snap, row)

    def _index(self, snap: _Snapshot) -> tuple[np.ndarray, np.ndarray]:
        """(the sorted hashes of every trial id, each one's row position): 16 bytes a trial, built once per
        snapshot; the ids themselves are not kept."""
        assert snap.frame is not None

        def make() -> tuple[np.ndarray, np.ndarray]:
            # window by window, in order: a hash's place in the concatenation is its row's place in the frame
            hashes = np.concatenate([w.select(pl.col("trial_id").hash()).collect(engine="streaming").to_series()
                                     .to_numpy() for w in self._windows(snap)])
            order = np.argsort(hashes, kind="stable")
            return hashes[order], order

        return self._cached(snap, "index", make)

    def _locate(self, snap: _Snapshot, trial_id: str) -> dict[str, Any] | None:
        """The row of ``trial_id``: a one-row slice of the scan where the index puts it (equal hashes: each
        candidate read, and the one with this id kept)."""
        assert snap.frame is not None
        hashes, order = self._index(snap)
        want = pl.Series([trial_id], dtype=pl.String).hash().to_numpy()[0]
        lo, hi = np.searchsorted(hashes, want, "left"), np.searchsorted(hashes, want, "right")
        for i in order[lo:hi]:
            found = snap.frame.slice(int(i), 1).collect()
            if found.height and found["trial_id"][0] == trial_id:
                return found.row(0, named=True)
        return None

    def _detail(self, snap: _Snapshot, row: dict[str, Any]) -> dict[str, Any]:
        calls = row_calls(row, self.blobs(snap))
        columns = {k: _plain(v) for k, v in row.items() if k not in CALL_COLUMNS}
        kind = self._kind(snap, str(row.get("probe")))
        return {"row": columns, "outcomes": self.outcomes(snap), "kind": kind,
                "why": _why(kind, columns, self.outcomes(snap)), "cost_usd": self._cost(snap, row),
                "case": self._case(snap, str(row.get("probe")), str(row.get("case_id"))),
                "calls": None if calls is None else [_plain(_call_json(c)) for c in calls]}

    def _kind(self, snap: _Snapshot, probe: str) -> str | None:
        record = snap.output.manifest.probes.get(probe) if snap.output is not None else None
        return record.kind if record is not None else None

    def _cost(self, snap: _Snapshot, row: dict[str, Any]) -> float | None:
        """The trial's cost in US dollars at the run's prices (``ModelPrice.cost``, as the report prices a
        model); None when its model has no price (unknown, not free)."""
        price = snap.output.prices.get(str(row.get("model"))) if snap.output is not None else None
        if price is None:
            return None
        return price.cost(row.get("input_tokens") or 0, row.get("output_tokens") or 0)

    def _case(self, snap: _Snapshot, probe: str, case_id: str) -> dict[str, Any] | None:
        """The record of ``case_id`` in the probe's case file, as the sweep named it; ``matches_run``: whether the
        file's sha256 is still the one the run recorded (false: it was edited since, so this is not exactly what
        the trials ran)."""
        if snap.output is None:
            return None
        m = snap.output.manifest
        record = m.probes.get(probe)
        config = next((p for p in m.sweep.probes or [] if (p.get("name") or p.get("kind")) == probe), None)
        if record is None or config is None:
            return None
        recorded = {k: v for k, v in record.model_dump().items() if k.endswith("_sha256")}
        shas = {v for v in recorded.values() if isinstance(v, str)} | \
            {x for v in recorded.values() if isinstance(v, dict) for x in v.values()}
        files = []
        for key in ("cases", "traces", "tasks"):
            value = config.get(key)
            files += [value] if isinstance(value, str) else [v for v in value or [] if isinstance(v, str)]
        base = Path(m.sweep_file).parent if m.sweep_file else self.path
        for name in files:
            found = _case_in(base / name, case_id)
            if found is not None:
                sha, data = found
                return {"source": str(base / name), "matches_run": sha in shas, "record": _plain(data)}
        return None

    def outcomes(self, snap: _Snapshot) -> list[str]:
        return [c for c in snap.schema.names() if c not in _COMMON and c not in CALL_COLUMNS]

    def everything(self, limit: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """(every trial as a list row — reply whole, ``_args``: the text the search reads in call arguments —,
        each trial's detail by id), for a static export; ``ViewError`` past ``limit`` trials."""
        snap = self.snapshot()
        if snap.frame is None:
            return [], {}
        total = int(snap.frame.select(pl.len()).collect().item())
        if total > limit:
            raise ViewError(f"{self.path} has {total:,} trials; an export embeds every trial, at most {limit:,}")
        frame = snap.frame.with_columns(_search_text(snap.schema.names()).alias("_args")).collect()
        cols = [c for c in LIST_COLUMNS if c in snap.schema] + self.outcomes(snap) + ["_args"]
        rows, details = [], {}
        for row in frame.iter_rows(named=True):
            rows.append(_plain({c: row[c] for c in cols}))
            details[row["trial_id"]] = self._detail(snap, row)
        return rows, details

    # -- the numbers and their trials -------------------------------------------------------------------------
    def summary(self) -> Summary | None:
        """The report's analysis of this output (``runner.analysis.summarize``), once per snapshot."""
        from runner.analysis.leaderboard import summarize  # the statistics' imports: only once rates are asked

        snap = self.snapshot()
        if snap.output is None or not snap.output.parts:
            return None
        return self._cached(snap, "summary", lambda: summarize([snap.output]))

    def rates(self) -> dict[str, Any]:
        """Every number of the report that counts trials, each with the filter that lists them: the leaderboard,
        the condition tables (hits and their denominator), the contrasts (each arm's hits of its trials), the
        scorecard and the probes' views (stage reach, field scores). Counts come from the report's analysis
        (``summarize``, ``scorecard_table``), never recounted here; the filters select exactly those trials
        (the browser tests click through and compare)."""
        from runner.analysis.scorecard import scorecard_table

        summary = self.summary()
        if summary is None:
            return {"probes": []}
        snap = self.snapshot()
        scorecard = scorecard_table(summary)
        probes = []
        for run in summary.runs:
            for a in run.probes:
                probes.append(self._probe_numbers(snap, summary, scorecard, run.label, a))
        return {"probes": probes}

    def _probe_numbers(self, snap: _Snapshot, summary: Summary, scorecard: pl.DataFrame, label: str,
                       a: Any) -> dict[str, Any]:
        probe = a.probe
        ok = {"f.probe": [probe], "f.status": ["ok"]}
        counted = {(r["model"], r["condition"]): r for r in a.conditions.iter_rows(named=True)}

        def arm(model: str, conditions: Sequence[str], rate: str) -> dict[str, Any]:
            """The hits of ``rate`` over ``conditions`` and their denominator, as the analysis counted them."""
            rows = [counted[(model, c)] for c in conditions if (model, c) in counted]
            base = {**ok, "f.model": [model], "f.condition": list(conditions)}
            return {"hits": sum(int(r[f"{rate}_hits"]) for r in rows), "n": sum(int(r[f"{rate}_n"]) for r in rows),
                    "hits_filter": {**base, f"f.{rate}": ["true"]}, "n_filter": {**base, f"n.{rate}": ["1"]}}

        mine = (pl.col("run") == label) & (pl.col("probe") == probe)
        cells = []
        for r in summary.conditions.filter(mine).iter_rows(named=True):
            cells.append({"model": r["model"], "condition": r["condition"], "rate": r["rate"],
                          "value": _plain(r["value"]), "trials": r["trials"],
                          **arm(r["model"], [r["condition"]], r["rate"])})
        board = []
        for r in summary.leaderboard.filter(mine).iter_rows(named=True):
            arms = {}
            for side in ("a", "b"):
                if r[f"arm_{side}"]:
                    arms[side] = {"rate": _plain(r[f"rate_{side}"]),
                                  **arm(r["model"], list(r[f"arm_{side}"]), r["outcome"] or r["headline"])}
            board.append({"model": r["model"], "headline": r["headline"], "trials": r["trials"],
                          "errors": r["errors"], "contrast": r["contrast"], "arms": arms,
                          "difference": _plain(r["difference"]),
                          "trials_filter": {"f.probe": [probe], "f.model": [r["model"]]},
                          "errors_filter": {"f.probe": [probe], "f.model": [r["model"]], "x.status": ["ok"]}})
        contrasts = []
        for r in summary.contrasts.filter(mine).iter_rows(named=True):
            contrasts.append({"model": r["model"], "contrast": r["contrast"], "outcome": r["outcome"],
                              "difference": _plain(r["difference"]), "ci_lo": _plain(r["ci_lo"]),
                              "ci_hi": _plain(r["ci_hi"]), "p_cell": _plain(r["p_cell"]),
                              "arms": {side: {"conditions": list(r[f"arm_{side}"]), "rate": _plain(r[f"rate_{side}"]),
                                              **arm(r["model"], list(r[f"arm_{side}"]), r["outcome"])}
                                       for side in ("a", "b")}})
        cards = []
        for r in scorecard.filter(mine).iter_rows(named=True):
            decoy = next((c for c in contrasts if c["model"] == r["model"] and c["contrast"] == "decoy"), None)
            grounded = next((c for c in cells if c["model"] == r["model"] and c["condition"] == "groundable_known"
                             and c["rate"] == "expected_called"), None)
            errors = next((b for b in board if b["model"] == r["model"]), None)
            cards.append({"model": r["model"], "verdict": r["verdict"], "retention": _plain(r["retention"]),
                          "reason": r["reason"], "p": _plain(r["p"]),
                          "decoy_a": None if decoy is None else {"rate": r["decoy_rate_a"], **decoy["arms"]["a"]},
                          "decoy_b": None if decoy is None else {"rate": r["decoy_rate_b"], **decoy["arms"]["b"]},
                          "grounded": None if grounded is None else {"rate": _plain(r["grounded_correct"]),
                                                                     **{k: grounded[k] for k in
                                                                        ("hits", "n", "hits_filter", "n_filter")}},
                          "errors": None if errors is None else {"rate": _plain(r["error_share"]),
                                                                 "hits": errors["errors"], "n": errors["trials"],
                                                                 "hits_filter": errors["errors_filter"],
                                                                 "n_filter": errors["trials_filter"]}})
        return {"probe": probe, "kind": a.kind, "rates": list(a.rates), "cells": cells, "leaderboard": board,
                "contrasts": contrasts, "scorecard": cards, "stages": self._stages(snap, summary, label, probe),
                "fields": self._fields(summary, label, probe)}

    def _stages(self, snap: _Snapshot, summary: Summary, label: str, probe: str) -> list[dict[str, Any]]:
        """The stage-reach view (``Summary.stages``): trials reaching each stage, as ``stage_table`` counts them
        (that stage or a later one), each leading to them."""
        from runner.probes.propagation_report import stage_order

        table = summary.stages.filter((pl.col("run") == label) & (pl.col("probe") == probe))
        if table.height == 0 or snap.frame is None or "stage_reached" not in snap.schema:
            return []
        is_int = snap.schema["stage_reached"].is_integer()
        seen = (snap.frame.filter(pl.col("probe") == probe).select(pl.col("stage_reached").drop_nulls().unique())
                .collect()["stage_reached"].to_list())
        out = []
        for r in table.iter_rows(named=True):
            values = sorted(str(v) for v in seen if stage_order(v, is_int) >= r["order"])
            base = {"f.probe": [probe], "f.status": ["ok"], "f.model": [r["model"]], "f.condition": [r["condition"]]}
            out.append({"model": r["model"], "condition": r["condition"], "stage": r["stage"], "hits": r["reached"],
                        "n": r["trials"], "hits_filter": {**base, "f.stage_reached": values}, "n_filter": base})
        return out

    def _fields(self, summary: Summary, label: str, probe: str) -> list[dict[str, Any]]:
        """The field-score view (``Summary.fields``): the trials each score is pooled over (every scorer scored),
        each leading to them."""
        table = summary.fields.filter((pl.col("run") == label) & (pl.col("probe") == probe))
        scorers = table["scorer"].unique(maintain_order=True).to_list()
        scored = {f"n.{s}_{k}": ["1"] for s in scorers for k in ("tp", "fp", "fn")}
        out = []
        for r in table.iter_rows(named=True):
            out.append({"model": r["model"], "condition": r["condition"], "scorer": r["scorer"], "n": r["trials"],
                        "tp": r["tp"], "fp": r["fp"], "fn": r["fn"], "precision": _plain(r["precision"]),
                        "recall": _plain(r["recall"]),
                        "n_filter": {"f.probe": [probe], "f.status": ["ok"], "f.model": [r["model"]],
                                     "f.condition": [r["condition"]], **scored}})
        return out

    def compare(self, probe: str, case_id: str, condition: str, per_model: int = 5) -> dict[str, Any]:
        """The same case and condition across every model: up to ``per_model`` trials of each, side by side."""
        snap = self.snapshot()
        if snap.frame is None:
            return {"models": []}
        outcomes = self.outcomes(snap)
        cols = [c for c in LIST_COLUMNS if c in snap.schema] + outcomes
        rows = (snap.frame.filter((pl.col("probe") == probe) & (pl.col("case_id") == case_id)
                                  & (pl.col("condition") == condition))
                .sort("model", "run", maintain_order=True).select(cols)
                .group_by("model", maintain_order=True).head(per_model).collect())
        models: dict[str, list[dict[str, Any]]] = {}
        for r in rows.iter_rows(named=True):
            models.setdefault(r["model"], []).append(_plain(r))
        return {"outcomes": outcomes, "models": [{"model": m, "trials": t} for m, t in models.items()]}
