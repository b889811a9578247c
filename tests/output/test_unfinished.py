"""The one reader of a part without its footer: what crash repair keeps is what the live view shows."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from runner.output.checksums import ChecksummedWriter, with_scheme
from runner.output.repair import salvage_part
from runner.output.unfinished import UnfinishedPart

SCHEMA = with_scheme(pa.schema([("trial_id", pa.string()), ("n", pa.int64())]))


def _batch(start: int, rows: int = 3) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"trial_id": [f"t{i}" for i in range(start, start + rows)],
                                       "n": list(range(start, start + rows))}, schema=SCHEMA)


def _writing(path: Path) -> tuple[pa.NativeFile, ChecksummedWriter]:
    sink = pa.OSFile(str(path), "wb")
    return sink, ChecksummedWriter(sink, SCHEMA)


def _ids(batches: list[pa.RecordBatch]) -> list[str]:
    return [t for b in batches for t in b.column("trial_id").to_pylist()]


def test_reads_resume_where_the_last_one_ended_and_a_torn_tail_waits(tmp_path: Path) -> None:
    path = tmp_path / "part-local-00000.arrows"
    sink, writer = _writing(path)
    part = UnfinishedPart(path)
    assert list(part.batches()) == [] and part.schema is None  # nothing flushed yet: no schema to read
    writer.write_batch(_batch(0))
    sink.flush()
    assert _ids(list(part.batches())) == ["t0", "t1", "t2"]
    first_end = part.offset
    writer.write_batch(_batch(3))
    writer.write_batch(_batch(6))
    sink.flush()
    size = path.stat().st_size
    with open(path, "r+b") as fh:  # the last batch cut short: not read, and read once complete
        fh.truncate(size - 5)
    assert _ids(list(part.batches())) == ["t3", "t4", "t5"] and part.torn and part.offset > first_end
    with open(path, "r+b") as fh:
        fh.truncate(first_end)  # back to where the first read ended: the file was replaced, the reader restarts
    part = UnfinishedPart(path)
    assert _ids(list(part.batches())) == ["t0", "t1", "t2"]
    sink.close()


def test_a_batch_whose_checksum_fails_is_left_out_by_the_live_view_and_by_repair(tmp_path: Path) -> None:
    path = tmp_path / "part-local-00000.arrows"
    sink, writer = _writing(path)
    for start in (0, 3, 6):
        writer.write_batch(_batch(start))
    sink.flush()
    offsets = []
    probe = UnfinishedPart(path)
    for _ in probe.batches():
        offsets.append(probe.offset)
    data = bytearray(path.read_bytes())
    data[offsets[1] - 9] ^= 0xFF  # a flipped bit in the second batch's body (its last value)
    path.write_bytes(bytes(data))
    live = UnfinishedPart(path)
    shown = _ids(list(live.batches()))
    assert shown == ["t0", "t1", "t2", "t6", "t7", "t8"] and live.failed == 1
    batches, rows, torn = salvage_part(path, tmp_path / "part-local-00000.arrow")
    assert (batches, rows, torn) == (2, 6, False)
    kept = pa.ipc.open_file(str(tmp_path / "part-local-00000.arrow")).read_all()
    assert kept.column("trial_id").to_pylist() == shown


def test_a_finished_part_reads_without_its_seal(tmp_path: Path) -> None:
    path = tmp_path / "part-local-00000.arrow"
    sink, writer = _writing(path)
    writer.write_batch(_batch(0))
    writer.close()
    sink.close()
    part = UnfinishedPart(path)
    assert _ids(list(part.batches())) == ["t0", "t1", "t2"] and not part.torn and part.failed == 0


def test_what_is_not_a_part_reads_as_nothing(tmp_path: Path) -> None:
    path = tmp_path / "junk.arrows"
    path.write_bytes(b"not an arrow file at all")
    part = UnfinishedPart(path)
    assert list(part.batches()) == [] and part.torn
