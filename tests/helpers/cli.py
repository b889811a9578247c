"""Driving ``trialgrid``: in-process (typer's ``CliRunner``, ~0.1 s) unless the test is about the process.

A subprocess pays the interpreter and the imports (≈ 1 s of CPU each, several seconds on a loaded
machine), so ``trialgrid`` is kept for what only a real process shows: a signal, a kill, an exit
status set by the interpreter, two writers at once, the environment it inherits.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from typer.testing import CliRunner, Result

from tests.helpers.files import ROOT


def trialgrid(*args: str, timeout: float = 180, **kw: Any) -> subprocess.CompletedProcess[str]:
    """``python -m runner.cli.app ARGS`` in a child process, from the repository root; output captured as text."""
    kw.setdefault("env", os.environ.copy())
    return subprocess.run([sys.executable, "-m", "runner.cli.app", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, **kw)


def invoke(*args: str, **kw: Any) -> Result:
    """``trialgrid ARGS`` in this process (stdout and stderr kept apart, as a terminal shows them)."""
    from runner.cli.app import app

    return CliRunner().invoke(app, list(args), **kw)


def error_line(stderr: str) -> str:
    """The one ``error:`` line on ``stderr``; fails the test on a traceback or on more or fewer error lines."""
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, stderr
    return lines[0]


def invoke_error_line(result: Result, *, code: int = 2) -> str:
    """An in-process run ended with ``code`` and a single ``error:`` line on stderr (besides warnings and notes),
    no traceback and no exception escaping the CLI."""
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    assert "Traceback" not in result.output
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), result.exception
    lines = [line for line in result.stderr.splitlines()
             if line.strip() and not line.startswith(("warning: ", "note: "))]
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]
