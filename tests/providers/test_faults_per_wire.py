"""The mixed-fault run on every wire format: a fifth of the answers faulted (429, 5xx, 529, resets, slow,
malformed and truncated bodies, broken streams), each in the vendor's own error shape, and every trial is still
written once, its error kind right, its answer the in-process one."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import runner
from runner.config.sweep import load_sweep
from tests.providers.conftest import http_sweep, rows_over_messages_api, trials, write
from tests.providers.test_providers_faults import CLIENT, FAULTY, _check, _in_process

KEY = "wire-test-key-7d21"
AKID, SECRET = "AKIDTRIALGRIDFAULTS1", "trialgrid-faults-secret-access-key"

#: provider → (the path under the server's URL, the model fields, the environment it needs)
WIRES: dict[str, tuple[str, dict[str, Any], dict[str, str]]] = {
    "anthropic": ("", {"api_key_env": "WIRE_TEST_KEY"}, {}),
    "openai-responses": ("/v1", {"api_key_env": "WIRE_TEST_KEY"}, {}),
    "azure-openai": ("", {"api_key_env": "WIRE_TEST_KEY", "api_version": "2024-10-21"}, {}),
    "gemini": ("/v1beta", {"api_key_env": "WIRE_TEST_KEY"}, {}),
    "vertex": ("/v1", {"api_key_env": "WIRE_TEST_KEY"},
               {"GOOGLE_CLOUD_PROJECT": "trialgrid-test", "GOOGLE_CLOUD_LOCATION": "europe-west4"}),
    "bedrock": ("", {"api_key_env": None},
                {"AWS_ACCESS_KEY_ID": AKID, "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_REGION": "eu-west-3",
                 "AWS_EC2_METADATA_DISABLED": "true"}),
}
#: the wire formats whose tool input is an object: a call whose arguments do not parse arrives parsed
MESSAGES_APIS = {"anthropic", "gemini", "vertex", "bedrock"}


@pytest.mark.parametrize("provider", sorted(WIRES))
def test_mixed_faults_every_trial_once_on_each_wire(serve, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
                                                    provider: str) -> None:
    path, fields, env = WIRES[provider]
    monkeypatch.setenv("WIRE_TEST_KEY", KEY)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    server = serve(keys=(AKID if provider == "bedrock" else KEY,), **FAULTY)
    loaded = load_sweep(write(tmp_path, http_sweep(server.url + path, provider, runs=2, **CLIENT, **fields)))
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
