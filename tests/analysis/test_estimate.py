"""``validate``'s cost estimate: tokens and dollars per model from the oracle's calibration run."""

from __future__ import annotations

from pathlib import Path

import yaml

import runner
from runner.config.sweep import load_sweep
from tests.helpers.cli import invoke
from tests.helpers.files import bundled_sweep, write_yaml
from tests.helpers.rows import written_rows


def _priced(tmp_path: Path, **top: object) -> Path:
    data = yaml.safe_load(bundled_sweep(tmp_path, "quickstart.yaml", runs=5).read_text())
    data["prices"] = {m["name"]: {"input": 2.5, "output": 10.0} for m in data["models"]}
    data.update(top)
    return write_yaml(tmp_path / "priced.yaml", data)


def test_validate_with_prices_estimates_what_the_grid_will_be_sent(tmp_path: Path) -> None:
    sweep = _priced(tmp_path, budget={"usd": 0.01})
    result = invoke("validate", str(sweep))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[1].startswith("cost estimate, from a calibration run (each cell asked once of the oracle")
    rows = [x.split() for x in lines[2:-1]]
    data = yaml.safe_load(sweep.read_text())
    assert [r[0] for r in rows] == [m["name"] for m in data["models"]]
    grid = load_sweep(sweep)
    trials = sum(p.n_cells * p.runs for p in grid.probes)
    assert {int(r[1].replace(",", "")) for r in rows} == {trials}
    # the input tokens are what the same grid bills when the oracle answers it: run it and compare
    data["models"] = [{"name": "o", "provider": "sim", "model": "oracle"}]
    data.pop("prices"), data.pop("budget")
    runner.run(load_sweep(write_yaml(tmp_path / "o.yaml", data)), tmp_path / "out", quiet=True)
    billed = written_rows(tmp_path / "out")
    assert {int(r[3].replace(",", "")) for r in rows} == {int(billed["input_tokens"].sum())}
    assert {int(r[5].replace(",", "")) for r in rows} == {int(billed["output_tokens"].sum())}
    usd = 2.5 * billed["input_tokens"].sum() / 1e6 + 10.0 * billed["output_tokens"].sum() / 1e6
    assert {r[7] for r in rows} == {f"${usd:,.2f}"}
    assert lines[-1] == f"  total ${usd * len(rows):,.2f}; the budget is $0.01, which stops the grid before it is finished"


def test_validate_without_prices_estimates_nothing(tmp_path: Path) -> None:
    result = invoke("validate", str(bundled_sweep(tmp_path, "quickstart.yaml", runs=5)))
    assert result.exit_code == 0 and len(result.stdout.splitlines()) == 1, result.output
