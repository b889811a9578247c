"""``--batch --ray``: batch mode runs on the driver (nothing to shard), with the single-node output.

Submitting and polling a vendor's batch is a handful of calls, so with ``--ray`` the
batch backend runs in the driver's process and no Ray worker is started (this test
starts no Ray: were one started, ``ray`` would be initialised afterwards).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from typer.testing import CliRunner

import runner
from runner.cli.app import app
from tests.helpers import serving, write_yaml, written_rows
from tests.providers.conftest import outcomes
from tests.providers.test_batch import batch_sweep


def test_batch_with_ray_local_gives_the_single_node_batch_output(tmp_path: Path) -> None:
    with serving() as server:
        data = batch_sweep(server.base_url, "openai")
        for probe in data["probes"]:
            probe["runs"] = 1  # one run per cell compares the two outputs as well as two did
        path = write_yaml(tmp_path / "sweep.yaml", data)
        single = runner.run(path, tmp_path / "single", mode="batch", quiet=True)
        before = server.stats()
        result = CliRunner().invoke(app, ["run", str(path), "--batch", "--ray", "local", "--out",
                                          str(tmp_path / "ray"), "--no-report"])
        after = server.stats()
    assert result.exit_code == 0, result.output
    assert "no Ray workers are started" in result.output
    assert single.status == "complete"
    assert after["requests"] == before["requests"]  # no live chat request: batch APIs only
    assert outcomes(written_rows(tmp_path / "ray")).equals(outcomes(written_rows(tmp_path / "single")))
    ledger = json.loads((tmp_path / "ray" / "batches.json").read_text())
    assert ledger["batches"] and all(e["state"] == "collected" for e in ledger["batches"])
    # Ray was not started: either never imported (importing it only to ask costs seconds) or not initialised
    ray = sys.modules.get("ray")
    assert ray is None or not ray.is_initialized()
