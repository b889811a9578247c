"""A part's checksums are read once per change of the part, not on every open (``runner.output.verified``)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

import runner.output.checksums as checksums
import runner.output.parts as parts_module
import runner.output.verified as verified
from runner.core.errors import UserError
from runner.output import Output


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """The parts whose checksums are read, in order; a fresh record folder and process record."""
    seen: list[str] = []
    real = checksums.verify_part

    def counting(reader: object) -> checksums.Verdict:
        seen.append("verify")
        return real(reader)  # type: ignore[arg-type]

    monkeypatch.setattr(parts_module, "verify_part", counting)
    monkeypatch.setenv("TRIALGRID_VERIFIED_DIR", str(tmp_path / "verified"))
    verified.forget()
    yield seen  # type: ignore[misc]
    verified.forget()


def _copy(built: tuple[Path, Path], tmp_path: Path) -> tuple[Path, int]:
    out = tmp_path / "out"
    shutil.copytree(built[1], out)
    return out, len(list((out / "trials").glob("*.arrow")))


def _age(out: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As if the parts were written long ago: the racy window no longer covers them."""
    monkeypatch.setattr(verified, "RACY_S", 0.0)
    time.sleep(0.05)  # past the file system's timestamp tick: a later write gets a later ctime


def test_a_verified_part_is_not_verified_again_by_a_later_process(
        built: tuple[Path, Path], tmp_path: Path, checks: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    out, n = _copy(built, tmp_path)
    _age(out, monkeypatch)
    Output.open(out)
    assert len(checks) == n
    verified.forget()  # another process: only the record on disk remains
    Output.open(out)
    assert len(checks) == n
    assert len(list((tmp_path / "verified").rglob("*"))) >= n


def test_a_part_changed_after_it_verified_is_verified_again_and_a_flip_is_caught(
        built: tuple[Path, Path], tmp_path: Path, checks: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    out, _ = _copy(built, tmp_path)
    _age(out, monkeypatch)
    Output.open(out)
    part = sorted((out / "trials").glob("*.arrow"))[0]
    data = bytearray(part.read_bytes())
    middle = len(data) // 2
    data[middle] ^= 0x10  # same size, and the mtime set back: only the ctime says it changed
    before = part.stat()
    part.write_bytes(bytes(data))
    os.utime(part, ns=(before.st_atime_ns, before.st_mtime_ns))
    checks.clear()
    try:
        Output.open(out)
    except UserError as exc:
        assert part.name in str(exc)
    assert checks, "the changed part was trusted without reading it"


def test_a_part_just_written_is_not_recorded_on_disk(
        built: tuple[Path, Path], tmp_path: Path, checks: list[str]) -> None:
    out, n = _copy(built, tmp_path)  # just copied: inside the racy window
    Output.open(out)
    Output.open(out)
    assert len(checks) == 2 * n  # not even this process trusts a check made in the racy window
    assert not list((tmp_path / "verified").rglob("*"))


def test_off_records_nothing_on_disk_and_each_process_verifies_once(
        built: tuple[Path, Path], tmp_path: Path, checks: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    out, n = _copy(built, tmp_path)
    _age(out, monkeypatch)
    monkeypatch.setenv("TRIALGRID_VERIFIED_DIR", "off")
    Output.open(out)
    Output.open(out)
    assert len(checks) == n
    verified.forget()
    Output.open(out)
    assert len(checks) == 2 * n
    assert not (tmp_path / "verified").exists()


def test_an_unwritable_record_folder_only_means_verifying_again(
        built: tuple[Path, Path], tmp_path: Path, checks: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    out, n = _copy(built, tmp_path)
    _age(out, monkeypatch)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("TRIALGRID_VERIFIED_DIR", str(blocker / "verified"))
    Output.open(out)
    verified.forget()
    Output.open(out)
    assert len(checks) == 2 * n


def test_the_writer_does_not_read_back_the_parts_it_just_wrote(
        tmp_path: Path, checks: list[str]) -> None:
    import runner
    from runner.config.sweep import load_sweep
    from tests.helpers import quickstart_sweep

    sweep = quickstart_sweep(tmp_path, runs=1)
    result = runner.run(load_sweep(sweep), tmp_path / "out", quiet=True)
    assert sum(result.counts.values()) == 117
    assert checks == []  # the session's finish counted its own parts without reading their bytes again
    verified.forget()
    Output.open(tmp_path / "out")  # a later process reads and checks them
    assert checks
