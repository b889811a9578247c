"""The mixed-fault run on every wire format: a fifth of the answers faulted (429, 5xx, 529, resets, slow,
malformed and truncated bodies, broken streams), each in the vendor's own error shape, and every trial is still
written once, its error kind right, its answer the in-process one."""

from __future__ import annotations

import time
from pathlib import Path

import polars as pl
import pytest

import runner
from runner.config.sweep import load_sweep
from tests.providers.conftest import WIRES, http_sweep, rows_over_messages_api, trials, write
from tests.providers.test_providers_faults import CLIENT, FAULTY, _check, _in_process

#: the wire formats whose tool input is an object: a call whose arguments do not parse arrives parsed
MESSAGES_APIS = {"anthropic", "gemini", "vertex", "bedrock"}


@pytest.mark.parametrize("provider", sorted(WIRES))
def test_mixed_faults_every_trial_once_on_each_wire(wire, tmp_path: Path, provider: str) -> None:  # type: ignore[no-untyped-def]
    server, base_url, fields = wire(provider, **FAULTY)
    loaded = load_sweep(write(tmp_path, http_sweep(base_url, provider, runs=2, **CLIENT, **fields)))
    result = runner.run(loaded, tmp_path / "out", quiet=True)
    reference = _in_process(tmp_path, 2)
    _check(trials(tmp_path / "out"), loaded, rows_over_messages_api(reference) if provider in MESSAGES_APIS
           else reference)
    stats = server.stats()
    deadline = time.monotonic() + FAULTY["slow_s"] + 30  # a bound: "slow" and "stall" answers finish after the run
    while stats["in_flight"] and time.monotonic() < deadline:
        time.sleep(0.05)
        stats = server.stats()
    faults = {t.split(":")[1] for t in stats["by_tag"] if t.startswith("fault:")}
    assert faults == set(FAULTY["faults"])  # every kind was met, in this vendor's shape
    assert result.counts["error"] == trials(tmp_path / "out").filter(pl.col("status") == "error").height
