"""A damaged part under ``trialgrid view``: the viewer reads only the footers to show its first page, then checks
every batch's checksum in the background and refuses the output from then on (409), as every reader refuses it;
an export checks before it embeds anything."""

from __future__ import annotations

import json
import random
import shutil
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from runner.core.errors import UserError
from runner.output import Output
from runner.viewer.export import write_export
from runner.viewer.server import open_sources


def damaged_copy(quick_out: Path, dest: Path) -> Path:
    """A copy of ``quick_out`` with one bit flipped inside a batch's values: its footer still reads (the viewer
    opens it), but a strict open refuses it (a checksum fails)."""
    shutil.copytree(quick_out, dest)
    part = sorted((dest / "trials").glob("*.arrow"))[0]
    original = part.read_bytes()
    rng = random.Random(25)
    for _ in range(200):
        data = bytearray(original)
        at = rng.randrange(len(data) // 4, len(data) // 2)  # the body: batches, far from the footer at the end
        data[at] ^= 1 << rng.randrange(8)
        part.write_bytes(bytes(data))
        try:
            Output.open(dest, verify=False)
        except UserError:
            continue  # the flip broke the framing a footer read sees: not the case tested here
        try:
            Output.open(dest)
        except UserError:
            return dest
    pytest.fail("no flip in 200 was caught by the checksums alone")


def test_the_first_page_is_served_then_a_damaged_part_is_refused(quick_out: Path, tmp_path: Path,
                                                                   serve: Any) -> None:
    out = damaged_copy(quick_out, tmp_path / "out")
    with serve([out]) as url:
        status, body = 0, b""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the check runs in the background, at the latest WARM_AFTER_S after start
            try:
                with urllib.request.urlopen(url + "api/runs/0/trials?limit=5", timeout=30) as response:
                    status, body = response.status, response.read()
            except urllib.error.HTTPError as exc:
                status, body = exc.code, exc.read()
            if status != 200:
                break
            time.sleep(0.2)
        assert status == 409, (status, body[:200])
        assert "damaged trial part" in json.loads(body)["error"]
        with pytest.raises(urllib.error.HTTPError) as again:  # and every request after it
            urllib.request.urlopen(url + "api/runs", timeout=30)
        assert again.value.code == 409


def test_an_export_of_a_damaged_output_is_refused(quick_out: Path, tmp_path: Path) -> None:
    out = damaged_copy(quick_out, tmp_path / "out")
    with pytest.raises(UserError, match="damaged trial part"):
        write_export(open_sources([out]), tmp_path / "export")
    assert not (tmp_path / "export").exists()
