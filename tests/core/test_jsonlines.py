"""The one JSON lines reader: numbered lines, blank ones skipped, every bad line yielded in its place."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from runner.core.errors import UserError
from runner.core.jsonlines import BadLine, json_lines, read_json_lines


def _read(data: bytes, limit: int = 1 << 20) -> list[tuple[int, object]]:
    return list(json_lines(io.BytesIO(data), limit))


def test_lines_are_numbered_from_one_and_blank_lines_skipped() -> None:
    assert _read(b'{"a": 1}\n\n  \n[2]\n"three"') == [(1, {"a": 1}), (4, [2]), (5, "three")]


def test_what_orjson_refuses_and_json_reads_is_read() -> None:
    huge = 2 ** 70
    got = _read(b'{"x": NaN}\n' + json.dumps({"n": huge}).encode() + b"\n\xef\xbb\xbf{\"bom\": true}\n")
    assert got[0][1]["x"] != got[0][1]["x"]  # NaN  # type: ignore[index]
    assert got[1] == (2, {"n": huge}) and got[2] == (3, {"bom": True})


@pytest.mark.parametrize("line, reason", [(b'{"cut": ', "not JSON"), (b"\xff\xfe\x00garbage", "not JSON"),
                                          (b"[" * 100_000 + b"]" * 100_000, "not JSON")])
def test_a_bad_line_is_yielded_in_its_place_and_reading_goes_on(line: bytes, reason: str) -> None:
    got = _read(b"[1]\n" + line + b"\n[3]\n", limit=1 << 20)
    assert got[0] == (1, [1]) and got[2] == (3, [3])
    number, bad = got[1]
    assert number == 2 and isinstance(bad, BadLine) and bad.reason == reason and bad.number == 2 and bad.detail


def test_a_line_over_the_limit_is_never_held_and_is_one_bad_line() -> None:
    got = _read(b"[1]\n" + b"x" * 5000 + b"\n[3]\n", limit=100)
    assert [n for n, _ in got] == [1, 2, 3]
    bad = got[1][1]
    assert isinstance(bad, BadLine) and bad.reason == "line too long" and bad.raw is None and "5,001" in bad.detail


def test_read_json_lines_refuses_what_is_not_a_regular_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="case file"):
        list(read_json_lines(tmp_path, what="case file"))
