"""Catalogues from a live MCP server (runner.probes.mcp) against a server built with the official SDK.

The server is ``tests/probes/test_mcp_server.py`` run as a script; every test that
starts one leaves it stopped (trialgrid stops it; the hang test checks the pid).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml
from typer.testing import CliRunner

import runner
from runner.cli.app import app
from runner.config.sweep import load_sweep
from runner.core.errors import UserError
from runner.probes.catalogue import load_catalogue
from runner.probes.mcp import catalogue_sha256
from tests.conftest import CONFIGS, quickstart_dict

SERVER = Path(__file__).resolve().parent / "test_mcp_server.py"
TOOLS = CONFIGS / "misselection" / "tools.json"
OUTCOMES = ["trial_id", "model", "case_id", "condition", "run", "seed", "status", "decoy_called", "expected_called",
            "asked", "tools_called", "n_tool_calls", "decoy_position", "catalogue_order", "response_text"]


def server_entry(*extra: str, catalogue: Path = TOOLS, page_size: int = 4, **keys: Any) -> dict[str, Any]:
    return {"command": sys.executable,
            "args": [str(SERVER), str(catalogue), "--page-size", str(page_size), *extra], **keys}


def mcp_sweep(tmp_path: Path, server: dict[str, Any] | None, runs: int = 1, name: str = "sweep.yaml",
              **probe_keys: Any) -> Path:
    data = quickstart_dict()
    probe = data["probes"][0]
    probe["runs"] = runs
    if server is not None:
        del probe["catalogue"]
        probe["mcp_server"] = server
    probe.update(probe_keys)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def cli_error(path: Path) -> str:
    result = CliRunner().invoke(app, ["validate", "--start-servers", str(path)])  # validate starts no server by default
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    return " ".join(result.output.split())


def test_served_quickstart_catalogue_gives_the_file_catalogues_outcomes(tmp_path: Path) -> None:
    calls = tmp_path / "tool-calls"
    file_sweep = load_sweep(mcp_sweep(tmp_path, None, name="file.yaml"))
    served = load_sweep(mcp_sweep(tmp_path, server_entry(env={"TG_MCP_CALLS": str(calls)}), name="mcp.yaml"))
    assert served.probes[0].tools == file_sweep.probes[0].tools  # same ToolSpecs, same order, decoy appended
    runner.run(file_sweep, tmp_path / "file-out", quiet=True)
    runner.run(served, tmp_path / "mcp-out", quiet=True)

    def outcomes(out: Path) -> pl.DataFrame:
        df = pl.scan_ipc(str(out / "trials" / "*.arrow")).collect()
        return df.select([c for c in OUTCOMES if c != "trial_id"]).sort("model", "case_id", "condition", "run")

    a, b = outcomes(tmp_path / "file-out"), outcomes(tmp_path / "mcp-out")
    assert a.height == 3 * 13 * 3  # one run per cell: the catalogue, not the run count, is what is compared
    assert a.equals(b)
    assert not calls.exists(), "trialgrid called a tool on the MCP server"


def test_manifest_records_the_served_catalogue_and_its_hash(tmp_path: Path) -> None:
    loaded = load_sweep(mcp_sweep(tmp_path, server_entry(page_size=4)))
    runner.run(loaded, tmp_path / "out", quiet=True)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    probe = manifest["probes"]["misselection"]
    record = probe["mcp_catalogue"]
    file_tools, _ = load_catalogue(TOOLS)
    assert record["pages"] == 4  # 13 tools, 4 a page: pagination followed to the end
    assert [t["name"] for t in record["tools"]] == [t.name for t in file_tools]
    assert record["sha256"] == probe["catalogue_sha256"] == catalogue_sha256(file_tools)
    assert record["server"] == {"name": "trialgrid-test-catalogue", "version": "1.0.0"}
    assert record["protocol_version"]
    assert manifest["sweep"]["probes"][0]["mcp_server"]["command"] == sys.executable
    # what was recorded is itself a catalogue trialgrid reads back to the same tools
    (tmp_path / "recorded.json").write_text(json.dumps(record["tools"]))
    assert load_catalogue(tmp_path / "recorded.json")[0] == file_tools


def test_page_size_does_not_change_the_catalogue_or_the_sweep(tmp_path: Path) -> None:
    one_page = load_sweep(mcp_sweep(tmp_path, server_entry(page_size=100), name="a.yaml"))
    many = load_sweep(mcp_sweep(tmp_path, server_entry(page_size=1), name="b.yaml"))
    assert one_page.probes[0].mcp_catalogue["pages"] == 1 and many.probes[0].mcp_catalogue["pages"] == 13
    assert one_page.probes[0].tools == many.probes[0].tools
    assert one_page.probes[0].identity() == many.probes[0].identity()


@pytest.mark.slow
def test_a_changed_server_catalogue_is_a_different_sweep_but_a_timeout_is_not(tmp_path: Path) -> None:
    base = load_sweep(mcp_sweep(tmp_path, server_entry(), name="a.yaml")).sweep_id
    slower = load_sweep(mcp_sweep(tmp_path, server_entry(timeout_s=99), name="b.yaml")).sweep_id
    tools = json.loads(TOOLS.read_text())
    tools[0]["function"]["description"] += " Only for the current fiscal year."
    changed_file = tmp_path / "changed.json"
    changed_file.write_text(json.dumps(tools))
    # the same command line (args included) serving a different catalogue: only the content hash can tell
    changed_file_same_path = tmp_path / "served.json"
    changed_file_same_path.write_text(TOOLS.read_text())
    first = load_sweep(mcp_sweep(tmp_path, server_entry(catalogue=changed_file_same_path), name="c.yaml")).sweep_id
    changed_file_same_path.write_text(changed_file.read_text())
    second = load_sweep(mcp_sweep(tmp_path, server_entry(catalogue=changed_file_same_path), name="c.yaml")).sweep_id
    assert base == slower
    assert first != second


def test_a_server_that_crashes_is_a_located_error_with_its_stderr(tmp_path: Path) -> None:
    path = mcp_sweep(tmp_path, server_entry("--mode", "crash"))
    text = cli_error(path)
    line = path.read_text().splitlines().index("  mcp_server:") + 1
    assert f"sweep.yaml:{line} probes[0].mcp_server:" in text
    assert "exited with code 3 before answering initialize" in text
    assert "connection refused" in text


def test_a_server_that_never_answers_times_out_and_is_stopped(tmp_path: Path) -> None:
    pidfile = tmp_path / "server.pid"
    path = mcp_sweep(tmp_path, server_entry("--mode", "hang", "--pidfile", str(pidfile), timeout_s=1))
    text = cli_error(path)
    assert "probes[0].mcp_server:" in text
    # tools/list hangs; on a loaded machine the SDK's import alone may outlast 1 s, so initialize may be the one
    assert re.search(r"timed out after 1 s waiting for the answer to (tools/list|initialize)", text)
    pid = int(pidfile.read_text())
    for _ in range(100):  # stop() waited for it; allow the kernel a moment to reap
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        pytest.fail("the hung MCP server was left running")


def test_malformed_tools_are_a_located_error(tmp_path: Path) -> None:
    text = cli_error(mcp_sweep(tmp_path, server_entry("--mode", "malformed")))
    assert "probes[0].mcp_server:" in text
    assert "returned a malformed tool at tools[2].inputSchema.required" in text


def test_non_json_on_stdout_is_a_clear_error(tmp_path: Path) -> None:
    text = cli_error(mcp_sweep(tmp_path, server_entry("--mode", "stdout-noise")))
    assert "not JSON-RPC" in text and "starting server v1.0" in text and "stderr" in text


def test_a_missing_command_is_a_located_error(tmp_path: Path) -> None:
    text = cli_error(mcp_sweep(tmp_path, {"command": "no-such-mcp-server-xyz"}))
    assert "probes[0].mcp_server: cannot start the MCP server: command not found: 'no-such-mcp-server-xyz'" in text


@pytest.mark.parametrize("keys,needle", [
    ({"catalogue": str(TOOLS)}, "not both"),
    ({"mcp_server": {"command": "x", "env": {"GITHUB_TOKEN": "ghp_x"}}}, "looks like a credential"),
    ({"mcp_server": {"command": "x", "timeout": 5}}, "timeout"),
])
def test_mcp_server_config_errors(tmp_path: Path, keys: dict[str, Any], needle: str) -> None:
    server = keys.pop("mcp_server", server_entry())
    text = cli_error(mcp_sweep(tmp_path, server, **keys))
    assert "probes[0]" in text and needle in text


def test_neither_catalogue_nor_server_is_an_error(tmp_path: Path) -> None:
    path = mcp_sweep(tmp_path, None)
    data = yaml.safe_load(path.read_text())
    del data["probes"][0]["catalogue"]
    path.write_text(yaml.safe_dump(data))
    assert "either as `catalogue: FILE` or as `mcp_server" in cli_error(path)


def test_the_negative_probe_takes_a_served_catalogue(tmp_path: Path) -> None:
    data = yaml.safe_load((CONFIGS / "negatives.yaml").read_text())
    probe = data["probes"][0]
    probe["cases"] = str(CONFIGS / probe["cases"])
    file_catalogue = CONFIGS / probe.pop("catalogue")
    probe["mcp_server"] = server_entry(catalogue=file_catalogue)
    path = tmp_path / "neg.yaml"
    path.write_text(yaml.safe_dump(data))
    loaded = load_sweep(path)
    assert loaded.probes[0].identity()["catalogue_sha256"] == catalogue_sha256(load_catalogue(file_catalogue)[0])


def test_a_catalogue_file_in_mcp_form_loads(tmp_path: Path) -> None:
    from tests.probes.test_mcp_server import mcp_tools

    (tmp_path / "mcp.json").write_text(json.dumps({"tools": mcp_tools(TOOLS)}))
    assert load_catalogue(tmp_path / "mcp.json")[0] == load_catalogue(TOOLS)[0]
    bad = mcp_tools(TOOLS)
    bad[1]["inputSchema"] = {"type": "array"}
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(UserError, match=r"\[1\]\.inputSchema"):
        load_catalogue(tmp_path / "bad.json")
