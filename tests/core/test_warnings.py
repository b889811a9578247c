"""Warnings are ``TrialgridWarning``s through ``warnings``: a notebook or script sees what the CLI prints.

Before this, a warning was a ``"warning: ..."`` string handed to the CLI's printer, so
``runner.run(...)`` from Python said nothing about a sweep with too few runs or a local
server that will queue.
"""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from runner.cli.app import app
from runner.config.sweep import load_sweep
from runner.core.errors import TrialgridWarning, warn
from tests.conftest import ROOT, quickstart_dict

FEW_RUNS = "runs=2 is fewer than 5 per cell"
QUEUES = "queues the rest"


def _warning_sweep(tmp_path: Path) -> Path:
    """The quickstart with 2 runs per cell (too few) and one model on a local server that will queue."""
    data = quickstart_dict()
    data["models"] = data["models"][:1] + [{"name": "local", "provider": "openai", "model": "m",
                                             "base_url": "http://127.0.0.1:9/v1", "api_key_env": None,
                                             "timeout_s": 0.5, "retry": {"max_attempts": 1}, "concurrency": 2}]
    data["probes"][0]["runs"] = 2
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_runner_run_in_a_script_shows_the_sweeps_warnings_on_stderr(tmp_path: Path) -> None:
    sweep = _warning_sweep(tmp_path)
    # no preflight: the local model's server is not running, on purpose (its trials are error rows)
    script = f"import runner; runner.run({str(sweep)!r}, {str(tmp_path / 'out')!r}, quiet=True, preflight=False)"
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "TrialgridWarning" in proc.stderr
    assert FEW_RUNS in proc.stderr and QUEUES in proc.stderr
    # reported at the script's line, not inside trialgrid
    assert "<string>:1: TrialgridWarning" in proc.stderr


def test_load_sweep_warns_through_the_warnings_module_at_the_callers_line(tmp_path: Path) -> None:
    sweep = _warning_sweep(tmp_path)
    with pytest.warns(TrialgridWarning) as caught:
        loaded = load_sweep(sweep)
    messages = [str(w.message) for w in caught]
    assert messages == loaded.warnings and len(messages) == 1  # the local server's is said when a run starts
    assert FEW_RUNS in messages[0]
    assert all(w.filename == __file__ for w in caught)
    assert issubclass(TrialgridWarning, UserWarning)


def test_the_cli_prints_each_warning_as_one_yellow_line_even_when_quiet(tmp_path: Path) -> None:
    sweep = _warning_sweep(tmp_path)
    for _ in range(2):  # every command says them again: no once-per-process dedup in the CLI
        result = CliRunner().invoke(app, ["run", str(sweep), "--out", str(tmp_path / "out"), "--quiet",
                                          "--no-preflight"])
        assert result.exit_code in (0, 3), result.stderr  # 3: the local model's trials are error rows
        lines = result.stderr.splitlines()
        assert [line for line in lines if FEW_RUNS in line] == [line for line in lines if line.startswith("warning: ")
                                                               and FEW_RUNS in line]
        assert sum(FEW_RUNS in line for line in lines) == 1 and sum(QUEUES in line for line in lines) == 1
        assert "TrialgridWarning" not in result.stderr


def test_the_cli_hook_leaves_other_warnings_and_python_state_alone() -> None:
    from runner.cli.console import warnings_as_lines

    before = warnings.showwarning
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with warnings_as_lines():
            warnings.warn("not ours", RuntimeWarning, stacklevel=1)
    assert warnings.showwarning is before
    assert [(w.category, str(w.message)) for w in caught] == [(RuntimeWarning, "not ours")]


def test_warn_is_a_trialgrid_warning() -> None:
    with pytest.warns(TrialgridWarning, match="^something to know$"):
        warn("something to know")


def test_a_repeated_warning_is_shown_again_unless_the_user_filters_it(tmp_path: Path) -> None:
    script = ("import warnings, runner\n"
              "from runner.core.errors import warn\n"
              "for _ in range(2): warn('again')\n"
              "warnings.simplefilter('ignore', runner.TrialgridWarning)\n"
              "warn('silenced')\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("TrialgridWarning: again") == 2 and "silenced" not in proc.stderr
