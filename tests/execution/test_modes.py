"""``runner.run`` picks the backend and refuses what cannot run — from Python, not only from the CLI.

Every rule is raised before anything is sent, so these sweeps point at a closed port
(127.0.0.1:9) and no test here starts a server or Ray.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

import runner
from runner.cli.app import app
from runner.config.sweep import load_sweep
from runner.execution.backends import Backend, backend
from runner.execution.backends.batch.ledger import BatchEntry, BatchLedger
from runner.execution.modes import plan
from runner.execution.options import RunOptions
from tests.conftest import CONFIGS, quickstart_dict

NOWHERE = "http://127.0.0.1:9/v1"


def _sweep(tmp_path: Path, *, mode: str = "live", provider: str = "openai", **top: Any) -> Path:
    data = quickstart_dict()
    for m in data["models"]:
        if provider != "sim":
            m.update(provider=provider, base_url=NOWHERE, api_key_env=None)
        m["mode"] = mode
    data.update(top)
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


PROPAGATION = [{"kind": "propagation", "tasks": [str(CONFIGS / "propagation/weather.yaml")], "runs": 1}]

#: (sweep keys, runner.run keywords, a piece of the one-line message)
RULES = [
    ({"mode": "batch"}, {"cache": "cache-dir"}, "batch mode runs without the response cache"),
    ({"mode": "batch", "cache": "c"}, {}, "not available with a cache"),
    ({}, {"mode": "batch", "address": "local", "cache": "c"}, "not available with a cache"),
    ({"mode": "batch", "probes": PROPAGATION}, {}, "is multi-turn"),
    ({}, {"mode": "batch", "probes": PROPAGATION}, "is multi-turn"),
    ({"provider": "sim"}, {"mode": "batch"}, "which has no batch API"),
    ({}, {"workers": 2}, "--workers only applies with --ray"),
    ({"mode": "batch"}, {"mode": "local"}, "a local run would send those requests live, at live prices"),
    ({}, {"mode": "nonsense"}, "unknown run mode 'nonsense'"),
    ({}, {"mode": "local", "address": "local"}, "an address only applies to a Ray run"),
]


@pytest.mark.parametrize(("sweep", "keywords", "message"), RULES)
def test_every_rule_is_raised_by_runner_run(tmp_path: Path, sweep: dict[str, Any], keywords: dict[str, Any],
                                            message: str) -> None:
    sweep = dict(sweep)
    if "probes" in keywords:
        sweep["probes"] = keywords.pop("probes")
    path = _sweep(tmp_path, **sweep)
    with pytest.raises(runner.UserError) as caught:
        runner.run(path, tmp_path / "out", quiet=True, **keywords)
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert not (tmp_path / "out").exists()  # refused before the output was opened


def test_the_cli_prints_the_same_rule_and_exits_2(tmp_path: Path) -> None:
    path = _sweep(tmp_path, mode="batch")
    result = CliRunner().invoke(app, ["run", str(path), "--ray", "local", "--cache", str(tmp_path / "c"),
                                      "--out", str(tmp_path / "out"), "-q"])
    assert result.exit_code == 2
    assert "batch mode runs without the response cache" in result.output


def test_cluster_mode_takes_a_budget_and_a_cache_and_runs_batch_on_the_driver(tmp_path: Path) -> None:
    data = {"budget": {"tokens": 1000}, "cache": "c"}
    assert plan(load_sweep(_sweep(tmp_path, **data)), None, RunOptions(address="local")).backend == "ray"
    batch = plan(load_sweep(_sweep(tmp_path, mode="batch")), None, RunOptions(address="local"))
    assert batch.backend == "batch" and batch.note is not None and "no Ray workers are started" in batch.note
    assert plan(load_sweep(_sweep(tmp_path)), None, RunOptions(mode="batch", address="local")).backend == "batch"


def test_open_batches_in_the_output_pick_batch_mode(tmp_path: Path) -> None:
    loaded = load_sweep(_sweep(tmp_path))
    out = tmp_path / "out"
    out.mkdir()
    assert plan(loaded, out).backend == "local"
    BatchLedger(out).add(BatchEntry("b0001", loaded.sweep.models[0].name, "openai", NOWHERE, {"id": "x"}, {}))
    assert plan(loaded, out).backend == "batch"
    with pytest.raises(runner.UserError, match="holds batches submitted and not yet collected"):
        plan(loaded, out, RunOptions(mode="local"))


def test_the_mode_is_picked_from_the_sweep(tmp_path: Path) -> None:
    live = load_sweep(_sweep(tmp_path))
    assert plan(live, None) == plan(live, None, RunOptions(mode="local"))
    assert plan(live, None).backend == "local" and plan(live, None, RunOptions(address="auto")).backend == "ray"
    everything = plan(live, None, RunOptions(mode="batch"))
    assert everything.backend == "batch" and everything.batch_models == {m.name for m in live.sweep.models}
    data = yaml.safe_load(_sweep(tmp_path).read_text())
    data["models"][1]["mode"] = "batch"
    (tmp_path / "mixed.yaml").write_text(yaml.safe_dump(data))
    mixed = plan(load_sweep(tmp_path / "mixed.yaml"), None)
    assert mixed.backend == "batch" and mixed.batch_models == {data["models"][1]["name"]}


@pytest.mark.parametrize("name", ["local", "batch"])
def test_built_in_backends_are_backends(name: str) -> None:
    found = backend(name)
    assert isinstance(found, Backend) and found.name == name


def test_a_backend_registered_in_process_is_what_runner_run_uses(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """How the Ray Jobs entrypoint reaches ``runner.run`` on a head without installed entry points."""
    from runner.execution.backends import Plan, register_backend, registry

    calls: list[tuple[str, RunOptions]] = []

    class _Recording:
        name = "recording"

        def run(self, loaded: Any, out: Path, options: RunOptions, plan: Plan) -> Any:
            calls.append((loaded.sweep.name, options))
            return local.run(loaded, out, options, plan)  # recorded, then run as the local backend runs it

    local = registry.backend("local")
    monkeypatch.setattr(registry, "_REGISTERED", {})
    register_backend("recording", _Recording())
    assert "recording" in runner.execution.backends.backend_names()
    result = runner.run(_sweep(tmp_path, provider="sim"), tmp_path / "out", mode="recording", strict_params=True)
    assert result.counts.get("ok") and result.exit_code == 0
    assert len(calls) == 1 and calls[0][1].strict_params is True
    with pytest.raises(ValueError, match="built-in"):
        register_backend("local", _Recording())


def test_the_ray_jobs_entrypoint_goes_through_runner_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m cluster run`` hands its arguments to ``runner.run`` (which picks Ray from the address) after
    naming the Ray backend for a head without entry points; it re-does none of the run. No Ray is started here."""
    from contextlib import nullcontext

    import cluster.session
    from cluster.cli import job_main, ray_backend
    from runner.core.errors import UserError
    from runner.execution import modes
    from runner.execution.backends import registry

    asked: list[tuple[Any, Any, dict[str, Any]]] = []

    def recording_run(sweep: Any, out: Any = None, **keywords: Any) -> Any:
        asked.append((sweep, out, keywords))
        raise UserError("stop here")

    monkeypatch.setattr(registry, "_REGISTERED", {})
    monkeypatch.setattr(modes, "run", recording_run)
    monkeypatch.setattr(cluster.session, "ray_session", lambda *a, **k: nullcontext())
    sweep = _sweep(tmp_path, provider="sim")
    code = job_main(["run", str(sweep), "--out", str(tmp_path / "out"), "--workers", "3", "--address", "HEAD:6379",
                     "--strict-params"])
    assert code == 2 and "error: stop here" in capsys.readouterr().err
    assert len(asked) == 1
    given, out, keywords = asked[0]
    assert Path(given) == sweep and out == (tmp_path / "out").resolve()
    assert keywords["address"] == "HEAD:6379" and keywords["workers"] == 3 and keywords["strict_params"] is True
    assert backend("ray") is ray_backend
