"""Fixtures for the HTTP provider tests: the loopback simulated server, and sweeps pointed at it.

Every test here talks to a real ``trialgrid serve`` app on 127.0.0.1 (port 0, in a
background thread, stopped after the test); nothing mocks the HTTP client, and
nothing leaves the machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from runner.core.types import ToolCall
from runner.sim.serve import ServerThread
from runner.sim.serve.tool_input import complete_parameters
from tests.helpers import ROOT, quickstart_dict, serving, write_yaml, written_rows

#: the columns that must not depend on how the model was reached
OUTCOMES = ["model", "case_id", "condition", "run", "seed", "status", "decoy_called", "expected_called", "asked",
            "tools_called", "n_tool_calls", "decoy_position", "catalogue_order", "tool_calls", "response_text",
            "input_tokens", "output_tokens"]
CELL = ["model", "case_id", "condition", "run"]


@pytest.fixture
def serve() -> Iterator[Callable[..., ServerThread]]:
    """``serve(**ServeOptions fields)`` → a started server; all are stopped at the end of the test."""
    with ExitStack() as stack:
        yield lambda **options: stack.enter_context(serving(**options))


def http_sweep(base_url: str, provider: str, *, runs: int = 2, **model: Any) -> dict[str, Any]:
    """The quickstart sweep with every model sent to ``provider`` at ``base_url``."""
    data = quickstart_dict()
    for probe in data["probes"]:
        probe["runs"] = runs
    for m in data["models"]:
        m.update(provider=provider, base_url=base_url, api_key_env=None)
        m.update(model)
    return data


def write(tmp_path: Path, data: dict[str, Any], name: str = "sweep.yaml") -> Path:
    return write_yaml(tmp_path / name, data)


#: every row the run wrote (tests/helpers/rows.py), the name these tests have always used
trials = written_rows


def outcomes(df: pl.DataFrame) -> pl.DataFrame:
    """The outcome columns, sorted by cell."""
    return df.select(OUTCOMES).sort(CELL)


def over_messages_api(calls: tuple[ToolCall, ...]) -> tuple[ToolCall, ...]:
    """In-process tool calls as an ``anthropic`` provider records them from ``trialgrid serve``.

    The one difference between the routes: the Messages API only sends a call's
    ``input`` as an object, so a call whose argument text does not parse arrives as the
    object of its complete leading parameters and is recorded parsed
    (``runner/sim/serve/codecs.py``, ``tool_input``). Ids are the same on every route.
    """
    return tuple(_as_sent(c) for c in calls)


def _as_sent(call: ToolCall) -> ToolCall:
    if call.arguments is not None:
        return call
    args = complete_parameters(call.raw_arguments)
    return replace(call, raw_arguments=json.dumps(args, separators=(",", ":")), arguments=args, parse_error=None)


def rows_over_messages_api(df: pl.DataFrame) -> pl.DataFrame:
    """In-process rows' ``tool_calls`` column as an HTTP ``anthropic`` run records it (see ``over_messages_api``)."""
    def row(calls: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        if calls is None:
            return None
        return [c if c["parse_error"] is None else
                {**c, "arguments": json.dumps(complete_parameters(c["arguments"]), separators=(",", ":")),
                 "parse_error": None} for c in calls]

    fixed = [row(calls) for calls in df["tool_calls"].to_list()]
    return df.with_columns(pl.Series("tool_calls", fixed, dtype=df.schema["tool_calls"]))


class ServeProcess:
    """``trialgrid serve`` in a subprocess on 127.0.0.1 (any free port), stopped by ``close``."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "runner", "serve", "--port", "0", *args], cwd=ROOT,
                                     env=os.environ.copy(), stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        self.url = line.split("serving the simulated agent on ", 1)[1].split()[0]

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.url + "/stats?log=1", timeout=30) as response:
            return json.loads(response.read())  # type: ignore[no-any-return]

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        if self.proc.stdout:  # closed here, not by the garbage collector: its ResourceWarning fails whichever
            self.proc.stdout.close()  # test runs then under filterwarnings("error") (test_serve_sdks)


def limit_used(log: dict[str, list[Any]], rpm: int, window_s: float = 60.0) -> float:
    """Requests the server admitted (answers that were not 429) per minute, as a share of its limit."""
    admitted = sorted(t for t, s in zip(log["t"], log["status"], strict=True) if s != 429)
    return (len(admitted) - 1) / (admitted[-1] - admitted[0]) * window_s / rpm


#: the key every vendor endpoint below is served with, and Bedrock's access key id (its "key" on the server)
WIRE_KEY, WIRE_AKID = "wire-test-key-7d21", "AKIDTRIALGRIDWIRES01"
#: each HTTP wire format's provider → (the path under ``trialgrid serve``'s URL, the model fields, the
#: environment it reads its credentials, project and region from)
WIRES: dict[str, tuple[str, dict[str, Any], dict[str, str]]] = {
    "anthropic": ("", {"api_key_env": "WIRE_TEST_KEY"}, {}),
    "openai-responses": ("/v1", {"api_key_env": "WIRE_TEST_KEY"}, {}),
    "azure-openai": ("", {"api_key_env": "WIRE_TEST_KEY", "api_version": "2024-10-21"}, {}),
    "gemini": ("/v1beta", {"api_key_env": "WIRE_TEST_KEY"}, {}),
    "vertex": ("/v1", {"api_key_env": "WIRE_TEST_KEY"},
               {"GOOGLE_CLOUD_PROJECT": "trialgrid-test", "GOOGLE_CLOUD_LOCATION": "europe-west4"}),
    "bedrock": ("", {"api_key_env": None},
                {"AWS_ACCESS_KEY_ID": WIRE_AKID, "AWS_SECRET_ACCESS_KEY": "trialgrid-wires-secret",
                 "AWS_REGION": "eu-west-3", "AWS_EC2_METADATA_DISABLED": "true"}),
}


@pytest.fixture
def wire(serve, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):  # type: ignore[no-untyped-def]
    """``wire(provider, **ServeOptions fields)`` → (a started server that wants that provider's credentials, the
    sweep's ``base_url`` for it, the model fields): the test credentials in the environment, and none of the
    machine's AWS profiles."""
    def start(provider: str, **options: Any) -> tuple[ServerThread, str, dict[str, Any]]:
        path, fields, env = WIRES[provider]
        monkeypatch.setenv("WIRE_TEST_KEY", WIRE_KEY)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
        monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
        server = serve(keys=(WIRE_AKID if provider == "bedrock" else WIRE_KEY,), **options)
        return server, server.url + path, dict(fields)

    return start
