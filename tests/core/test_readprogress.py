"""A long read says how far it is, now and then: count, share of the file, rate; nothing for a short one."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.core import readprogress
from runner.core.readprogress import ReadProgress
from tests.helpers.messages import heard


def test_a_line_when_one_is_due_with_the_share_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"x" * 1000)
    with heard() as lines:
        ReadProgress(path, "traces audited", every=3600).update(10, 500)  # not due: nothing
        due = ReadProgress(path, "traces audited", every=0)
        due.update(1_234, 250)
        due.update(5_000, 5_000)  # a position past the size (a file that grew): never over 100%
    assert len(lines) == 2
    assert lines[0].startswith(f"{path}: 1,234 traces audited so far (25% of the file), ") and lines[0].endswith(
        " a second")
    assert "(100% of the file)" in lines[1]


def test_a_file_of_unknown_size_says_no_share(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(readprogress, "EVERY_S", 0.0)  # the default interval is read when a read starts
    with heard() as lines:
        ReadProgress(tmp_path / "gone.jsonl", "calls imported").update(7, 100)
    assert len(lines) == 1 and "7 calls imported so far, " in lines[0] and "% of the file" not in lines[0]
