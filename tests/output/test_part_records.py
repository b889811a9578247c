"""Uniqueness is an invariant the writer keeps and records per part, so readers do not check every row.

Each part a session writes names the session (as the manifest lists it) and how many older rows it may
supersede (``runner.output.parts.PartRecord``). Readers trust a complete set of records; a part without one,
or naming a session the manifest does not hold, sends them back to the full check, which still resolves every
duplicate exactly as before. The resume skips done trials by grid index, never rebuilding their specs, and
ends equal to an uninterrupted run, row for row.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import pytest

import runner
from runner.config.sweep import load_sweep
from runner.core.manifest import MANIFEST, RunStatus, read_manifest
from runner.execution.grid import Grid, grid_of
from runner.output import Output
from runner.output.checksums import CHECKSUMS_KEY
from runner.output.parts import SESSION_KEY, SUPERSEDES_KEY, latest, proven_rows, session_token, sorted_unique
from tests.helpers.rows import write_part, written_rows
from tests.providers.conftest import outcomes


def copy_of(built: tuple[Path, Path], tmp_path: Path) -> Path:
    shutil.copytree(built[1], tmp_path / "out")
    return tmp_path / "out"


def rewrite(part: Path, dest: Path, *, metadata: dict[bytes, bytes] | None = None,
            keep: slice | None = None, table: pa.Table | None = None) -> None:
    """``part`` rewritten to ``dest``: its schema metadata replaced, its batches cut, or its rows replaced."""
    original = ipc.open_file(str(part)).read_all()
    table = original if table is None else table
    kept = metadata if metadata is not None else original.schema.metadata
    schema = table.schema.with_metadata({k: v for k, v in (kept or {}).items() if k != CHECKSUMS_KEY})
    batches = table.cast(schema).to_batches(max_chunksize=16)
    write_part(dest, batches[keep] if keep is not None else batches, schema)


def the_part(out: Path) -> Path:
    (part,) = sorted((out / "trials").glob("*.arrow"))
    return part


def test_a_sessions_part_records_its_session_and_readers_trust_it(built: tuple[Path, Path]) -> None:
    _, out = built
    metadata = ipc.open_file(str(the_part(out))).schema.metadata
    manifest = read_manifest(out)
    assert manifest is not None
    assert metadata[SESSION_KEY].decode() == session_token(0, manifest.sessions[0])
    assert metadata[SUPERSEDES_KEY] == b"0"
    output = Output.open(out)
    assert output.unique is True  # no row read to decide
    frame = output.scan().collect()
    assert frame.height == frame["trial_id"].n_unique() == 234 == written_rows(out).height


@pytest.mark.parametrize("record", ["none", "unknown session", "damaged"])
def test_a_part_without_a_trusted_record_falls_back_to_the_full_check(built: tuple[Path, Path], tmp_path: Path,
                                                                      record: str) -> None:
    out = copy_of(built, tmp_path)
    part = the_part(out)
    metadata = dict(ipc.open_file(str(part)).schema.metadata)
    if record == "none":  # a part whose writer records no session
        metadata = {k: v for k, v in metadata.items() if k not in (SESSION_KEY, SUPERSEDES_KEY)}
    elif record == "unknown session":  # copied in from another output of the same sweep
        metadata[SESSION_KEY] = b"0|2026-01-01T00:00:00+00:00|1"
    else:
        metadata[SUPERSEDES_KEY] = b"many"
    # the same trials again, in a second part carrying that record: every one of them is a duplicate
    rewrite(part, part.with_name("part-copy-00000.arrow"), metadata=metadata)
    output = Output.open(out)
    assert output.unique is None
    frame = output.scan().collect()
    assert written_rows(out).height == 2 * 234
    assert frame.height == frame["trial_id"].n_unique() == 234


def test_a_retry_session_records_what_it_supersedes_and_every_reader_takes_the_newest_row(
        built: tuple[Path, Path], tmp_path: Path) -> None:
    sweep, _ = built
    out = copy_of(built, tmp_path)
    part = the_part(out)
    table = ipc.open_file(str(part)).read_all()
    failed = np.arange(table.num_rows) % 5 == 0  # every fifth trial ended as a transient error
    edited = table
    for name, value in (("status", "error"), ("error_kind", "transient")):
        column = table.column(name).combine_chunks()
        edited = edited.set_column(table.schema.get_field_index(name), table.schema.field(name),
                                   pc.if_else(pa.array(failed), pa.scalar(value, column.type), column))
    rewrite(part, part, table=edited)
    assert Output.open(out).unique is True  # the first session's record: no trial repeats yet

    runner.run(load_sweep(sweep), out, quiet=True, retry_errors=("transient",))
    output = Output.open(out)
    assert output.unique is False  # the retry's part says it supersedes rows
    newest = [p for p in sorted((out / "trials").glob("*.arrow")) if p != part]
    assert ipc.open_file(str(newest[0])).schema.metadata[SUPERSEDES_KEY] == str(int(failed.sum())).encode()
    frame = output.scan().collect()
    assert written_rows(out).height == 234 + int(failed.sum())
    assert frame.height == frame["trial_id"].n_unique() == 234
    assert frame.filter(pl.col("status") != "ok").height == 0
    assert outcomes(frame).equals(outcomes(runner.load(built[1]).collect()))
    # only the retried trials were sorted (parts.py, _latest_retried); the rows are the full sort's, row for row
    full = latest(pl.scan_ipc([str(p) for p in output.parts], glob=False)).collect()
    assert frame.sort("trial_id").equals(full.sort("trial_id"))


def test_a_whole_output_is_proven_whole_by_its_footers_and_no_row_is_read(
        built: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sweep, _ = built
    out = copy_of(built, tmp_path)
    manifest = read_manifest(out)
    assert manifest is not None and proven_rows([the_part(out)], manifest) == 234

    def no_rows(*_: object) -> None:
        raise AssertionError("a resume of a whole output read its rows")

    monkeypatch.setattr(Grid, "indexes", no_rows)
    result = runner.run(load_sweep(sweep), out, quiet=True)
    assert result.skipped == 234 and result.stats.done == 0 and result.exit_code == 0


def test_footers_prove_nothing_without_a_trusted_record_or_a_seal(built: tuple[Path, Path], tmp_path: Path) -> None:
    out = copy_of(built, tmp_path)
    part = the_part(out)
    manifest = read_manifest(out)
    assert manifest is not None
    rewrite(part, part, keep=slice(None, None, 3))  # batches lost: the seal counts what is left
    kept = written_rows(out).height
    assert proven_rows([part], manifest) == kept < 234
    metadata = dict(ipc.open_file(str(part)).schema.metadata)
    metadata[SESSION_KEY] = b"0|2026-01-01T00:00:00+00:00|1"  # copied in from another output of the same sweep
    rewrite(part, part, metadata=metadata)
    assert proven_rows([part], manifest) is None
    with pa.OSFile(str(part), "wb") as sink:  # a part without a seal (or a footer)
        sink.write(b"ARROW1\0\0")
    assert proven_rows([part], manifest) is None


def test_a_resume_after_losing_batches_in_the_middle_equals_an_uninterrupted_run(
        built: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sweep, reference = built
    out = copy_of(built, tmp_path)
    part = the_part(out)
    rewrite(part, part, keep=slice(None, None, 3))  # two batches in three lost, the first and last kept
    kept = written_rows(out).height
    assert 0 < kept < 234
    built_specs: list[int] = []
    spec_at = Grid.spec_at

    def counted(self: Grid, index: int):  # type: ignore[no-untyped-def]
        built_specs.append(index)
        return spec_at(self, index)

    monkeypatch.setattr(Grid, "spec_at", counted)
    result = runner.run(load_sweep(sweep), out, quiet=True)
    assert result.skipped == kept and result.stats.done == 234 - kept
    assert len(built_specs) == 234 - kept  # only the specs left were built
    rows = written_rows(out)
    assert rows.height == rows["trial_id"].n_unique() == 234
    assert outcomes(runner.load(out).collect()).equals(outcomes(runner.load(reference).collect()))


def test_the_grid_by_index_is_the_grid_in_order(built: tuple[Path, Path]) -> None:
    sweep, out = built
    grid = grid_of(load_sweep(sweep))
    specs = list(grid)
    assert grid.indexable
    assert [grid.spec_at(i) for i in range(len(grid))] == specs
    rng = np.random.default_rng(7)
    for done in (np.array([0]), np.array([len(grid) - 1]), np.sort(rng.choice(len(grid), 100, replace=False)),
                 np.arange(len(grid))):
        skip = set(done.tolist())
        assert list(grid.pending(done, chunk=50)) == [s for i, s in enumerate(specs) if i not in skip]
    rows = runner.load(out).select("probe", "case_id", "condition", "run", "model").collect().to_arrow()
    assert grid.indexes(rows.to_batches(max_chunksize=7)).tolist() == list(range(len(grid)))
    s = specs[5]
    stray = pa.table({"probe": ["misselection", "nope", s.probe, s.probe, s.probe, None],
                      "case_id": [s.case_id] * 6, "condition": [s.condition] * 6,
                      "run": [s.run, s.run, 10**6, s.run, -1, s.run], "model": [s.model] * 3 + ["nobody", s.model, s.model]})
    # rows naming no cell of the grid (another probe, a run past the cell's runs, another model, none) are left out
    assert grid.indexes(stray.to_batches()).tolist() == [5]


def test_sorted_unique_is_np_unique_of_sorted_keys() -> None:
    rng = np.random.default_rng(3)
    for keys in (np.empty(0, np.uint64), np.array([5], np.uint64), np.sort(rng.integers(0, 50, 400).astype(np.uint64)),
                 np.arange(100, dtype=np.uint64)):
        assert np.array_equal(sorted_unique(keys), np.unique(keys))


def test_a_crashed_session_records_the_rows_it_wrote(built: tuple[Path, Path], tmp_path: Path) -> None:
    sweep, _ = built
    out = copy_of(built, tmp_path)
    part = the_part(out)
    rewrite(part, part, keep=slice(0, 5))  # it died after 5 batches of 16 rows
    data = json.loads((out / MANIFEST).read_text())
    data["sessions"][0].update(status="running", finished_at=None, trials_run=0, elapsed_s=None)
    data["status"] = "running"
    (out / MANIFEST).write_text(json.dumps(data))
    runner.run(load_sweep(sweep), out, quiet=True)
    manifest = read_manifest(out)
    assert manifest is not None
    first, second = manifest.sessions
    assert first.status == RunStatus.CRASHED and first.trials_run == 80
    assert second.status == RunStatus.COMPLETE and second.trials_run == 234 - 80
