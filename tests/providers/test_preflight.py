"""Before the grid: an endpoint that does not answer, refuses the key or does not know the model is one line
and exit 2 within the model's timeout_s, before any trial row is written."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cli import invoke
from tests.helpers.serving import serving
from tests.providers.conftest import http_sweep, write

KEY = "sk-preflight-0123456789abcdef"


@contextmanager
def _silent_server(reset: bool) -> Iterator[int]:
    """A TCP server on loopback that accepts connections and then says nothing (``reset``: cuts them at once)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            if reset:
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                conn.close()
            else:
                held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(2)
        for conn in held:
            conn.close()
        listener.close()


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _run(tmp_path: Path, base_url: str, **model: Any) -> Any:
    data = http_sweep(base_url, "openai", runs=1, timeout_s=2, **model)
    data["models"] = data["models"][:1]
    return invoke("run", str(write(tmp_path, data)), "--out", str(tmp_path / "out"), "-q")


def _one_line(result: Any, *words: str, model: str = "careful") -> None:
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"model 'sim-careful' (openai '{model}'" in errors[0], result.stderr
    for word in words:
        assert word in errors[0], errors[0]
    assert "Traceback" not in result.output


def _no_rows(tmp_path: Path) -> None:
    assert not list((tmp_path / "out").glob("trials/*.arrow*"))


def test_a_closed_port(tmp_path: Path) -> None:
    _one_line(_run(tmp_path, f"http://127.0.0.1:{_closed_port()}/v1"), "nothing answered", "--no-preflight")
    _no_rows(tmp_path)


def test_a_server_that_resets_every_connection(tmp_path: Path) -> None:
    with _silent_server(reset=True) as port:
        _one_line(_run(tmp_path, f"http://127.0.0.1:{port}/v1"), "nothing answered")
    _no_rows(tmp_path)


def test_a_server_that_accepts_and_never_answers(tmp_path: Path) -> None:
    with _silent_server(reset=False) as port:
        _one_line(_run(tmp_path, f"http://127.0.0.1:{port}/v1"), "no answer within its 2 s timeout_s")
    _no_rows(tmp_path)


def test_a_refused_key_says_which_variable_and_never_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TG_PREFLIGHT_KEY", KEY)
    with serving(keys=("sk-the-right-one-0000000000",)) as server:
        result = _run(tmp_path, server.base_url, api_key_env="TG_PREFLIGHT_KEY")
    _one_line(result, "refused the key in $TG_PREFLIGHT_KEY (401")
    assert KEY[3:15] not in result.output
    _no_rows(tmp_path)


def test_an_unknown_model(tmp_path: Path) -> None:
    with serving() as server:
        result = _run(tmp_path, server.base_url, model="gpt-nope")
    _one_line(result, "does not know this model", "gpt-nope", model="gpt-nope")
    _no_rows(tmp_path)


def test_every_model_whose_endpoint_fails_is_a_line_and_a_good_one_is_not(tmp_path: Path) -> None:
    with serving() as server:
        data = http_sweep(server.base_url, "openai", runs=1, timeout_s=2)
        data["models"][1]["model"] = "gpt-nope"
        data["models"][2]["base_url"] = f"http://127.0.0.1:{_closed_port()}/v1"
        result = invoke("run", str(write(tmp_path, data)), "--out", str(tmp_path / "out"), "-q")
        assert server.stats()["requests"] == 0  # the check sends no chat request
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.exit_code == 2 and len(errors) == 2, result.stderr
    assert "'sim-typical'" in errors[0] and "'sim-reckless'" in errors[1]


def test_a_route_the_server_lacks_proves_nothing_and_no_preflight_skips_it(tmp_path: Path) -> None:
    with serving() as server:
        ok = _run(tmp_path, server.base_url)
    assert ok.exit_code == 0, ok.output
    closed = invoke("run", str(write(tmp_path, http_sweep(f"http://127.0.0.1:{_closed_port()}/v1", "openai", runs=1,
                                                            timeout_s=1, retry={"max_attempts": 1}), "dead.yaml")),
                    "--out", str(tmp_path / "dead"), "-q", "--no-preflight")
    assert closed.exit_code == 3  # the run went ahead: every trial an error row


def test_the_local_server_warning_is_for_a_local_model_server_not_for_trialgrid_serve(tmp_path: Path) -> None:
    queues = "queues the rest"
    with serving() as server:
        simulated = _run(tmp_path, server.base_url)
    assert simulated.exit_code == 0 and queues not in simulated.stderr, simulated.stderr
    from tests.helpers.hostile import HostileServer, chat_answer

    with HostileServer(lambda n, body: (200, {}, chat_answer(usage={"prompt_tokens": 1, "completion_tokens": 1}))) \
            as other:
        data = http_sweep(other.base_url, "openai", runs=1, timeout_s=2)
        data["models"] = data["models"][:1]
        local = invoke("run", str(write(tmp_path, data, "local.yaml")), "--out", str(tmp_path / "local"), "-q")
    assert local.exit_code == 0 and local.stderr.count(queues) == 1, local.stderr


@pytest.mark.parametrize("provider", ["azure-openai", "gemini", "vertex", "bedrock"])
def test_no_local_server_warning_for_a_cloud_wire_format_at_trialgrid_serve(provider: str, tmp_path: Path,
                                                                             wire: Any) -> None:
    """No model server people run at home speaks these: at a loopback URL it is a proxy or ``trialgrid serve``,
    even where the preflight has no route to ask who answers (Vertex, Bedrock)."""
    _, base_url, fields = wire(provider)
    data = http_sweep(base_url, provider, runs=1, timeout_s=5, **fields)
    data["models"] = data["models"][:1]
    result = invoke("run", str(write(tmp_path, data)), "--out", str(tmp_path / "out"), "-q")
    assert result.exit_code == 0 and "queues the rest" not in result.stderr, result.stderr
