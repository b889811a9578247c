"""Parts that know they are damaged. 200 seeded single-bit flips across a finished run's parts.

Each flip is either detected — every reader refuses the output in one ``UserError`` line that names the part and
says to rerun — or provably harmless: the rows read back equal the originals. None changes a value silently and
none raises anything else. A rerun after a detected flip sets the part aside in ``trials/damaged/``, keeps its
verified batches and ends equal to an undamaged run. ``benchmarks/part_checksums.py --flips N`` runs more.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

import runner
from runner.analysis.completeness import incomplete_lines
from runner.analysis.leaderboard import summarize
from runner.config.sweep import load_sweep
from runner.core.errors import UserError
from runner.output import Output
from runner.output.checksums import CHECKSUMS_KEY, NO_CHECKSUMS, verify_part
from tests.helpers.rows import written_rows
from tests.providers.conftest import outcomes

FLIPS = 200
SEED = 31


def flip(path: Path, bit: int) -> None:
    data = bytearray(path.read_bytes())
    data[bit // 8] ^= 1 << (bit % 8)
    path.write_bytes(bytes(data))


def read_back(out: Path) -> pl.DataFrame | UserError:
    """What every reader sees: the output opened (manifest, footers, checksums) and every trial's newest row."""
    try:
        return Output.open(out).scan().collect().sort("trial_id")
    except UserError as exc:
        return exc


def flips(out: Path, count: int, seed: int) -> list[tuple[Path, int]]:
    """``count`` (part, bit) pairs, each bit uniform over all the parts' bits."""
    parts = sorted((out / "trials").glob("*.arrow"))
    sizes = [p.stat().st_size * 8 for p in parts]
    rng = random.Random(seed)
    picked = []
    for _ in range(count):
        at = rng.randrange(sum(sizes))
        for part, size in zip(parts, sizes, strict=True):
            if at < size:
                picked.append((part, at))
                break
            at -= size
    return picked


def test_every_flip_is_detected_or_harmless(built: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    shutil.copytree(built[1], out)
    original = read_back(out)
    assert isinstance(original, pl.DataFrame) and original.height == 234
    detected = harmless = 0
    for part, bit in flips(out, FLIPS, SEED):
        flip(part, bit)
        try:
            seen = read_back(out)
        finally:
            flip(part, bit)  # undo: the next flip starts from the undamaged part
        if isinstance(seen, UserError):
            line = str(seen)
            assert "\n" not in line and part.name in line and "rerun the sweep" in line, (bit, line)
            detected += 1
        else:
            assert seen.equals(original), f"bit {bit} of {part.name} changed values silently"
            harmless += 1
    assert detected + harmless == FLIPS
    print(f"{detected} detected, {harmless} harmless")
    assert detected > FLIPS // 2  # seed 31: 176 detected, 24 harmless (the schema copy at the start, padding)


@pytest.mark.parametrize("where", ["body", "footer", "schema_at_start"])
def test_a_rerun_after_a_flip_sets_the_part_aside_and_equals_an_undamaged_run(
        built: tuple[Path, Path], tmp_path: Path, where: str) -> None:
    sweep, reference = built
    out = tmp_path / "out"
    shutil.copytree(reference, out)
    part = sorted((out / "trials").glob("*.arrow"))[0]
    size = part.stat().st_size * 8
    bit = {"body": size // 2, "footer": size - 8 * 40, "schema_at_start": 8 * 40}[where]
    flip(part, bit)
    seen = read_back(out)
    if isinstance(seen, pl.DataFrame):  # file readers skip the schema copy at the start: harmless
        assert where == "schema_at_start" and seen.equals(read_back(reference))
        return
    with pytest.warns(UserWarning, match=f"damaged part {part.name}"):
        runner.run(load_sweep(sweep), out, quiet=True)
    assert (out / "trials" / "damaged" / part.name).exists()
    rows = written_rows(out)
    assert rows.height == rows["trial_id"].n_unique() == 234
    assert outcomes(runner.load(out).collect()).equals(outcomes(runner.load(reference).collect()))
    # the report names what the rerun set aside, above its first table
    assert [line for line in incomplete_lines(summarize([out])) if line.startswith("set aside:")] == [
        "set aside: 1 part file that did not read whole (a torn end or a failed checksum), in trials/damaged/ — a "
        "rerun kept every verified batch and ran the other trials again, so the rates read none of it; delete the "
        "folder once you no longer need it"]


def test_a_part_without_checksums_is_refused_in_one_line(built: tuple[Path, Path], tmp_path: Path) -> None:
    """Every part trialgrid writes carries checksums: one without (another tool's, or an old trialgrid's) is
    refused, not read unverified."""
    out = tmp_path / "out"
    shutil.copytree(built[1], out)
    part = sorted((out / "trials").glob("*.arrow"))[0]
    table = ipc.open_file(str(part)).read_all()
    bare = table.schema.with_metadata({k: v for k, v in (table.schema.metadata or {}).items() if k != CHECKSUMS_KEY})
    for schema in (bare, table.schema):  # no scheme key at all; the schema copied, its key kept, no batch checksum
        with pa.OSFile(str(part), "wb") as sink, ipc.new_file(sink, schema) as writer:
            for batch in table.cast(schema).to_batches(max_chunksize=16):
                writer.write_batch(batch)
        assert verify_part(ipc.open_file(str(part))).problem == NO_CHECKSUMS
        seen = read_back(out)
        assert isinstance(seen, UserError) and "carries no checksums" in str(seen) and "\n" not in str(seen)
    with pa.OSFile(str(part), "wb") as sink, ipc.new_file(sink, table.schema) as writer:  # the key, no batch at all
        pass
    seen = read_back(out)
    assert isinstance(seen, UserError) and "seal is missing" in str(seen)
