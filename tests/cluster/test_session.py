"""``--ray HOST:PORT`` is checked before ``ray.init``: nothing there, or something that is not Ray, fails in one line.

The listeners here are real loopback sockets that are not Ray (a port that accepts and
stays silent, one that hangs up, an HTTP/1.1 server); none of these tests starts Ray,
except the last, which checks that a real GCS passes.
"""

from __future__ import annotations

import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from cluster.session import check_reachable
from runner.core.errors import UserError
from tests.helpers import quickstart_sweep, trialgrid


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections (the kernel does, from the backlog) and never says a word."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield listener.getsockname()[1]


@pytest.fixture
def hangup_port() -> Iterator[int]:
    """A port whose server closes every connection as soon as it has accepted it."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # the listener was closed: the test is over
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    # close() alone does not wake a thread blocked in accept() on Linux (the join then waited its full 10 s);
    # shutdown() does: accept() fails with EINVAL, and the thread returns at once
    listener.shutdown(socket.SHUT_RDWR)
    listener.close()
    thread.join(10)
    assert not thread.is_alive(), "the accept loop outlived its listener"


class _Hello(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # http.server names its handlers so
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:  # quiet: no access log on the test's stderr
        pass


@pytest.fixture
def http1_port() -> Iterator[int]:
    """An HTTP/1.1 server (the standard library's), as a dashboard or any web service on the port would be."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()
    thread.join(10)


def _check_error(address: str, timeout_s: float) -> str:
    """The one-line message ``check_reachable`` gives for ``address``; fails the test if the check hangs or passes."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            check_reachable(address, timeout_s=timeout_s)
            outcome.append(None)
        except BaseException as exc:  # handed to the test thread below
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(60)  # far beyond the check's own bound (two steps of timeout_s): only a hang gets here
    assert outcome, f"check_reachable({address!r}) hung"
    (error,) = outcome
    assert isinstance(error, UserError), f"check_reachable({address!r}) gave {error!r}, expected a UserError"
    message = str(error)
    assert "\n" not in message
    return message


def test_a_silent_listener_is_not_ray(silent_port: int) -> None:
    message = _check_error(f"127.0.0.1:{silent_port}", timeout_s=0.5)
    assert f"127.0.0.1:{silent_port} does not answer as Ray does" in message
    assert "sent nothing in 0.5 s" in message and "default 6379" in message


def test_a_listener_that_hangs_up_is_not_ray(hangup_port: int) -> None:
    message = _check_error(f"ray://127.0.0.1:{hangup_port}", timeout_s=5)
    assert f"ray://127.0.0.1:{hangup_port} does not answer as Ray does" in message
    assert "closed the connection" in message or "dropped the connection" in message


def test_an_http1_server_is_not_ray_and_says_what_answered(http1_port: int) -> None:
    message = _check_error(f"127.0.0.1:{http1_port}", timeout_s=5)
    assert f"127.0.0.1:{http1_port} does not answer as Ray does" in message
    assert "not with HTTP/2 (gRPC)" in message and "not the dashboard's 8265" in message


def test_nothing_listening_is_unreachable() -> None:
    with socket.socket() as s:  # a port nothing listens on (bound, never listening)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        message = _check_error(f"127.0.0.1:{port}", timeout_s=5)
    assert f"cannot reach Ray at 127.0.0.1:{port}" in message


@pytest.mark.parametrize("address", ["6379", "head", "ray://head:port"])
def test_a_malformed_address_says_what_is_expected(address: str) -> None:
    with pytest.raises(UserError, match="expected HOST:PORT, ray://HOST:PORT, auto or local"):
        check_reachable(address)


def _cli(tmp_path: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    sweep = quickstart_sweep(tmp_path, runs=1)

    def run(address: str) -> subprocess.CompletedProcess[str]:
        # a real process: what is checked is that `ray.init` is never reached, and a hang there would hang this one
        return trialgrid("run", str(sweep), "--out", str(tmp_path / "out"), "--ray", address, timeout=120)
    return run


@pytest.mark.slow
def test_run_against_a_silent_port_fails_in_one_line_before_ray(silent_port: int, tmp_path: Path) -> None:
    """The hang this check exists for: `ray.init` on a port that accepts and says nothing."""
    pytest.importorskip("ray")
    done = _cli(tmp_path)(f"127.0.0.1:{silent_port}")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("error:")]
    assert f"127.0.0.1:{silent_port} does not answer as Ray does" in line
    assert not (tmp_path / "out" / "manifest.json").exists()  # the output was never opened


@pytest.mark.ray
def test_a_real_gcs_passes(ray_local: None) -> None:
    import ray

    check_reachable(ray.get_runtime_context().gcs_address, timeout_s=10)
