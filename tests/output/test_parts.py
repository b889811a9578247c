"""Which rows count (``runner.output.parts``): the newest row of a trial wins, for every reader and for resume."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from runner.core.errors import UserError
from runner.output.keys import trial_keys
from runner.output.parts import inspect_parts, resume_keys, scan_latest
from runner.output.sink import TrialSink
from tests.helpers.rows import write_part

SCHEMA = pa.schema([("trial_id", pa.string()), ("status", pa.string()), ("error_kind", pa.string()),
                    ("finished_at", pa.timestamp("ms", tz="UTC"))], metadata={"trialgrid.sweep_id": "s1"})


def at(second: int) -> datetime:
    return datetime(2026, 1, 1, 0, 0, second, tzinfo=UTC)


def write(out: Path, worker: str, rows: list[tuple[str, str, str | None, int]]) -> None:
    with TrialSink(out, SCHEMA, worker=worker) as sink:
        for trial_id, status, kind, second in rows:
            sink.append({"trial_id": trial_id, "status": status, "error_kind": kind, "finished_at": at(second)})


def test_the_newest_row_of_a_trial_supersedes_older_ones(tmp_path: Path) -> None:
    ids = [f"{i:016x}" for i in range(4)]
    write(tmp_path, "a", [(ids[0], "error", "transient", 1), (ids[1], "ok", None, 2), (ids[2], "error", "fatal", 3),
                          (ids[3], "error", "timeout", 4)])
    write(tmp_path, "b", [(ids[0], "ok", None, 9), (ids[3], "error", "transient", 8)])  # a retry session
    parts, issues = inspect_parts(tmp_path / "trials", "s1")
    assert len(parts) == 2 and not issues
    frame = scan_latest(parts).collect().sort("trial_id")
    assert frame["trial_id"].to_list() == ids
    assert frame["status"].to_list() == ["ok", "ok", "error", "error"]
    assert frame["error_kind"].to_list() == [None, None, "fatal", "transient"]

    everything = resume_keys(parts)
    assert everything.done.tolist() == sorted(trial_keys(pa.array(ids)).tolist())
    retry = resume_keys(parts, ("rate_limited", "transient", "timeout"))
    assert retry.retry == {"transient": 1}  # ids[3]: its newest row; ids[0] is ok now
    assert retry.done.tolist() == sorted(trial_keys(pa.array(ids[:3])).tolist())


def test_a_part_of_another_sweep_is_foreign(tmp_path: Path) -> None:
    write(tmp_path, "a", [("0" * 16, "ok", None, 1)])
    other = SCHEMA.with_metadata({"trialgrid.sweep_id": "s2"})
    write_part(tmp_path / "trials" / "part-x-00000.arrow",
               [pa.record_batch([pa.array(["1" * 16]), pa.array(["ok"]), pa.array([None], pa.string()),
                                 pa.array([at(1)], pa.timestamp("ms", tz="UTC"))], schema=other)], other)
    parts, issues = inspect_parts(tmp_path / "trials", "s1")
    assert [p.name for p in parts] == ["part-a-00000.arrow"]
    assert [(i.problem, i.path.name) for i in issues] == [("foreign", "part-x-00000.arrow")]
    assert "belongs to sweep 's2'" in str(issues[0])


def test_readers_refuse_damage_in_one_line(tmp_path: Path) -> None:
    from runner.output.parts import readable_parts

    with pytest.raises(UserError, match="no finished trial files"):
        readable_parts(tmp_path)


@pytest.mark.parametrize("name", ["part-local-00001.arrow", "part-local-00001.arrows", "journal-local.jsonl"])
def test_a_fifo_in_place_of_a_file_of_an_output_is_refused_not_opened(tmp_path: Path, name: str) -> None:
    """A FIFO would block whoever opens it: readers refuse it in one line, a resume sets it aside unread."""
    import os

    from tests.helpers.cli import invoke, trialgrid
    from tests.helpers.files import quickstart_sweep

    sweep = quickstart_sweep(tmp_path, runs=1)
    out = tmp_path / "out"
    assert invoke("run", str(sweep), "--out", str(out), "-q").exit_code == 0
    os.mkfifo(out / "trials" / name)
    report = trialgrid("report", str(out), "-q", timeout=60)  # a reader that opened it would block here
    if name.endswith(".arrow"):
        assert report.returncode == 2 and "FIFO" in report.stderr and "move it out of trials/" in report.stderr
    else:
        assert report.returncode in (0, 2), report.stderr
    resumed = invoke("run", str(sweep), "--out", str(out), "-q")
    assert resumed.exit_code == 0, resumed.output
    assert (out / "trials" / "damaged" / name).exists() and not (out / "trials" / name).exists()
    assert f"moved {name} to trials/damaged/ unread" in resumed.stderr
    assert invoke("report", str(out), "-q").exit_code == 0
