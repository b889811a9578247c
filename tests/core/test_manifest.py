"""The typed manifest: today's files read unchanged, writes round-trip, damage is one located line.

The fixtures are manifests as each writer writes them: a finished and a running
quickstart run, a run with a response cache, one with learned remedies, one with an
MCP-served catalogue, a batch run, a rescore and both importers. Only machine-specific
path prefixes were replaced. A manifest of another format is refused in one line.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from runner.core.errors import UserError
from runner.core.manifest import (
    FORMAT_VERSION,
    MANIFEST,
    Manifest,
    ProbeRecord,
    SessionRecord,
    read_manifest,
    read_manifest_file,
    write_manifest,
)
from tests.conftest import ROOT

FIXTURES = Path(__file__).resolve().parent / "fixtures"
TODAYS = sorted(FIXTURES.glob("manifest-*.json"))


def fixture(name: str) -> Manifest:
    return read_manifest_file(FIXTURES / f"manifest-{name}.json")


def test_the_fixtures_cover_every_writer() -> None:
    assert {p.stem.removeprefix("manifest-") for p in TODAYS} >= {
        "run", "running", "run-cache", "run-remedies", "run-mcp", "batch", "rescore", "import-agentprop",
        "import-trials"}


@pytest.mark.parametrize("path", TODAYS, ids=lambda p: p.stem)
def test_todays_manifests_read_and_rewrite_unchanged(path: Path, tmp_path: Path) -> None:
    on_disk = json.loads(path.read_text())
    manifest = read_manifest_file(path)
    assert manifest.format_version == FORMAT_VERSION == 2
    assert manifest.as_json() == on_disk  # every key kept, no key added (not even a null)
    write_manifest(tmp_path, manifest)
    assert json.loads((tmp_path / MANIFEST).read_text()) == on_disk
    assert not (tmp_path / "manifest.json.tmp").exists()


def test_readers_get_typed_attributes() -> None:
    run = fixture("run")
    assert run.status == "complete" and run.sweep_name == "quickstart" and run.seed == run.sweep.seed
    assert [m.name for m in run.sweep.models] == ["sim-careful", "sim-typical", "sim-reckless"]
    assert run.sweep.models[0].model_id == "careful" and run.probes["misselection"].kind == "misselection"
    assert run.probes["misselection"].cases_sha256 and run.sessions[-1].elapsed_s is not None
    assert run.sweep.budget is None and run.imported is None and run.remedies == []

    running = fixture("running")
    assert running.status == "running" and running.sessions[-1].finished_at is None
    session = running.as_json()["sessions"][-1]
    assert session["finished_at"] is None and "elapsed_s" not in session  # null as written; absent stays absent

    cache = fixture("run-cache").sessions[-1].cache
    assert cache is not None and cache.hits == 234 and fixture("run-cache").cache_hits == 234

    remedies = fixture("run-remedies")
    careful = next(m for m in remedies.sweep.models if m.model_id == "careful")
    raw = json.loads((FIXTURES / "manifest-run-remedies.json").read_text())["remedies"]
    expected = [r["remedy"] for r in raw if r["model_id"] == "careful" and r["provider"] == careful.provider]
    assert expected and [r.remedy for r in remedies.remedies_of(careful)] == expected
    assert "drop temperature" in expected and len(expected) < len(raw)

    served = fixture("run-mcp").probes["misselection"].mcp_catalogue
    assert served is not None and served.pages == 4 and len(served.tools) == 13

    batch = fixture("batch")
    assert batch.strict_params is False and batch.batch_models == ["sim-careful", "sim-typical"]
    assert batch.batches is not None and [b.state for b in batch.batches] == ["collected", "collected"]

    rescored = fixture("rescore").rescored_from
    assert rescored is not None and rescored.changed == 5 and rescored.probes is not None

    agentprop = fixture("import-agentprop")
    assert agentprop.imported is not None and agentprop.imported.caveat and agentprop.sweep_sha256 is None
    assert agentprop.probes["judges"].ensemble and agentprop.sessions == []

    imported = fixture("import-trials")
    info = next(iter(imported.probes.values()))
    assert info.rates and info.conditions is not None and imported.imported is not None
    assert imported.imported.mapping is not None


def test_a_built_manifest_round_trips_and_writes_only_what_was_set(tmp_path: Path) -> None:
    session = SessionRecord(started_at="2026-01-01T00:00:00+00:00", finished_at=None, pid=1, host="h",
                            status="running")
    manifest = Manifest(format_version=FORMAT_VERSION, sweep_name="s", sweep_id="abc", sweep_sha256=None,
                        probes={"p": ProbeRecord(kind="negative", cases_sha256="0" * 64)}, sessions=[session],
                        status="running")
    written = manifest.as_json()
    assert written["sweep_sha256"] is None and "sweep_file" not in written and "rescored_from" not in written
    assert written["probes"] == {"p": {"kind": "negative", "cases_sha256": "0" * 64}}
    assert "extensions" not in written["sessions"][0] and "cache" not in written["sessions"][0]

    manifest.sessions[-1].extensions = {"ray": {"address": "auto"}}
    manifest.strict_params = True
    write_manifest(tmp_path, manifest)
    again = read_manifest(tmp_path)
    assert again is not None and again.as_json() == manifest.as_json()
    assert again.sessions[0].extensions == {"ray": {"address": "auto"}} and again.strict_params is True


def test_unknown_keys_are_tolerated_and_not_rewritten_except_in_copied_records(tmp_path: Path) -> None:
    data = json.loads((FIXTURES / "manifest-run.json").read_text())
    data["from_a_newer_version"] = {"x": 1}
    data["sessions"][0]["gpu"] = "none"
    data["sweep"]["a_new_sweep_key"] = 3           # the sweep snapshot is config's: kept verbatim
    data["probes"]["misselection"]["extra_sha256"] = "f" * 64  # so is a probe's identity
    (tmp_path / MANIFEST).write_text(json.dumps(data))
    manifest = read_manifest(tmp_path)
    assert manifest is not None
    written = manifest.as_json()
    assert "from_a_newer_version" not in written and "gpu" not in written["sessions"][0]
    assert written["sweep"]["a_new_sweep_key"] == 3
    assert written["probes"]["misselection"]["extra_sha256"] == "f" * 64


def test_a_plugins_record_is_kept_verbatim_in_its_extension_slot(tmp_path: Path) -> None:
    """The core knows no plug-in's shape: what one writes under its name reads back as written, nested keys and all."""
    data = json.loads((FIXTURES / "manifest-run.json").read_text())
    data["sessions"][0]["extensions"] = {"ray": {"address": "local", "watch": {"done": 3, "later_key": [1]}},
                                         "other": {"anything": None}}
    (tmp_path / MANIFEST).write_text(json.dumps(data))
    manifest = read_manifest(tmp_path)
    assert manifest is not None and manifest.as_json() == data
    data["sessions"][0]["extensions"] = {"ray": ["not", "an", "object"]}
    assert _damaged(tmp_path, json.dumps(data, indent=2)).key_path == "sessions[0].extensions.ray"


@pytest.mark.parametrize("version, says", [(1, "written before trialgrid 0.2.0"), (3, "newer than")])
def test_a_manifest_of_another_format_is_refused_in_one_line(tmp_path: Path, version: int, says: str) -> None:
    data = json.loads((FIXTURES / "manifest-run.json").read_text())
    data["format_version"] = version
    (tmp_path / MANIFEST).write_text(json.dumps(data))
    with pytest.raises(UserError, match=says) as caught:
        read_manifest(tmp_path)
    assert "format_version" in str(caught.value) and "\n" not in str(caught.value)


def test_no_manifest_is_none(tmp_path: Path) -> None:
    assert read_manifest(tmp_path) is None


def _damaged(tmp_path: Path, text: str) -> UserError:
    (tmp_path / MANIFEST).write_text(text)
    with pytest.raises(UserError) as info:
        read_manifest(tmp_path)
    message = str(info.value)
    assert "\n" not in message and str(tmp_path / MANIFEST) in message
    return info.value


def _fixture_with(**edits: object) -> str:
    data = json.loads((FIXTURES / "manifest-run.json").read_text())
    data.update(edits)
    return json.dumps(data, indent=2)


def test_damaged_manifests_are_one_located_line(tmp_path: Path) -> None:
    bad_json = _damaged(tmp_path, '{\n  "format_version": 1,\n  "sweep_id": \n}')
    assert bad_json.line == 4 and "not valid JSON" in str(bad_json)

    data = json.loads((FIXTURES / "manifest-run.json").read_text())
    data["sessions"][0]["pid"] = "not a pid"
    wrong_type = _damaged(tmp_path, json.dumps(data, indent=2))
    assert wrong_type.key_path == "sessions[0].pid" and "'not a pid'" in str(wrong_type)
    assert wrong_type.line is not None and '"pid"' in json.dumps(data, indent=2).splitlines()[wrong_type.line - 1]

    data = json.loads((FIXTURES / "manifest-run.json").read_text())
    del data["sweep_id"]
    missing = _damaged(tmp_path, json.dumps(data))
    assert missing.key_path == "sweep_id" and "missing" in str(missing)

    wrong_shape = _damaged(tmp_path, _fixture_with(probes=["misselection"]))
    assert wrong_shape.key_path == "probes"

    assert _damaged(tmp_path, "[1, 2]").key_path == "<top level>"
    newer = _damaged(tmp_path, _fixture_with(format_version=FORMAT_VERSION + 1))
    assert "newer" in str(newer) and newer.key_path == "format_version"


def test_the_cli_reports_a_damaged_manifest_without_a_traceback(tmp_path: Path) -> None:
    from runner.cli.app import app

    data = json.loads((FIXTURES / "manifest-run.json").read_text())
    data["seed"] = "forty-two"
    (tmp_path / MANIFEST).write_text(json.dumps(data, indent=2))
    result = CliRunner().invoke(app, ["report", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert "seed" in result.output and "Traceback" not in result.output


def test_the_record_imports_nothing_above_core() -> None:
    code = ("import sys, runner.core.manifest; "
            "print('\\n'.join(m for m in sys.modules if m.startswith('runner')))")
    loaded = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.split()
    outside = [m for m in loaded if m != "runner" and not m.startswith("runner.core")]
    assert "runner.core.manifest" in loaded and outside == []


def test_names_read_back_are_labels_again(tmp_path: Path) -> None:
    """A manifest someone else wrote cannot smuggle a terminal escape or an over-long name into a report."""
    data = json.loads((FIXTURES / "manifest-run.json").read_text())
    data["probes"]["evil\x1b]0;t\x07"] = next(iter(data["probes"].values()))
    (tmp_path / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(UserError, match="control character"):
        read_manifest(tmp_path)
