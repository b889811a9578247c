"""A live run's open part, read by the viewer without a browser: each re-read converts only the batches written
since, a retried trial's newer row in the open part supersedes its row in a closed part, and the frame equals
one read from scratch at every step, and a part cut anywhere reads as its complete batches."""

from __future__ import annotations

import gc
from pathlib import Path

import polars as pl

from runner.output import Output
from runner.output.sink import TrialSink
from runner.viewer.data import Query, Source
from runner.viewer.snapshot import OpenPart
from tests.helpers.rows import live_copy


def _ids(source: Source) -> list[str]:
    snap = source.snapshot()
    assert snap.frame is not None
    return sorted(snap.frame.select("trial_id").collect()["trial_id"].to_list())


def test_the_open_part_is_read_incrementally_and_equals_a_read_from_scratch(quick_out: Path, tmp_path: Path) -> None:
    live, rows, schema = live_copy(quick_out, tmp_path)
    sink = TrialSink(live, schema, worker="w0", batch_rows=2, part_rows=6, flush_seconds=0.0)
    try:
        for row in rows[:8]:
            sink.append(row)  # a closed part of 6 rows, and an open part holding the next batch
        source = Source(live, "live", Output.open(live))
        assert _ids(source) == sorted(r["trial_id"] for r in rows[:8])
        [opened] = source.snapshots._open.values()
        assert opened.part is not None
        read_before = opened.part.offset
        for row in rows[8:10]:
            sink.append(row)  # one more batch in the same open part
        assert _ids(source) == sorted(r["trial_id"] for r in rows[:10])
        assert list(source.snapshots._open.values()) == [opened] and opened.part.offset > read_before  # the same reader, read on
        fresh = Source(live, "again", Output.open(live))  # the same output read from scratch
        assert _ids(fresh) == _ids(source)
        assert fresh.snapshot().frame.collect().equals(source.snapshot().frame.collect())  # type: ignore[union-attr]
    finally:
        sink.close()


def test_a_retried_trial_in_the_open_part_supersedes_its_closed_row(quick_out: Path, tmp_path: Path) -> None:
    live, rows, schema = live_copy(quick_out, tmp_path)
    sink = TrialSink(live, schema, worker="w0", batch_rows=2, part_rows=4, flush_seconds=0.0)
    try:
        for row in rows[:4]:
            sink.append(row)  # one closed part
        retried = dict(rows[0], response_text="the newer answer")
        sink.append(retried)
        sink.append(rows[4])  # an open part: the retry of trial 0 beside a new trial
        source = Source(live, "live", Output.open(live))
        snap = source.snapshot()
        assert snap.frame is not None
        frame = snap.frame.collect()
        assert frame.height == 5 == frame["trial_id"].n_unique()
        newest = frame.filter(pl.col("trial_id") == rows[0]["trial_id"])["response_text"].to_list()
        assert newest == ["the newer answer"]
    finally:
        sink.close()


def test_an_open_part_cut_anywhere_reads_as_its_complete_batches(quick_out: Path, tmp_path: Path) -> None:
    live, rows, schema = live_copy(quick_out, tmp_path)
    sink = TrialSink(live, schema, worker="w0", batch_rows=2, part_rows=100, flush_seconds=3600.0)
    try:
        for row in rows[:10]:
            sink.append(row)  # five batches of two rows in the open part
        [stream] = (live / "trials").glob("*.arrows")
        data = stream.read_bytes()
        (tmp_path / "a").mkdir()
        scanned = OpenPart(tmp_path / "a").read(stream)
        assert scanned is not None
        whole = scanned.collect()
    finally:
        sink.close()
    assert whole.height == 10
    (tmp_path / "b").mkdir()
    cut, reader = tmp_path / "cut.arrows", OpenPart(tmp_path / "b")
    seen = []
    for end in [*range(0, len(data), 61), len(data)]:  # the writer's bytes as a reader may find them, growing
        cut.write_bytes(data[:end])
        frame = reader.read(cut)
        seen.append(0 if frame is None else frame.select(pl.len()).collect().item())
    assert seen == sorted(seen) and set(seen) == {0, 2, 4, 6, 8, 10}  # whole batches only, each read once
    assert len(reader.files) == 5  # a spilled file for each read that found a new batch
    final = reader.read(cut)
    assert final is not None and final.collect().equals(whole)


def test_a_live_source_spills_outside_the_output_and_removes_what_it_spilled(quick_out: Path, tmp_path: Path) -> None:
    live, rows, schema = live_copy(quick_out, tmp_path, rows=12)
    before = sorted(p.name for p in live.rglob("*"))
    sink = TrialSink(live, schema, worker="w0", batch_rows=2, part_rows=6, flush_seconds=3600.0)
    for row in rows[:4]:
        sink.append(row)  # an open part of two batches
    source = Source(live, "live", Output.open(live))
    spill = source.snapshots._spill
    assert spill is not None and not spill.is_relative_to(live) and len(list(spill.iterdir())) == 1
    snap = source.snapshot()
    assert not snap.newest and source.count(Query()) == 4 == source.run_info()["trials"]
    for row in rows[4:12]:
        sink.append(row)  # the part finalized at 6 rows, a new open part of 6
    sink.close()
    assert source.count(Query()) == 12 == source.run_info()["trials"]  # every part closed now
    assert len(list(spill.iterdir())) == 1  # the spilled batches: scanned by the snapshot still held here
    del snap
    assert list(spill.iterdir()) == []  # …removed once no snapshot scans them
    del source
    gc.collect()
    assert not spill.exists()  # the folder goes with its source
    assert before == [p for p in before if (live / p).exists() or any(live.rglob(p))]
