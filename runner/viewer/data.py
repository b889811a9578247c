"""What the viewer reads from an output: pages of trials, one trial's exchange, the counts behind each rate.

Why a module of its own: ``Source`` is the one object the server and the export hold per output; it answers
each request from the output's current snapshot (``runner.viewer.snapshot``, re-read while a run writes it) by
the module whose job the question is: the trial list (``runner.viewer.listing``), one trial
(``runner.viewer.trial``), the report's numbers with their trials (``runner.viewer.numbers``). Every answer is a
lazy polars plan cut down before it is collected, so no request loads every row and the server's memory does
not grow with the output.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.output.reader import Output
from runner.viewer import listing, numbers
from runner.viewer import trial as trials
from runner.viewer.listing import Query
from runner.viewer.snapshot import Snapshot, Snapshots
from runner.viewer.values import ViewError

if TYPE_CHECKING:
    from runner.analysis.leaderboard import Summary

__all__ = ["Query", "Source", "ViewError", "labels_for"]


def labels_for(paths: Sequence[Path], outputs: Sequence[Output]) -> list[str]:
    """One label per output, as the report names runs: the sweep name, or the folder, made unique."""
    names = [o.manifest.sweep_name or p.name for p, o in zip(paths, outputs, strict=True)]
    return [n if names.count(n) == 1 else f"{n} ({p})" for n, p in zip(names, paths, strict=True)]


class Source:
    """One output given to ``trialgrid view``, labelled as the report labels its run: each method answers one
    kind of request from the output as it is now (``snapshot``)."""

    def __init__(self, path: Path, label: str, output: Output) -> None:
        self.path = path
        self.label = label
        self.snapshots = Snapshots(path, output)
        first = self.snapshots.current()
        if first.frame is not None:
            # one row read before the server listens: the first scan of a large part pays for reading its footer and
            # batch headers (0.5 s at 1M trials), which the first page would otherwise wait for
            first.frame.slice(0, 1).collect()

    def snapshot(self) -> Snapshot:
        """The output as it is now (``UserError`` once a part is found damaged: refused, as every reader does)."""
        return self.snapshots.current()

    def verify(self) -> None:
        """Check every closed part's checksums (``Snapshots.verify``)."""
        self.snapshots.verify()

    def warm(self) -> None:
        """Check the parts' checksums (``verify``), then compute, once, what the first requests of a page would
        otherwise wait for: the filter columns and the usage (the list page), the trial index and the call blobs
        (a trial), then the report's analysis (the slowest, for the rates page)."""
        self.verify()
        snap = self.snapshot()
        if snap.frame is None:
            return
        listing.columns(snap)  # the list page waits for these: first
        self.run_info()
        trials.index(snap)
        snap.blobs()
        numbers.summary_of(snap)

    def run_info(self) -> dict[str, Any]:
        """The run as the runs list shows it: status, trials by status, errors, tokens, cost, the sweep."""
        snap = self.snapshot()
        output = snap.output
        assert output is not None
        m = output.manifest
        usage: dict[str, Any] = {"trials": 0, "errors": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": None}
        if snap.frame is not None:
            from runner.analysis.windows import usage as windowed_usage

            table = snap.cached("usage", lambda: windowed_usage(output, output.prices, snap.windows()))
            costs = table["cost_usd"]
            usage = {"trials": int(table["trials"].sum()), "errors": int(table["errors"].sum()),
                     "input_tokens": int(table["input_tokens"].sum()), "output_tokens": int(table["output_tokens"].sum()),
                     "cost_usd": float(costs.sum()) if costs.null_count() < len(costs) else None}
        return {"label": self.label, "path": str(self.path), "sweep_name": m.sweep_name, "sweep_id": m.sweep_id,
                "status": str(m.status), "live": snap.stream_frame is not None or str(m.status) == "running",
                "trials_total": m.trials_total, **usage,
                "settings": json.loads(m.sweep.model_dump_json())}


    def columns(self) -> dict[str, Any]:
        """The columns a list can filter on (``listing.columns``)."""
        return listing.columns(self.snapshot())

    def page(self, query: Query, count: bool = True) -> dict[str, Any]:
        """One page of the trials ``query`` selects and (``count``) their number (``listing.page``)."""
        return listing.page(self.snapshot(), query, count)

    def count(self, query: Query) -> int:
        """How many trials ``query`` selects (``listing.count``)."""
        return listing.count(self.snapshot(), query)

    def neighbours(self, query: Query, trial_id: str, pos: int | None) -> dict[str, Any]:
        """The trials before and after ``trial_id`` in ``query``'s list (``listing.neighbours``)."""
        return listing.neighbours(self.snapshot(), query, trial_id, pos)

    def trial(self, trial_id: str) -> dict[str, Any] | None:
        """One trial with its recorded calls decoded (``trial.trial``); None if no trial has this id."""
        return trials.trial(self.snapshot(), trial_id)

    def everything(self, limit: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Every trial's list row and detail, for a static export (``trial.everything``)."""
        return trials.everything(self.snapshot(), limit)

    def summary(self) -> Summary | None:
        """The report's analysis of this output, once per snapshot (``numbers.summary_of``)."""
        return numbers.summary_of(self.snapshot())

    def rates(self) -> dict[str, Any]:
        """Every number of the report that counts trials, with the filter listing them (``numbers.rates``)."""
        return numbers.rates(self.snapshot())

    def compare(self, probe: str, case_id: str, condition: str, per_model: int = 5) -> dict[str, Any]:
        """One case and condition across every model, side by side (``numbers.compare``)."""
        return numbers.compare(self.snapshot(), probe, case_id, condition, per_model)
