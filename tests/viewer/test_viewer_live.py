"""A run still being written: the viewer's list grows while the page stays open (it polls), read from the part
the writer holds open, without disturbing the writer."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from runner.output.sink import TrialSink
from tests.helpers.rows import live_copy

pytestmark = pytest.mark.browser


def test_a_live_runs_count_grows_while_the_page_polls(tab: Any, quick_out: Path, serve: Any,
                                                     tmp_path: Path) -> None:
    live, rows, schema = live_copy(quick_out, tmp_path)
    sink = TrialSink(live, schema, worker="w0", batch_rows=4, flush_seconds=0.0)
    try:
        for row in rows[:4]:
            sink.append(row)  # the 4th fills a batch: written to the open (unfinished) part
        assert list((live / "trials").glob("*.arrows")) and not list((live / "trials").glob("*.arrow"))
        with serve([live]) as url:
            tab.goto(url + "#/run/0")
            assert tab.text("#count") == "4"
            for row in rows[4:8]:
                sink.append(row)
            tab.page.wait_for_function("document.getElementById('count').textContent === '8'", timeout=20_000)
            for row in rows[8:]:
                sink.append(row)
            sink.close()  # the part is finalized: the same trials, once each
            tab.page.wait_for_function("document.getElementById('count').textContent === '12'", timeout=20_000)
            assert len(tab.texts("tr.trial")) == 12
            assert tab.errors == []
    finally:
        sink.close()
    assert [p.name for p in (live / "trials").iterdir()] == ["part-w0-00000.arrow"]  # the writer's own file only
    shutil.rmtree(live)
