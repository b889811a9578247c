"""The oracle persona behind ``trialgrid serve --keys SWEEP``: a sweep sent over the wire to model ``oracle``
passes every case, the multi-step propagation tasks included."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import yaml

from tests.helpers.cli import invoke
from tests.helpers.files import bundled_sweep, write_yaml
from tests.providers.conftest import ServeProcess, trials


def test_a_sweep_sent_to_the_served_oracle_passes_every_case(tmp_path: Path) -> None:
    data = {"name": "wire", "seed": 1, "models": [], "probes": []}
    for name in ("negatives.yaml", "propagation.yaml"):
        data["probes"] += yaml.safe_load(bundled_sweep(tmp_path, name, runs=1).read_text())["probes"]
    keys = write_yaml(tmp_path / "keys.yaml", {**data, "models": [{"name": "o", "provider": "sim", "model": "oracle"}]})
    server = ServeProcess("--keys", str(keys))
    try:
        data["models"] = [{"name": "oracle", "provider": "openai", "base_url": server.url + "/v1", "model": "oracle",
                           "api_key_env": None}]
        data["probes"][1]["conditions"] = ["control", "control+interceptor"]
        sweep = write_yaml(tmp_path / "wire.yaml", data)
        result = invoke("run", str(sweep), "--out", str(tmp_path / "out"), "-q")
        assert result.exit_code == 0, result.output
    finally:
        server.close()
    rows = trials(tmp_path / "out")
    assert (rows["status"] == "ok").all()
    negative = rows.filter(pl.col("probe") == "negative")
    assert negative.height > 0 and negative["passed"].all()
    tasks = rows.filter(pl.col("probe") == "propagation")
    assert tasks.height == 36 and tasks["correct"].all() and not tasks["abstained"].any()
