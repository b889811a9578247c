"""``prices: {MODEL: list}``: the vendor's list price from genai-prices' table, as numbers in the sweep and the
manifest; a price it cannot give is one line at load, at the ``prices`` key, exit 2."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from runner.config.sweep import load_sweep
from tests.conftest import quickstart_dict
from tests.helpers.cli import invoke, invoke_error_line


def _sweep(tmp_path: Path, prices: dict[str, Any], **extra: Any) -> Path:
    data = quickstart_dict()
    data["models"] = [{"name": "flash", "provider": "gemini", "model": "gemini-2.5-flash",
                       "base_url": "http://127.0.0.1:9/v1beta", "api_key_env": None},
                      {"name": "sonnet", "provider": "bedrock", "model": "anthropic.claude-sonnet-4-5-20250929-v1:0",
                       "base_url": "http://127.0.0.1:9", "api_key_env": None}]
    data.update(prices=prices, **extra)
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_a_list_price_is_the_tables_price_and_the_sweep_holds_the_numbers(tmp_path: Path) -> None:
    genai = pytest.importorskip("genai_prices")
    path = _sweep(tmp_path, {"flash": "list", "sonnet": {"input": 1.0, "output": 2.0}})
    prices = load_sweep(path, start_servers=False).sweep.prices
    # the table's own figure, read at a million tokens (gemini-2.5-flash has no long-context tier)
    inp = genai.calc_price(genai.Usage(input_tokens=1_000_000), model_ref="gemini-2.5-flash", provider_id="google")
    out = genai.calc_price(genai.Usage(output_tokens=1_000_000), model_ref="gemini-2.5-flash", provider_id="google")
    assert (prices["flash"].input, prices["flash"].output) == pytest.approx((float(inp.input_price),
                                                                               float(out.output_price)))
    assert prices["flash"].input > 0 and (prices["sonnet"].input, prices["sonnet"].output) == (1.0, 2.0)


def test_validate_estimates_the_cost_at_list_prices(tmp_path: Path) -> None:
    pytest.importorskip("genai_prices")
    result = invoke("validate", str(_sweep(tmp_path, {"flash": "list", "sonnet": "list"}, budget={"usd": 5.0})))
    assert result.exit_code == 0, result.output
    assert "cost estimate" in result.output and "$" in result.output
    # where each list price came from, with the table's version (its date)
    assert "flash: " in result.output and "the list price of google 'gemini-2.5-flash' in genai-prices 0." \
        in result.output


@pytest.mark.parametrize(("model", "words"), [
    ({"name": "flash", "provider": "gemini", "model": "gemini-no-such-model"},
     ("prices: flash:", "no list price for gemini model 'gemini-no-such-model'")),
    ({"name": "flash", "provider": "sim", "model": "typical"}, ("prices: flash:", "no list prices for provider sim")),
])
def test_a_list_price_that_cannot_be_had_is_one_line(tmp_path: Path, model: dict[str, Any],
                                                      words: tuple[str, ...]) -> None:
    pytest.importorskip("genai_prices")
    data = yaml.safe_load(_sweep(tmp_path, {"flash": "list"}).read_text())
    data["models"][0] = {**data["models"][0], **model} if model["provider"] != "sim" else model
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    line = invoke_error_line(invoke("validate", str(path)))
    assert all(w in line for w in words), line


def test_without_the_prices_extra_a_list_price_says_what_to_install(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "genai_prices", None)  # as if not installed
    line = invoke_error_line(invoke("validate", str(_sweep(tmp_path, {"flash": "list"}))))
    assert "prices: flash:" in line and "pip install 'trialgrid[prices]'" in line, line
