"""At ``COLUMNS=80`` no line ``validate`` or ``plan`` prints is over 80 characters; through a pipe, whole lines."""

from __future__ import annotations

import os

import pytest

from tests.helpers.cli import trialgrid

BUNDLED = ["quickstart.yaml", "negatives.yaml", "phantom.yaml", "propagation.yaml"]
PLAN = ["plan", "--arm-a", "0.09,0.17", "--arm-b", "0.017", "--sims", "60", "--prompts", "6,12", "--runs", "5,10"]


def _lines(*args: str, columns: str | None) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"} | ({"COLUMNS": columns} if columns else {})
    done = trialgrid(*args, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()  # (stderr: the interpreter's own runpy warning under python -m)


@pytest.mark.parametrize("args", [*(["validate", f"configs/{name}"] for name in BUNDLED), PLAN],
                         ids=[*BUNDLED, "plan"])
def test_every_line_fits_80_columns_and_a_pipe_keeps_them_whole(args: list[str]) -> None:
    narrow = _lines(*args, columns="80")
    assert max(len(line) for line in narrow) <= 80, max(narrow, key=len)
    whole = _lines(*args, columns=None)
    if args[0] == "validate":  # one line through a pipe, as a log wants it
        assert len([ln for ln in whole if ": ok — sweep" in ln]) == 1
