"""Cluster mode as a cheap plug-in: looking it up imports nothing heavy, and Ray is an extra.

Every ``trialgrid`` command loads the ``trialgrid.commands`` entry points (cluster mode's
``submit``, ``status``, ``logs``), and ``runner.run`` resolves ``trialgrid.backends`` for
``--ray``. These tests count what that imports — modules, not seconds — in a fresh
interpreter (this one may have imported Ray already), and check that without Ray a
plain run works while ``--ray`` and the Ray Jobs commands say, in one line, what to install.
Ray's absence is simulated with ``sys.modules["ray"] = None`` (``import ray`` then
raises ImportError), never by uninstalling it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from runner.core.errors import UserError
from tests.conftest import ROOT

#: third-party packages no plug-in lookup, --version or --help may import (each costs a noticeable share of a second)
HEAVY = {"ray", "polars", "pyarrow", "numba", "numpy", "httpx", "aiohttp", "yaml", "scipy"}
#: cluster modules a lookup may import: the entry points' module and the one that checks for Ray
LIGHT_CLUSTER = {"cluster", "cluster.cli", "cluster.session"}
INSTALL = "pip install 'trialgrid[ray]'"
NO_RAY = "import sys; sys.modules['ray'] = None\n"  # `import ray` fails as if it were not installed


def _light_runner(module: str) -> bool:
    """The runner modules a lookup may import: the CLI, the core, and the backend registry (no sweep, engine, run)."""
    return (module in ("runner", "runner.execution", "runner.execution.backends")
            or module.startswith(("runner.cli", "runner.core"))
            or module in ("runner.execution.backends.base", "runner.execution.backends.registry"))


def _in_fresh_python(code: str, *, timeout: float = 120) -> dict[str, object]:
    """Run ``code`` in a new interpreter; it ends by printing one JSON object, returned here."""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


_REPORT_MODULES = """
import json, sys
print(json.dumps({"modules": sorted(m for m, v in sys.modules.items() if v is not None), "results": results}))
"""


def test_looking_up_the_plugins_imports_nothing_heavy() -> None:
    code = """
from typer.testing import CliRunner
from runner.cli.app import app, load_plugins
from runner.execution.backends import backend
load_plugins(app)  # what main() does before every command
ray_backend = backend("ray")  # what runner.run resolves for --ray
results = {"backend": ray_backend.name}
for args in (["--version"], ["--help"], ["run", "--help"], ["job", "submit", "--help"],
             ["job", "status", "--help"]):
    outcome = CliRunner().invoke(app, args)
    results[" ".join(args)] = [outcome.exit_code, outcome.output[:200]]
""" + _REPORT_MODULES
    found = _in_fresh_python(code)
    results = found["results"]
    assert isinstance(results, dict) and results.pop("backend") == "ray"
    for args, (code_, output) in results.items():
        assert code_ == 0, (args, output)
    assert results["--version"][1].startswith("trialgrid ")
    assert "job" in results["--help"][1] or "Usage" in results["--help"][1]
    modules = found["modules"]
    assert isinstance(modules, list)
    assert sorted({m.split(".")[0] for m in modules} & HEAVY) == []
    assert [m for m in modules if m.startswith("cluster") and m not in LIGHT_CLUSTER] == []
    assert [m for m in modules if m.split(".")[0] == "runner" and not _light_runner(m)] == []
    assert "stats" not in modules


@pytest.mark.slow  # a whole (small) run in a fresh interpreter: every layer is imported there
def test_a_plain_run_works_without_ray_and_never_imports_it(tmp_path: Path, write_sweep) -> None:
    sweep = write_sweep(runs=1)
    code = NO_RAY + f"""
from typer.testing import CliRunner
from runner.cli.app import app, load_plugins
load_plugins(app)
outcome = CliRunner().invoke(app, ["run", {str(sweep)!r}, "--out", {str(tmp_path / "out")!r}, "-q", "--no-report"])
results = [outcome.exit_code, outcome.output[-2000:]]
""" + _REPORT_MODULES
    found = _in_fresh_python(code)
    assert found["results"][0] == 0, found["results"]  # type: ignore[index]
    modules = found["modules"]
    assert isinstance(modules, list) and "runner.execution.run" in modules  # it did run
    assert "ray" not in modules and [m for m in modules if m.startswith("cluster") and m not in LIGHT_CLUSTER] == []
    assert (tmp_path / "out" / "manifest.json").is_file()


def test_run_ray_without_ray_says_what_to_install_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              write_sweep) -> None:
    from runner.cli.app import app

    monkeypatch.setitem(sys.modules, "ray", None)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["run", str(write_sweep(runs=1)), "--out", str(out), "--ray", "local"])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if not line.startswith("warning:")]
    assert errors == [f"error: --ray needs Ray, which is not installed ({INSTALL})"]
    assert not (out / "manifest.json").exists()  # refused before the output was opened


@pytest.mark.parametrize("command", [["job", "submit", "SWEEP", "--out", "/data/out"], ["job", "status", "raysubmit_1"],
                                     ["job", "logs", "raysubmit_1"]])
def test_the_ray_jobs_commands_without_ray_say_what_to_install(command: list[str], monkeypatch: pytest.MonkeyPatch,
                                                               write_sweep) -> None:
    from runner.cli.app import load_plugins

    monkeypatch.setitem(sys.modules, "ray", None)
    plugins = typer.Typer()
    load_plugins(plugins)  # cluster mode's commands, without touching the app other tests use
    args = [str(write_sweep(runs=1)) if a == "SWEEP" else a for a in command]
    result = CliRunner().invoke(plugins, [*args, "--address", "http://127.0.0.1:9"])
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [
        f"error: trialgrid job {command[1]} needs Ray, which is not installed ({INSTALL})"]


def test_runner_run_on_ray_without_ray_is_a_user_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       write_sweep) -> None:
    import runner

    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(UserError, match=r"--ray needs Ray, which is not installed \(pip install 'trialgrid\[ray\]'\)"):
        runner.run(write_sweep(runs=1), tmp_path / "out", address="local")
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_ray_is_an_extra_and_the_test_extra_keeps_it() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if d.split(">")[0].split("[")[0].strip() == "ray"]
    assert [d for d in project["optional-dependencies"]["ray"] if d.startswith("ray")]
    assert [d for d in project["optional-dependencies"]["test"] if d.startswith("ray[default]")]
