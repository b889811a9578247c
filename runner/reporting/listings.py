"""``trialgrid report --listings DIR`` (and ``--csv DIR``): listing views as JSON lines, where the user asks.

A listing view (``ProbeView.listing``, e.g. the phantom probe's audits where auditor and baseline differ) is one
row per item, too long for the terminal. The report used to write it into the run's own directory, so a report
on a read-only output (an archived or shared run) failed: readers never write into an output, so a listing is
written only into a directory the user names. One file per run × probe × view, ``<probe>.<key>.jsonl`` (with
the run label in front when the report covers several runs); every label becomes part of a file name only
through ``safe_filename``, inside ``directory``.
"""

from __future__ import annotations

import json
from pathlib import Path

from runner.analysis.leaderboard import RunAnalysis, Summary
from runner.core.safety import confined, safe_filename
from runner.core.views import ProbeView

#: (run label, probe, view key) → the file its rows were written to
Written = dict[tuple[str, str, str], Path]


def listing_name(summary: Summary, run: RunAnalysis, probe: str, view: ProbeView) -> str:
    """The file name of one run's listing: ``<probe>.<key>.jsonl``, after the run label for several runs."""
    name = f"{safe_filename(probe)}.{safe_filename(view.key)}.jsonl"
    return f"{safe_filename(run.label)}.{name}" if len(summary.runs) > 1 else name


def write_listings(summary: Summary, directory: Path) -> Written:
    """Every listing view of ``summary`` as JSON lines in ``directory`` (created), one object per row, without
    the keys a row has no value for."""
    directory.mkdir(parents=True, exist_ok=True)
    written: Written = {}
    for run in summary.runs:
        for a in run.probes:
            for view in summary.probe_views(run, a.probe):
                if not view.listing:
                    continue
                path = confined(directory, listing_name(summary, run, a.probe, view))
                with path.open("w", encoding="utf-8") as fh:
                    for row in view.table.iter_rows(named=True):
                        fh.write(json.dumps({k: v for k, v in row.items() if v is not None}, ensure_ascii=False)
                                 + "\n")
                written[(run.label, a.probe, view.key)] = path
    return written
