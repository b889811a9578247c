"""The write-ahead journal: rows appended but not yet in a batch survive a crash and are replayed once."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc

from runner.core import redact
from runner.output.checksums import with_scheme
from runner.output.journal import journal_path, read_journal
from runner.output.repair import ReplayNote, replay_journals
from runner.output.sink import TrialSink

BLOB = pa.struct([("id", pa.string()), ("kind", pa.string()), ("content", pa.string())])
SCHEMA = pa.schema([
    pa.field("trial_id", pa.string()),
    pa.field("run", pa.int64()),
    pa.field("response_text", pa.string()),
    pa.field("call_blobs", pa.list_(BLOB)),
    pa.field("finished_at", pa.timestamp("ms", tz="UTC")),
], metadata={"trialgrid.sweep_id": "s1", "trialgrid.session": "0|t|1", "trialgrid.supersedes": "0"})
CATALOGUE = {"id": "c0ffee0000000001", "kind": "tools", "content": "[{\"name\": \"fetch\"}]"}


def row(i: int, text: str = "ok", finished: int | None = None) -> dict[str, Any]:
    return {"trial_id": f"{i:016x}", "run": i, "response_text": text, "call_blobs": [CATALOGUE],
            "finished_at": 1_700_000_000_000 + i if finished is None else finished}


def crashed_sink(out: Path, rows: list[dict[str, Any]], **kw: Any) -> TrialSink:
    """A journaling sink that appended ``rows`` and then 'died' (never closed)."""
    sink = TrialSink(out, SCHEMA, journal=True, batch_rows=1000, flush_seconds=3600, **kw)
    for r in rows:
        sink.append(r)
    return sink


def rows_in_parts(out: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for part in sorted((out / "trials").glob("part-*.arrow")):
        rows += ipc.open_file(str(part)).read_all().to_pylist()
    return rows


def test_appended_rows_are_replayed_once_into_a_part_of_the_same_session(tmp_path: Path) -> None:
    crashed_sink(tmp_path, [row(i) for i in range(5)])
    journal = journal_path(tmp_path / "trials", "w0")
    assert journal.stat().st_size > 0 and not list((tmp_path / "trials").glob("part-*"))
    notes = replay_journals(tmp_path / "trials", SCHEMA.with_metadata({}))
    assert [(n.rows, n.already_written, n.torn) for n in notes if isinstance(n, ReplayNote)] == [(5, 0, False)]
    assert not journal.exists()
    rows = rows_in_parts(tmp_path)
    assert [r["run"] for r in rows] == list(range(5))
    assert rows[0]["call_blobs"] == [CATALOGUE] and all(r["call_blobs"] is None for r in rows[1:])  # once a batch
    part = next((tmp_path / "trials").glob("part-*.arrow"))
    assert ipc.open_file(str(part)).schema.metadata == with_scheme(SCHEMA).metadata  # the session that answered them
    assert replay_journals(tmp_path / "trials", SCHEMA) == []  # nothing left: a second open replays nothing


def test_a_batch_truncates_the_journal_and_close_removes_it(tmp_path: Path) -> None:
    sink = crashed_sink(tmp_path, [row(i) for i in range(3)])
    journal = journal_path(tmp_path / "trials", "w0")
    sink.flush()
    assert journal.stat().st_size == 0
    sink.append(row(3))
    assert read_journal(journal).rows[0]["call_blobs"] == [CATALOGUE]  # blobs again after a truncation
    sink.close()
    assert not journal.exists()
    assert [r["run"] for r in rows_in_parts(tmp_path)] == [0, 1, 2, 3]


def test_rows_already_in_a_part_are_not_written_twice_but_a_retried_row_is(tmp_path: Path) -> None:
    # a kill between writing a batch and truncating the journal: the journal's rows are in the part too
    sink = TrialSink(tmp_path, SCHEMA, batch_rows=1000, flush_seconds=3600)
    for i in range(3):
        sink.append(row(i))
    sink.close()
    journal = journal_path(tmp_path / "trials", "w1")
    crashed_sink(tmp_path, [row(1), row(2), row(0, "retried", finished=1_800_000_000_000)], worker="w1")
    assert journal.exists()
    notes = [n for n in replay_journals(tmp_path / "trials", SCHEMA) if isinstance(n, ReplayNote)]
    assert [(n.rows, n.already_written) for n in notes] == [(1, 2)]
    assert sorted((r["run"], r["response_text"]) for r in rows_in_parts(tmp_path)) == [
        (0, "ok"), (0, "retried"), (1, "ok"), (2, "ok")]


def test_a_torn_last_line_is_dropped_and_the_rest_replayed(tmp_path: Path) -> None:
    crashed_sink(tmp_path, [row(i) for i in range(4)])
    journal = journal_path(tmp_path / "trials", "w0")
    data = journal.read_bytes()
    journal.write_bytes(data[:-7])  # the kill cut the last row's line
    notes = [n for n in replay_journals(tmp_path / "trials", SCHEMA) if isinstance(n, ReplayNote)]
    assert [(n.rows, n.torn) for n in notes] == [(3, True)]
    assert "replayed 3 answered trials" in str(notes[0]) and "torn" in str(notes[0])


def test_a_journal_whose_rows_do_not_convert_is_set_aside(tmp_path: Path) -> None:
    crashed_sink(tmp_path, [row(0)])
    journal = journal_path(tmp_path / "trials", "w0")
    journal.write_bytes(journal.read_bytes().replace(b'"run":0', b'"run":"zero"'))
    notes = [n for n in replay_journals(tmp_path / "trials", SCHEMA) if isinstance(n, ReplayNote)]
    assert notes[0].refused and "moved to damaged/" in str(notes[0])
    assert not journal.exists() and (tmp_path / "trials" / "damaged" / journal.name).exists()
    assert not list((tmp_path / "trials").glob("part-*"))


def test_garbage_and_a_missing_header_replay_nothing(tmp_path: Path) -> None:
    trials = tmp_path / "trials"
    trials.mkdir()
    journal_path(trials, "w0").write_bytes(b'r{"trial_id": "00000000000000aa"}\n')  # a row before any header
    journal_path(trials, "w1").write_bytes(os.urandom(4096))
    notes = [n for n in replay_journals(trials, SCHEMA) if isinstance(n, ReplayNote)]
    assert [(n.rows, n.torn) for n in notes] == [(0, True), (0, True)]
    assert not list(trials.glob("journal-*")) and not list(trials.glob("part-*"))


def test_no_key_reaches_the_journal(tmp_path: Path) -> None:
    key = "sk-live-Zq8wX2mB7nR4tY6uP0aS3dF5gH9jK1lC"
    redact.remember(key)
    try:
        crashed_sink(tmp_path, [row(0, f"the server said {key}")])
        data = journal_path(tmp_path / "trials", "w0").read_bytes()
    finally:
        redact.forget_all()
    assert key.encode() not in data and key[-8:].encode() not in data and b"[redacted]" in data


def test_a_sink_refuses_a_journal_not_yet_replayed(tmp_path: Path) -> None:
    crashed_sink(tmp_path, [row(0)])
    sink = TrialSink(tmp_path, SCHEMA, journal=True)
    try:
        sink.append(row(1))
    except RuntimeError as exc:
        assert "not yet replayed" in str(exc)
    else:
        raise AssertionError("a second journal over unreplayed rows was opened")


def test_in_an_event_loop_the_rows_of_one_iteration_reach_the_journal_together_before_the_next(tmp_path: Path) -> None:
    import asyncio

    from runner.output.sink import JOURNAL_ROWS

    journal = journal_path(tmp_path / "trials", "w0")
    seen: list[int] = []

    async def main() -> TrialSink:
        sink = TrialSink(tmp_path, SCHEMA, journal=True, batch_rows=10_000, flush_seconds=3600)
        for i in range(3):
            sink.append(row(i))
        assert not journal.exists() or read_journal(journal).rows == []  # not yet: the iteration goes on
        await asyncio.sleep(0)  # the loop's next iteration has run
        seen.append(len(read_journal(journal).rows))
        for i in range(3, 3 + JOURNAL_ROWS):  # a long iteration is written each JOURNAL_ROWS rows all the same
            sink.append(row(i))
        seen.append(len(read_journal(journal).rows))
        await asyncio.sleep(0)
        seen.append(len(read_journal(journal).rows))
        return sink

    sink = asyncio.run(main())  # the sink 'dies' here: never closed
    assert seen == [3, 3 + JOURNAL_ROWS, 3 + JOURNAL_ROWS]
    replay_journals(tmp_path / "trials", SCHEMA.with_metadata({}))
    assert [r["run"] for r in rows_in_parts(tmp_path)] == list(range(3 + JOURNAL_ROWS))
    del sink


def test_rows_a_batch_writes_before_the_iteration_ends_are_not_journaled_at_all(tmp_path: Path) -> None:
    import asyncio

    journal = journal_path(tmp_path / "trials", "w0")

    async def main() -> None:
        sink = TrialSink(tmp_path, SCHEMA, journal=True, batch_rows=4, flush_seconds=3600)
        for i in range(6):  # the first 4 go to a part in this iteration; 2 wait in the journal
            sink.append(row(i))
        await asyncio.sleep(0)
        assert [r["run"] for r in read_journal(journal).rows] == [4, 5]
        assert [r["run"] for r in rows_in_parts_or_streams(tmp_path)] == [0, 1, 2, 3]
        sink.close()

    asyncio.run(main())
    assert not journal.exists()
    assert [r["run"] for r in rows_in_parts(tmp_path)] == list(range(6))


def rows_in_parts_or_streams(out: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for part in sorted((out / "trials").glob("part-*.arrow*")):
        with pa.OSFile(str(part)) as f:
            data = f.read()
        rows += ipc.open_stream(pa.py_buffer(data[8:])).read_all().to_pylist()
    return rows
