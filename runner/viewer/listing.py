"""The trial list: filters from a page's URL checked against the output's columns, a page of rows, its count.

Why a module of its own: a list is the one question asked of every trial, so each answer is a lazy plan cut
down before it is collected (a slice, a count window by window), and filters arrive as text: an unknown column
or a value its type cannot hold is a ``ViewError`` (the server answers 400), never a polars exception.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl
from polars.datatypes import DataTypeClass

from runner.core.schema import CALL_COLUMNS
from runner.viewer.snapshot import COMMON, Snapshot
from runner.viewer.values import ViewError, plain

__all__ = ["EXCLUDE_PREFIX", "FILTER_PREFIX", "LIST_COLUMNS", "NOT_NULL_PREFIX", "NULL_PREFIX", "PAGE_MAX", "Query",
           "columns", "count", "list_columns", "neighbours", "page", "search_text"]

#: a filter in a URL: ``f.COLUMN=VALUE`` (repeat it for any of several values); ``z.COLUMN=1``: the column is null;
#: ``n.COLUMN=1``: it is not null (a rate's denominator); ``x.COLUMN=VALUE``: it is none of these values
FILTER_PREFIX, NULL_PREFIX, NOT_NULL_PREFIX, EXCLUDE_PREFIX = "f.", "z.", "n.", "x."
PAGE_MAX = 500
#: the columns a trial list shows beside the outcome columns
LIST_COLUMNS = ("trial_id", "model", "probe", "case_id", "condition", "run", "status", "error_kind", "attempts",
                "latency_ms", "input_tokens", "output_tokens", "response_text")
#: common columns offered as filters (with their values listed)
FILTER_COMMON = ("model", "probe", "case_id", "condition", "run", "status", "error_kind", "provider", "model_id")
_SNIPPET = 240  # characters of a reply a list row carries
_DISTINCT_MAX = 500  # a column with more values than this is filtered by typing, not by a list
_COUNTS_KEPT = 256  # counts remembered per snapshot (a few integers each)


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


def search_text(names: Sequence[str]) -> pl.Expr:
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
    return found | search_text(names).str.contains(pattern).fill_null(False)


def list_columns(snap: Snapshot) -> list[str]:
    """The columns a list row carries: the common ones a list shows, then every outcome."""
    return [c for c in LIST_COLUMNS if c in snap.schema] + snap.outcomes()


def columns(snap: Snapshot) -> dict[str, Any]:
    """The columns a list can filter on, each with its kind and (when few) its values, once per snapshot."""
    return snap.cached("columns", lambda: _columns(snap))


def _columns(snap: Snapshot) -> dict[str, Any]:
    if snap.frame is None:
        return {"common": [], "outcomes": [], "good_rates": []}
    schema = snap.schema
    outcome_names = [c for c in schema.names() if c not in COMMON and c not in CALL_COLUMNS]

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
    windows = snap.windows()
    for c in listed:  # one column and one window at a time, streaming: one column's pages of one window
        col = pl.col(c).explode() if kind(schema[c]) == "list" else pl.col(c)
        found: pl.Series | None = None
        for w in windows:
            more = w.select(col.drop_nulls().unique().head(_DISTINCT_MAX + 1).alias(c)).collect(engine="streaming")[c]
            found = more if found is None else pl.concat([found, more]).unique()
            if len(found) > _DISTINCT_MAX:
                break  # too many to list: filtered by typing
        values[c] = [] if found is None else found.sort().to_list()
    out: dict[str, list[Any]] = {"common": [], "outcomes": [], "good_rates": snap.good_rates()}
    for c in wanted:
        entry: dict[str, Any] = {"name": c, "kind": kind(schema[c])}
        if c in values and len(values[c]) <= _DISTINCT_MAX:
            entry["values"] = [str(v) for v in values[c]]
        out["common" if c in COMMON else "outcomes"].append(entry)
    return out


def _filtered(snap: Snapshot, query: Query, frame: pl.LazyFrame | None = None) -> pl.LazyFrame:
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


def page(snap: Snapshot, query: Query, counted: bool = True) -> dict[str, Any]:
    """One page of the trials ``query`` selects, and (``counted``) how many it selects in all. The page alone
    stops reading once it has its rows (a slice of the filtered scan); the count reads every row the filters
    touch, so the page asks for it apart (``counted``) and shows its rows first."""
    if snap.frame is None:
        return {"total": 0, "offset": query.offset, "rows": [], "outcomes": [], "good_rates": []}
    frame = _filtered(snap, query)
    outcomes = snap.outcomes()
    cols = list_columns(snap)
    selected = [pl.col(c).str.slice(0, _SNIPPET) if c == "response_text" else pl.col(c) for c in cols]
    if query.sort is not None and not snap.newest:
        # sorted: the positions of the page's rows found from the filter and sort columns alone, then those
        # rows read as one-row slices (sorting every column of every trial held 670 MiB at 1 M trials); a
        # live output is sorted whole (its newest-row-per-trial frame would be computed again for each slice)
        at = (_filtered(snap, query, snap.frame.with_row_index("_pos")).slice(query.offset, query.limit)
              .select("_pos").collect()["_pos"].to_list())
        rows = (pl.concat([snap.frame.slice(int(i), 1).select(selected) for i in at]).collect() if at
                else frame.clear().select(selected).collect())
    else:
        rows = frame.slice(query.offset, query.limit).select(selected).collect()
    return {"total": count(snap, query) if counted else None, "offset": query.offset, "outcomes": outcomes,
            "good_rates": snap.good_rates(), "rows": [plain(r) for r in rows.iter_rows(named=True)]}


def count(snap: Snapshot, query: Query) -> int:
    """How many trials ``query``'s filters and text select: counted once per snapshot and selection (paging,
    sorting and previous / next ask again without reading the output)."""
    if snap.frame is None:
        return 0
    key = ("count", query.equals, query.nulls, query.not_nulls, query.excludes, query.text)
    with snap.lock:
        known = snap.cache.get("counts", {}).get(key)
    if known is not None:
        return int(known)
    selection = Query(query.equals, query.nulls, query.not_nulls, query.excludes, query.text)
    # window by window (its filters are row by row, so the windows' counts add up): a text search decodes
    # every reply and every call's arguments, which read whole held 767 MiB at 1M trials; a live output whose
    # newest rows are chosen is counted whole (the choice would be made again for each window)
    total = sum(int(_filtered(snap, selection, w).select(pl.len()).collect().item())
                for w in snap.windows())
    with snap.lock:
        counts = snap.cache.setdefault("counts", {})
        if len(counts) >= _COUNTS_KEPT:
            counts.pop(next(iter(counts)))
        counts[key] = total
    return total


def neighbours(snap: Snapshot, query: Query, trial_id: str, pos: int | None) -> dict[str, Any]:
    """The trials before and after ``trial_id`` in the list ``query`` selects (``pos``: where the page saw
    it; found again when the list moved since)."""
    if snap.frame is None:
        return {"pos": None, "prev": None, "next": None}
    frame = _filtered(snap, query).select("trial_id")
    if pos is not None and pos >= 0:
        window = frame.slice(max(pos - 1, 0), 3).collect()["trial_id"].to_list()
        at = pos - max(pos - 1, 0)
        if at < len(window) and window[at] == trial_id:
            return {"pos": pos, "prev": window[at - 1] if at > 0 else None,
                    "next": window[at + 1] if at + 1 < len(window) else None}
    found = frame.with_row_index("_pos").filter(pl.col("trial_id") == trial_id).select("_pos").head(1).collect()
    if found.height == 0:
        return {"pos": None, "prev": None, "next": None}
    return neighbours(snap, query, trial_id, int(found.item()))
