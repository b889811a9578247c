"""One trial as its page shows it: every column, its recorded calls decoded, why its verdict is what it is,
and the case it ran as the sweep's case file holds it.

Why a module of its own: a trial is found by its id among a million without reading them (an index of id hashes
built once per snapshot, then a one-row slice), and its page joins three sources beyond its row: the call blobs,
the report's definitions of each outcome, and the case file the run was started with.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from runner.core.calls import RecordedCall, row_calls
from runner.core.constants import SUCCESS_RATES
from runner.core.errors import UserError
from runner.core.schema import CALL_COLUMNS
from runner.viewer.listing import list_columns, search_text
from runner.viewer.snapshot import Snapshot
from runner.viewer.values import ViewError, plain

__all__ = ["detail", "everything", "index", "trial"]


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


def trial(snap: Snapshot, trial_id: str) -> dict[str, Any] | None:
    """One trial: every column of its row, and its recorded calls decoded (the request exactly as sent)."""
    if snap.frame is None:
        return None
    row = _locate(snap, trial_id)
    return None if row is None else detail(snap, row)


def index(snap: Snapshot) -> tuple[np.ndarray, np.ndarray]:
    """(the sorted hashes of every trial id, each one's row position): 16 bytes a trial, built once per
    snapshot; the ids themselves are not kept."""
    assert snap.frame is not None

    def make() -> tuple[np.ndarray, np.ndarray]:
        # window by window, in order: a hash's place in the concatenation is its row's place in the frame
        hashes = np.concatenate([w.select(pl.col("trial_id").hash()).collect(engine="streaming").to_series()
                                 .to_numpy() for w in snap.windows()])
        order = np.argsort(hashes, kind="stable")
        return hashes[order], order

    return snap.cached("index", make)


def _locate(snap: Snapshot, trial_id: str) -> dict[str, Any] | None:
    """The row of ``trial_id``: a one-row slice of the scan where the index puts it (equal hashes: each
    candidate read, and the one with this id kept)."""
    assert snap.frame is not None
    hashes, order = index(snap)
    want = pl.Series([trial_id], dtype=pl.String).hash().to_numpy()[0]
    lo, hi = np.searchsorted(hashes, want, "left"), np.searchsorted(hashes, want, "right")
    for i in order[lo:hi]:
        found = snap.frame.slice(int(i), 1).collect()
        if found.height and found["trial_id"][0] == trial_id:
            return found.row(0, named=True)
    return None


def detail(snap: Snapshot, row: dict[str, Any]) -> dict[str, Any]:
    calls = row_calls(row, snap.blobs())
    columns = {k: plain(v) for k, v in row.items() if k not in CALL_COLUMNS}
    kind = _kind(snap, str(row.get("probe")))
    return {"row": columns, "outcomes": snap.outcomes(), "good_rates": snap.good_rates(), "kind": kind,
            "why": _why(kind, columns, snap.outcomes()), "cost_usd": _cost(snap, row),
            "case": _case(snap, str(row.get("probe")), str(row.get("case_id"))),
            "calls": None if calls is None else [plain(_call_json(c)) for c in calls]}


def _kind(snap: Snapshot, probe: str) -> str | None:
    record = snap.output.manifest.probes.get(probe) if snap.output is not None else None
    return record.kind if record is not None else None


def _cost(snap: Snapshot, row: dict[str, Any]) -> float | None:
    """The trial's cost in US dollars at the run's prices (``ModelPrice.cost``, as the report prices a
    model); None when its model has no price (unknown, not free)."""
    price = snap.output.prices.get(str(row.get("model"))) if snap.output is not None else None
    if price is None:
        return None
    return price.cost(row.get("input_tokens") or 0, row.get("output_tokens") or 0)


def _case(snap: Snapshot, probe: str, case_id: str) -> dict[str, Any] | None:
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
    sweep = m.sweep_path(snap.output.path)
    base = sweep.parent if sweep is not None else snap.output.path
    for name in files:
        found = _case_in(base / name, case_id)
        if found is not None:
            sha, data = found
            return {"source": str(base / name), "matches_run": sha in shas, "record": plain(data)}
    return None


def everything(snap: Snapshot, limit: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(every trial as a list row — reply whole, ``_args``: the text the search reads in call arguments —,
    each trial's detail by id), for a static export; ``ViewError`` past ``limit`` trials."""
    if snap.frame is None:
        return [], {}
    total = int(snap.frame.select(pl.len()).collect().item())
    if total > limit:
        raise ViewError(f"{snap.output.path if snap.output else 'this output'} has {total:,} trials; an export embeds every trial, at most {limit:,}")
    frame = snap.frame.with_columns(search_text(snap.schema.names()).alias("_args")).collect()
    cols = [*list_columns(snap), "_args"]
    rows, details = [], {}
    for row in frame.iter_rows(named=True):
        rows.append(plain({c: row[c] for c in cols}))
        details[row["trial_id"]] = detail(snap, row)
    return rows, details

# -- the numbers and their trials -------------------------------------------------------------------------
