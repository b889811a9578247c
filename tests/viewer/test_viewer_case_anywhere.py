"""A trial's case record shows wherever the viewer is started, not only where the run was."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

import runner
from runner.config.sweep import load_sweep
from runner.core.errors import TrialgridWarning
from runner.output import Output
from runner.viewer.data import Source
from tests.helpers.files import quickstart_sweep


def _first_trial(out: Path) -> str:
    return str(Output.open(out).scan().select("trial_id").head(1).collect().item())


def test_the_case_record_is_found_from_another_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    project.mkdir()
    quickstart_sweep(project, runs=1)
    monkeypatch.chdir(project)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TrialgridWarning)
        runner.run(load_sweep(Path("sweep.yaml")), Path("out"), quiet=True)  # the sweep named relative to here
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    out = project / "out"
    source = Source(out, "quickstart", Output.open(out))
    detail = source.trial(_first_trial(out))
    assert detail is not None and detail["case"] is not None and detail["case"]["matches_run"]


def test_an_output_that_names_its_sweep_relative_to_where_it_ran_is_found_from_above(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    (project / "configs").mkdir(parents=True)
    quickstart_sweep(project / "configs", runs=1, output="out/q")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", (TrialgridWarning, UserWarning))
        runner.run(load_sweep(project / "configs" / "sweep.yaml"), project / "out" / "q", quiet=True)
    manifest_file = project / "out" / "q" / "manifest.json"
    manifest = json.loads(manifest_file.read_text())
    manifest["sweep_file"] = "configs/sweep.yaml"  # as an output written with a relative path records it
    manifest_file.write_text(json.dumps(manifest))
    monkeypatch.chdir(tmp_path)
    from runner.core.manifest import read_manifest

    found = read_manifest(project / "out" / "q")
    assert found is not None
    assert found.sweep_path(project / "out" / "q") == project / "configs" / "sweep.yaml"
