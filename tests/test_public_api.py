"""``runner``'s public names: pinned, each resolvable, and ``import runner`` stays light (no numba/polars/pyarrow)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import runner

ROOT = Path(__file__).resolve().parents[1]
PUBLIC = ["ChatRequest", "ChatResponse", "ErrorKind", "Grid", "LoadedSweep", "Message", "ProviderError", "RunOptions",
          "RunResult", "RunStatus", "Sweep", "ToolCall", "ToolSpec", "TrialSpec", "TrialgridError", "TrialgridWarning",
          "Usage", "UserError", "load", "load_summary", "load_sweep", "run"]
HEAVY = ("numba", "polars", "pyarrow")


def test_all_is_pinned() -> None:
    assert sorted(runner.__all__) == PUBLIC
    assert set(runner.__all__) <= set(dir(runner))


@pytest.mark.parametrize("name", PUBLIC)
def test_every_public_name_resolves(name: str) -> None:
    value = getattr(runner, name)
    assert value is not None
    assert getattr(value, "__name__", name) == name


def test_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = runner.no_such_name


def _imported_modules(statement: str) -> list[str]:
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", statement], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    # stderr lines: "import time: self [us] | cumulative | imported package" (indented by nesting depth)
    return [line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
            if line.startswith("import time:") and line.count("|") == 2 and "imported package" not in line]


@pytest.mark.parametrize("statement", ["import runner", "import runner.core.types"])
def test_import_loads_no_heavy_dependency(statement: str) -> None:
    modules = _imported_modules(statement)
    assert "runner" in modules  # the parse found the import log
    heavy = [m for m in modules if m.split(".")[0] in HEAVY]
    assert not heavy, f"`{statement}` imported {heavy[:10]}"
