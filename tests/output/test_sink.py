"""The trial sink: round trips, flush triggers, rotation, finalize, crash repair, resume."""

from __future__ import annotations

import datetime as dt
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

import runner.output.sink as sink_module
from runner.core.errors import UserError
from runner.core.manifest import MANIFEST
from runner.output import Output
from runner.output.checksums import ChecksummedWriter, with_scheme
from runner.output.keys import completed_trial_keys, trial_keys
from runner.output.repair import RepairNote, repair_parts
from runner.output.sink import TrialSink, to_record_batch

#: a stock run manifest: a sink writes none, and the public reader (``Output``) reads an output with one
STOCK_MANIFEST = Path(__file__).resolve().parents[1] / "core" / "fixtures" / "manifest-run.json"


def opened(out: Path) -> Output:
    """The sink's directory through the public reader (a stock manifest beside the parts)."""
    if not (out / MANIFEST).exists():
        shutil.copyfile(STOCK_MANIFEST, out / MANIFEST)
    return Output.open(out)


def rows_of(out: Path) -> pl.DataFrame:
    """Every row of the parts the reader counts, superseded ones included (so a duplicate shows)."""
    parts = opened(out).parts
    return pl.read_ipc(parts[0]) if len(parts) == 1 else pl.concat([pl.read_ipc(p) for p in parts])


def ids_of(out: Path) -> set[str]:
    """The trial ids an output's readers see (``Output.scan``: each trial once); none without a finished part."""
    output = opened(out)
    return set(output.scan().collect()["trial_id"]) if output.parts else set()

TOOL_CALL = pa.struct(
    [("id", pa.string()), ("name", pa.string()), ("arguments", pa.string()), ("parse_error", pa.string())]
)
SCHEMA = pa.schema(
    [
        ("trial_id", pa.string()),
        ("run", pa.int32()),
        ("latency_s", pa.float64()),
        ("decoy_called", pa.bool_()),
        ("started_at", pa.timestamp("us", tz="UTC")),
        ("tools_called", pa.list_(pa.string())),
        ("tool_calls", pa.list_(TOOL_CALL)),
        ("usage", pa.struct([("input_tokens", pa.int64()), ("output_tokens", pa.int64())])),
        ("response_text", pa.string()),
    ]
)
T0 = dt.datetime(2025, 3, 1, 12, 0, tzinfo=dt.UTC)


def full_row(i: int) -> dict[str, Any]:
    """A row exercising every column kind; shapes vary with i (nulls, empty lists, missing keys)."""
    row: dict[str, Any] = {
        "trial_id": f"{i:08d}",
        "run": i % 5,
        "latency_s": i / 1000,
        "decoy_called": (None, True, False)[i % 3],
        "started_at": T0 + dt.timedelta(seconds=i),
        "tools_called": [None, [], ["lookup"], ["lookup", "inspect_all"]][i % 4],
        "tool_calls": [
            None,
            [],
            [{"id": "c1", "name": "lookup", "arguments": '{"vendor": "Acme"}', "parse_error": None}],
            [
                {"id": "c1", "name": "lookup", "arguments": "{bad", "parse_error": "Expecting property name"},
                {"name": "inspect_all"},  # missing struct fields are null
            ],
        ][i % 4],
        "usage": None if i % 6 == 0 else {"input_tokens": 300 + i, "output_tokens": 20},
        "response_text": "" if i % 2 else f"answer {i}",
    }
    if i % 7 == 0:
        del row["response_text"], row["latency_s"]  # missing keys are null
    return row


def expected(row: dict[str, Any]) -> dict[str, Any]:
    """What reading the row back gives: every column present, struct fields filled."""
    out = {name: row.get(name) for name in SCHEMA.names}
    if out["tool_calls"] is not None:
        out["tool_calls"] = [{f.name: call.get(f.name) for f in TOOL_CALL} for call in out["tool_calls"]]
    return out


def ids_row(i: int) -> dict[str, Any]:
    return {"trial_id": f"{i:08d}", "run": i}


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def files(out: Path) -> list[str]:
    return sorted(p.name for p in (out / "trials").iterdir())


def read_stream_batches(path: Path) -> list[int]:
    """Row counts of the complete batches of a (possibly still open) part: its body is a stream after the magic."""
    with pa.OSFile(str(path), "rb") as source:
        source.seek(8 if source.read(6) == b"ARROW1" else 0)
        return [batch.num_rows for batch in ipc.open_stream(source)]


@pytest.fixture
def no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    """fsync only matters for power loss; skipping it keeps the many-repair tests fast."""
    import runner.output.repair as repair_module

    for module in (sink_module, repair_module):
        monkeypatch.setattr(module, "_fsync", lambda path: None)


# --- round trip ------------------------------------------------------------------


def test_round_trip_every_column_kind(tmp_path: Path) -> None:
    rows = [full_row(i) for i in range(50)]
    with TrialSink(tmp_path, SCHEMA, batch_rows=8) as sink:
        for row in rows:
            sink.append(row)
    assert sink.rows_written == 50
    table = pa.Table.from_batches(
        [b for p in sink.finalized_parts for b in ipc.open_file(pa.memory_map(str(p))).read_all().to_batches()]
    )
    assert table.schema.equals(SCHEMA)
    assert table.to_pylist() == [expected(row) for row in rows]

    frame = pl.scan_ipc(str(tmp_path / "trials" / "*.arrow")).collect()
    assert frame.height == 50
    assert frame["trial_id"].to_list() == [r["trial_id"] for r in rows]
    assert frame["tools_called"].to_list()[:4] == [None, [], ["lookup"], ["lookup", "inspect_all"]]
    assert frame["tool_calls"][3].to_list()[1] == {
        "id": None, "name": "inspect_all", "arguments": None, "parse_error": None
    }
    assert frame["response_text"][0] is None and frame["response_text"][1] == ""


def test_to_record_batch_matches_from_pylist() -> None:
    rows = [full_row(i) for i in range(40)]
    assert to_record_batch(rows, SCHEMA).equals(pa.RecordBatch.from_pylist(rows, schema=SCHEMA))


def test_unknown_key_is_a_key_error_naming_it(tmp_path: Path) -> None:
    sink = TrialSink(tmp_path, SCHEMA)
    with pytest.raises(KeyError, match="decoy_caled"):
        sink.append({"trial_id": "x", "decoy_caled": True})
    assert sink.rows_buffered == 0
    sink.close()


def test_unconvertible_value_names_column_and_trial() -> None:
    with pytest.raises(TypeError, match=r"'run'.*'bad'"):
        to_record_batch([ids_row(0), {"trial_id": "bad", "run": "three"}], SCHEMA)


@pytest.mark.internal_rows
def test_a_row_that_cannot_be_written_costs_no_other_row(tmp_path: Path) -> None:
    """One value the output cannot hold (a count past int64, a text where a number goes) makes its own row an
    ``internal`` error row naming it, the value null and the rest of the row kept; the batch is written whole."""
    schema = pa.schema([("trial_id", pa.string()), ("status", pa.string()), ("error_kind", pa.string()),
                        ("error", pa.string()), ("output_tokens", pa.int64()), ("response_text", pa.string())])
    sink = TrialSink(tmp_path, schema, batch_rows=3)
    sink.append({"trial_id": "a", "status": "ok", "output_tokens": 5, "response_text": "fine"})
    sink.append({"trial_id": "b", "status": "ok", "output_tokens": 2**64, "response_text": "kept"})
    sink.append({"trial_id": "c", "status": "ok", "output_tokens": 7, "response_text": "fine too"})
    sink.close()
    rows = {r["trial_id"]: r for r in pl.read_ipc(str(tmp_path / "trials" / files(tmp_path)[0])).to_dicts()}
    assert rows["a"]["status"] == rows["c"]["status"] == "ok" and rows["c"]["output_tokens"] == 7
    bad = rows["b"]
    assert bad["status"] == "error" and bad["error_kind"] == "internal" and bad["output_tokens"] is None
    assert bad["response_text"] == "kept" and "output_tokens = 18446744073709551616" in bad["error"]


def test_non_nullable_column_rejects_missing_value(tmp_path: Path) -> None:
    schema = pa.schema([pa.field("trial_id", pa.string(), nullable=False), ("run", pa.int32())])
    with pytest.raises(TypeError, match="not nullable"):
        to_record_batch([{"trial_id": "a"}, {"run": 1}], schema)


# --- flushing ----------------------------------------------------------------------


def test_flush_by_rows(tmp_path: Path) -> None:
    clock = FakeClock()
    sink = TrialSink(tmp_path, SCHEMA, batch_rows=3, flush_seconds=60, clock=clock)
    for i in range(7):
        sink.append(ids_row(i))
    assert sink.rows_written == 6 and sink.rows_buffered == 1
    assert read_stream_batches(tmp_path / "trials" / "part-w0-00000.arrows") == [3, 3]
    sink.close()
    assert sink.rows_written == 7
    assert files(tmp_path) == ["part-w0-00000.arrow"]


def test_flush_by_time_checked_on_append(tmp_path: Path) -> None:
    clock = FakeClock()
    sink = TrialSink(tmp_path, SCHEMA, batch_rows=1000, flush_seconds=2.0, clock=clock)
    sink.append(ids_row(0))
    clock.now += 1.0
    sink.append(ids_row(1))
    assert sink.rows_written == 0 and sink.rows_buffered == 2
    clock.now += 1.0  # 2 s since the sink started: this append flushes
    sink.append(ids_row(2))
    assert sink.rows_written == 3 and sink.rows_buffered == 0
    clock.now += 1.9
    sink.append(ids_row(3))
    assert sink.rows_written == 3  # the timer restarted at the flush
    clock.now += 0.1
    sink.append(ids_row(4))
    assert sink.rows_written == 5
    assert read_stream_batches(tmp_path / "trials" / "part-w0-00000.arrows") == [3, 2]
    sink.close()


def test_explicit_flush_and_empty_flush(tmp_path: Path) -> None:
    sink = TrialSink(tmp_path, SCHEMA)
    sink.flush()
    assert files(tmp_path) == []  # parts are created lazily: no empty files
    sink.append(ids_row(0))
    sink.flush()
    sink.flush()
    assert read_stream_batches(tmp_path / "trials" / "part-w0-00000.arrows") == [1]
    sink.close()


def test_sink_without_rows_leaves_no_file(tmp_path: Path) -> None:
    with TrialSink(tmp_path, SCHEMA):
        pass
    assert files(tmp_path) == []


def test_closed_sink_rejects_appends_and_close_is_idempotent(tmp_path: Path) -> None:
    sink = TrialSink(tmp_path, SCHEMA)
    sink.append(ids_row(0))
    sink.close()
    sink.close()
    with pytest.raises(RuntimeError, match="closed"):
        sink.append(ids_row(1))
    assert files(tmp_path) == ["part-w0-00000.arrow"]


def test_context_manager_finalizes_on_exception(tmp_path: Path) -> None:
    with pytest.raises(ZeroDivisionError):
        with TrialSink(tmp_path, SCHEMA, batch_rows=2) as sink:
            for i in range(5):
                sink.append(ids_row(i))
            raise ZeroDivisionError
    assert ids_of(tmp_path) == {f"{i:08d}" for i in range(5)}


# --- rotation and finalize ----------------------------------------------------------


def test_rotation_at_part_rows(tmp_path: Path) -> None:
    with TrialSink(tmp_path, SCHEMA, batch_rows=2, part_rows=5, flush_seconds=60, clock=FakeClock()) as sink:
        for i in range(12):
            sink.append(ids_row(i))
            if i == 4:
                assert files(tmp_path) == ["part-w0-00000.arrow"]
    assert files(tmp_path) == ["part-w0-00000.arrow", "part-w0-00001.arrow", "part-w0-00002.arrow"]
    sizes = []
    for part in sink.finalized_parts:
        reader = ipc.open_file(pa.memory_map(str(part)))
        assert reader.schema.equals(SCHEMA)
        sizes.append([reader.get_batch(i).num_rows for i in range(reader.num_record_batches)])
    assert sizes == [[2, 2, 1, 0], [2, 2, 1, 0], [2, 0]]  # each part ends in its empty seal (runner.output.checksums)
    frame = rows_of(tmp_path)
    assert frame["trial_id"].to_list() == [f"{i:08d}" for i in range(12)]


def test_finalized_parts_are_ipc_files_and_streams_are_gone(tmp_path: Path) -> None:
    with TrialSink(tmp_path, SCHEMA, batch_rows=4, part_rows=10) as sink:
        for i in range(25):
            sink.append(full_row(i))
    names = files(tmp_path)
    assert names == ["part-w0-00000.arrow", "part-w0-00001.arrow", "part-w0-00002.arrow"]
    for name in names:
        ipc.open_file(tmp_path / "trials" / name).read_all()  # has a footer
    assert pl.scan_ipc(str(tmp_path / "trials" / "*.arrow")).select(pl.len()).collect().item() == 25


def test_reading_without_finished_parts_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no finished trial files"):
        opened(tmp_path).scan()
    sink = TrialSink(tmp_path, SCHEMA)
    sink.append(ids_row(0))
    sink.flush()  # a stream exists, but nothing is finalized yet
    assert opened(tmp_path).parts == () and opened(tmp_path).counts() == {}
    with pytest.raises(UserError, match="no finished trial files"):
        opened(tmp_path).scan()
    sink.close()
    assert opened(tmp_path).scan().collect().height == 1


# --- part names ---------------------------------------------------------------------


def test_new_sink_never_reuses_a_sequence_number(tmp_path: Path) -> None:
    with TrialSink(tmp_path, SCHEMA) as first:
        first.append(ids_row(0))
    crashed = TrialSink(tmp_path, SCHEMA, batch_rows=1)
    crashed.append(ids_row(1))  # never closed: part 00001 stays a stream
    (tmp_path / "trials" / "part-w0-00007.arrow.tmp").write_bytes(b"")
    (tmp_path / "trials" / "part-w3-00042.arrow").write_bytes(b"")  # other workers don't matter
    with TrialSink(tmp_path, SCHEMA) as resumed:
        resumed.append(ids_row(2))
    assert resumed.finalized_parts == (tmp_path / "trials" / "part-w0-00008.arrow",)
    with TrialSink(tmp_path, SCHEMA, worker="w1") as other:
        other.append(ids_row(3))
    assert other.finalized_parts == (tmp_path / "trials" / "part-w1-00000.arrow",)


def test_worker_names_that_share_a_prefix_do_not_collide(tmp_path: Path) -> None:
    with TrialSink(tmp_path, SCHEMA, worker="w-1") as a:
        a.append(ids_row(0))
    with TrialSink(tmp_path, SCHEMA, worker="w") as b:
        b.append(ids_row(1))
    assert files(tmp_path) == ["part-w-00000.arrow", "part-w-1-00000.arrow"]


def test_open_part_skips_a_name_taken_after_the_scan(tmp_path: Path) -> None:
    sink = TrialSink(tmp_path, SCHEMA)
    # Another sink of the same worker finalized 00000 and holds 00001 after ours scanned.
    (tmp_path / "trials" / "part-w0-00000.arrow").write_bytes(b"")
    (tmp_path / "trials" / "part-w0-00001.arrows").write_bytes(b"")
    sink.append(ids_row(0))
    sink.flush()
    assert (tmp_path / "trials" / "part-w0-00002.arrows").exists()
    assert (tmp_path / "trials" / "part-w0-00000.arrow").read_bytes() == b""
    sink.close()


@pytest.mark.parametrize("worker", ["", "a/b", "w 0", "-w", "w-"])
def test_bad_worker_names_are_refused(tmp_path: Path, worker: str) -> None:
    with pytest.raises(ValueError, match="worker name"):
        TrialSink(tmp_path, SCHEMA, worker=worker)


# --- repair ------------------------------------------------------------------------


def write_crashed_stream(out: Path, batch_sizes: list[int]) -> tuple[bytes, list[int]]:
    """Write batches with a sink that then 'crashes'; return the stream bytes and batch end offsets."""
    sink = TrialSink(out, SCHEMA, batch_rows=10**6, flush_seconds=1e9)
    stream = out / "trials" / "part-w0-00000.arrows"
    ends = []
    i = 0
    for size in batch_sizes:
        for _ in range(size):
            sink.append(full_row(i))
            i += 1
        sink.flush()
        ends.append(stream.stat().st_size)
    data = stream.read_bytes()
    return data, ends


def test_repair_keeps_exactly_the_complete_batches_at_any_cut(tmp_path: Path, no_fsync: None) -> None:
    batch_sizes = [3, 1, 5, 2, 4]
    data, ends = write_crashed_stream(tmp_path / "source", batch_sizes)
    assert data[:8] == b"ARROW1\x00\x00"  # an IPC file without its footer yet
    header = pa.BufferReader(data)
    header.seek(8)
    ipc.read_message(header)
    schema_end = header.tell()  # a cut here leaves a valid stream with no batch
    rng = random.Random(20250301)
    cuts = set(rng.sample(range(len(data) + 1), 150)) | {0, 1, 7, 8, len(data)}
    cuts |= {end + d for end in ends for d in (-1, 0, 1) if 0 <= end + d <= len(data)}
    trials = tmp_path / "cut" / "trials"
    for cut in sorted(cuts):
        trials.mkdir(parents=True, exist_ok=True)
        stream = trials / "part-w0-00000.arrows"
        stream.write_bytes(data[:cut])
        notes = repair_parts(trials)
        kept = sum(1 for end in ends if end <= cut)
        rows = sum(batch_sizes[:kept])
        assert len(notes) == 1, cut
        note = notes[0]
        assert (note.batches, note.rows) == (kept, rows), cut
        assert note.torn_tail == (cut not in {0, schema_end, *ends}), cut
        assert not stream.exists()
        assert not list(trials.glob("*.tmp"))
        if kept:
            assert note.part == trials / "part-w0-00000.arrow"
            assert ids_of(trials.parent) == {f"{i:08d}" for i in range(rows)}, cut
            table = ipc.open_file(pa.memory_map(str(note.part))).read_all()
            assert table.to_pylist() == [expected(full_row(i)) for i in range(rows)]
        else:
            assert note.part is None and list(trials.iterdir()) == []
        for path in trials.iterdir():
            path.unlink()


def test_repair_of_a_part_ending_at_a_batch_reports_no_torn_tail(tmp_path: Path) -> None:
    trials = tmp_path / "trials"
    trials.mkdir()
    with pa.OSFile(str(trials / "part-w0-00000.arrows"), "wb") as f:
        ChecksummedWriter(f, with_scheme(SCHEMA)).write_batch(to_record_batch([ids_row(0), ids_row(1)], SCHEMA))
    [note] = repair_parts(trials)
    assert (note.batches, note.rows, note.torn_tail, note.already_finalized) == (1, 2, False, False)
    assert str(note) == "part-w0-00000.arrows -> part-w0-00000.arrow: kept 1 batches (2 rows)"


def test_crash_between_rename_and_delete_gives_no_duplicates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Killed(Exception):
        pass

    real_rename = os.rename

    def dies_before_renaming_the_part(src: Any, *args: Any, **kwargs: Any) -> None:
        if str(src).endswith(".arrows"):
            raise Killed(src)
        real_rename(src, *args, **kwargs)

    sink = TrialSink(tmp_path, SCHEMA, batch_rows=3)
    for i in range(10):
        sink.append(ids_row(i))
    monkeypatch.setattr(os, "rename", dies_before_renaming_the_part)
    with pytest.raises(Killed):
        sink.close()
    monkeypatch.setattr(os, "rename", real_rename)
    assert files(tmp_path) == ["part-w0-00000.arrows"]

    [note] = repair_parts(tmp_path / "trials")
    assert note.rows == 10 and not note.torn_tail  # the footer was written: renamed as it is
    assert files(tmp_path) == ["part-w0-00000.arrow"]
    frame = rows_of(tmp_path)
    assert frame.height == 10 and frame["trial_id"].n_unique() == 10


def test_repair_deletes_leftover_tmp_and_refinalizes_from_the_stream(tmp_path: Path) -> None:
    sink = TrialSink(tmp_path, SCHEMA, batch_rows=2)
    for i in range(5):
        sink.append(ids_row(i))  # crash: never closed; 4 rows flushed
    trials = tmp_path / "trials"
    (trials / "part-w0-00000.arrow.tmp").write_bytes(b"ARROW1\x00\x00half a file")
    [note] = repair_parts(trials)
    assert (note.batches, note.rows) == (2, 4)
    assert files(tmp_path) == ["part-w0-00000.arrow"]
    assert ids_of(trials.parent) == {f"{i:08d}" for i in range(4)}


def test_repair_on_garbage_and_empty_streams_never_raises(tmp_path: Path) -> None:
    trials = tmp_path / "trials"
    trials.mkdir()
    (trials / "part-w0-00000.arrows").write_bytes(b"")
    (trials / "part-w0-00001.arrows").write_bytes(os.urandom(300))
    (trials / "part-w0-00002.arrows").write_bytes(b"\xff\xff\xff\xff" + b"\x00" * 20)
    notes = repair_parts(trials)
    assert [(n.batches, n.part) for n in notes] == [(0, None)] * 3
    assert [n.torn_tail for n in notes] == [False, True, True]
    assert all("no complete batch" in str(n) for n in notes)
    assert list(trials.iterdir()) == []


def test_repair_and_completed_ids_on_missing_or_clean_dirs(tmp_path: Path) -> None:
    assert repair_parts(tmp_path / "nope") == []
    assert len(completed_trial_keys(tmp_path / "nope")) == 0
    with TrialSink(tmp_path, SCHEMA) as sink:
        sink.append(ids_row(0))
    assert repair_parts(tmp_path / "trials") == []
    assert ids_of(tmp_path) == {"00000000"}


def test_completed_keys_refuse_unrepaired_streams(tmp_path: Path) -> None:
    sink = TrialSink(tmp_path, SCHEMA)
    sink.append(ids_row(0))
    sink.flush()
    with pytest.raises(RuntimeError, match="repair_parts"):
        completed_trial_keys(tmp_path / "trials")  # what a resume skips: never an answer missing the stream's rows
    sink.close()
    assert completed_trial_keys(tmp_path / "trials").tolist() == trial_keys(pa.array(["00000000"])).tolist()


def test_resume_adds_parts_beside_repaired_ones(tmp_path: Path) -> None:
    crashed = TrialSink(tmp_path, SCHEMA, batch_rows=2)
    for i in range(5):
        crashed.append(ids_row(i))
    notes = repair_parts(tmp_path / "trials")
    assert [(n.stream.name, n.rows) for n in notes] == [("part-w0-00000.arrows", 4)]
    done = ids_of(tmp_path)
    with TrialSink(tmp_path, SCHEMA, batch_rows=2) as resumed:
        for i in range(8):
            if f"{i:08d}" not in done:
                resumed.append(ids_row(i))
    frame = rows_of(tmp_path).sort("trial_id")
    assert frame["trial_id"].to_list() == [f"{i:08d}" for i in range(8)]
    assert files(tmp_path) == ["part-w0-00000.arrow", "part-w0-00001.arrow"]


# --- a real SIGKILL -------------------------------------------------------------------

WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    import pyarrow as pa
    from runner.output.sink import TrialSink

    schema = pa.schema([("trial_id", pa.string()), ("tools_called", pa.list_(pa.string())),
                        ("response_text", pa.string())])
    sink = TrialSink(Path(sys.argv[1]), schema, batch_rows=int(sys.argv[2]), flush_seconds=1e9)
    reported = 0
    for i in range(200_000):
        sink.append({"trial_id": f"{i:08d}", "tools_called": ["lookup"] * (i % 3),
                     "response_text": "x" * (i % 200)})
        if sink.rows_written != reported:
            reported = sink.rows_written
            print(reported, flush=True)
    print("finished", flush=True)
    """
)


def test_sigkill_mid_run_keeps_exactly_the_flushed_batches(tmp_path: Path) -> None:
    batch = 100
    repo = Path(sink_module.__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path), str(batch)],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    assert proc.stdout is not None
    flushed = 0
    try:
        for line in proc.stdout:
            assert line.strip() != "finished", "the writer finished before it could be killed"
            flushed = int(line)
            if flushed >= 2_000:
                proc.send_signal(signal.SIGKILL)
                break
    finally:
        proc.kill()
        proc.wait(timeout=30)
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL

    trials = tmp_path / "trials"
    notes = repair_parts(trials)
    assert len(notes) == 1 and notes[0].part is not None
    ids = ids_of(trials.parent)
    k = len(ids)
    assert k % batch == 0 and k >= flushed
    assert ids == {f"{i:08d}" for i in range(k)}
    assert notes[0].rows == k
    frame = rows_of(tmp_path)
    assert frame.height == k and frame["trial_id"].n_unique() == k


def test_repair_note_is_one_line() -> None:
    note = RepairNote(Path("t/part-w0-00003.arrows"), Path("t/part-w0-00003.arrow"), 12, 4800, True)
    assert str(note) == "part-w0-00003.arrows -> part-w0-00003.arrow: kept 12 batches (4800 rows), dropped a torn tail"


def test_trial_keys_parse_hex_ids_vectorised_and_skip_done_filters_exactly() -> None:
    from runner.core.types import TrialSpec
    from runner.execution.grid import skip_done
    from runner.output.keys import trial_keys

    ids = [f"{i * 0x9E3779B97F4A7C15 & (2**64 - 1):016x}" for i in range(10_000)]
    keys = trial_keys(pa.array(ids))
    assert keys.dtype == np.uint64 and keys.tolist() == [int(x, 16) for x in ids]
    assert trial_keys(pa.array(["ab", "ff"])).tolist() == [0xAB, 0xFF]  # not 16 chars: slow path
    sliced = pa.array(ids)[5:9]
    assert trial_keys(sliced).tolist() == [int(x, 16) for x in ids[5:9]]
    done = np.sort(keys[::3])
    specs = [TrialSpec("s", t, "m", "p", "c", "x", i, i, i) for i, t in enumerate(ids)]
    kept = [s.trial_id for s in skip_done(iter(specs), done, chunk=777)]
    assert kept == [t for i, t in enumerate(ids) if i % 3]
