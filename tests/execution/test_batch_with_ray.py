"""``--batch --ray``: batch mode runs on the driver (nothing to shard), with the single-node output.

Submitting and polling a vendor's batch is a handful of calls, so with ``--ray`` the
batch backend runs in the driver's process and no Ray worker is started (this test
starts no Ray: were one started, ``ray`` would be initialised afterwards).
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

import runner
from runner.cli.app import app
from runner.sim.serve import ServeOptions, ServerThread
from tests.providers.conftest import outcomes, trials, write
from tests.providers.test_batch import batch_sweep


def test_batch_with_ray_local_gives_the_single_node_batch_output(tmp_path: Path) -> None:
    with ServerThread(ServeOptions(host="127.0.0.1", port=0)) as server:
        path = write(tmp_path, batch_sweep(server.base_url, "openai"))
        single = runner.run(path, tmp_path / "single", mode="batch", quiet=True)
        before = server.stats()
        result = CliRunner().invoke(app, ["run", str(path), "--batch", "--ray", "local", "--out",
                                          str(tmp_path / "ray"), "--no-report"])
        after = server.stats()
    assert result.exit_code == 0, result.output
    assert "no Ray workers are started" in result.output
    assert single.status == "complete"
    assert after["requests"] == before["requests"]  # no live chat request: batch APIs only
    assert outcomes(trials(tmp_path / "ray")).equals(outcomes(trials(tmp_path / "single")))
    ledger = json.loads((tmp_path / "ray" / "batches.json").read_text())
    assert ledger["batches"] and all(e["state"] == "collected" for e in ledger["batches"])
    import ray

    assert not ray.is_initialized()
