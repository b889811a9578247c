"""Connecting this process to Ray: which cluster, and what code its workers run.

``--ray`` takes ``auto`` (the cluster this node belongs to, as ``ray start`` left it),
``local`` (a private one-node Ray started for this run and stopped after it), or an
address (``HOST:PORT`` of a head's GCS, or ``ray://HOST:10001`` for Ray Client).

When the driver joins an existing cluster, trialgrid's own packages are shipped to
the workers as ``py_modules``: the code a worker runs is then always the driver's
code, even on a node with an older (or no) trialgrid install. Third-party
dependencies (pyarrow, polars, pydantic, httpx, ...) must be installed on every node.
Inside a Ray Job (``trialgrid job submit``) nothing is shipped: the job's working
directory already carries the project to every worker.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from runner.core.errors import UserError

LOCAL = "local"
AUTO = "auto"
#: what makes Ray available: it is an extra, not a dependency of trialgrid's base install
INSTALL_HINT = "pip install 'trialgrid[ray]'"


def require_ray(what: str) -> None:
    """``UserError`` in one line (what to install) when Ray cannot be imported here; ``what`` names the command.

    Called before anything is done for a Ray command (the output is not touched), and only by those:
    importing Ray costs most of a second, which no other command pays.
    """
    try:
        import ray  # noqa: F401
    except ImportError as exc:
        broken = exc.name not in (None, "ray")  # Ray is there, but something it imports is not
        raise UserError(f"{what} needs Ray, which " + (f"does not import here ({exc})" if broken else "is not installed"),
                        hint=INSTALL_HINT) from None


def our_packages() -> list[str]:
    """Directories of trialgrid's packages, as ``py_modules`` entries (paths survive Ray's runtime-env merging)."""
    import runner
    import stats

    here = str(Path(__file__).resolve().parent)  # cluster itself: `import cluster` here would be an import cycle
    return [str(Path(m.__file__).resolve().parent) for m in (runner, stats)] + [here]  # type: ignore[arg-type]


def in_ray_job() -> bool:
    """True inside a driver started by Ray Jobs (whose runtime env already ships the code)."""
    return any(os.environ.get(v) for v in ("RAY_JOB_CONFIG_JSON_ENV_VAR", "RAY_JOB_SUBMISSION_ID", "RAY_JOB_ID"))


def init_kwargs(address: str, *, num_cpus: int | None = None, temp_dir: str | None = None,
                ship_code: bool | None = None) -> dict[str, Any]:
    """Arguments for ``ray.init``; loopback only for a private local instance."""
    kwargs: dict[str, Any] = {"log_to_driver": True, "configure_logging": True, "logging_level": "WARNING"}
    if address == LOCAL:
        kwargs.update(include_dashboard=False, _node_ip_address="127.0.0.1")
        if num_cpus is not None:
            kwargs["num_cpus"] = num_cpus
        if temp_dir is not None:
            kwargs["_temp_dir"] = temp_dir
        return kwargs
    kwargs["address"] = address
    if ship_code if ship_code is not None else not in_ray_job():
        kwargs["runtime_env"] = {"py_modules": our_packages()}
    return kwargs


def check_reachable(address: str, *, timeout_s: float = 10.0) -> None:
    """An explicit ``HOST:PORT`` (or ``ray://HOST:PORT``) must be a Ray GCS (or Ray Client server), else
    ``UserError`` in one line — before ``ray.init``, which would retry for minutes, print raw warnings, and leave
    the output running; given something else listening there (a web server, a silent port) it can hang outright.

    Two bounded steps on one connection, each within ``timeout_s``: a TCP connect, then an HTTP/2 connection
    preface. Both Ray endpoints speak gRPC, i.e. HTTP/2, whose server must open with a SETTINGS frame (RFC 9113
    §3.4); an HTTP/1.1 server answers something else, a silent one nothing. Only the address given is dialled;
    ``auto`` and ``local`` are Ray's to find. With ``RAY_USE_TLS`` the preface would have to go inside TLS, so
    only the connect is checked."""
    if address in (AUTO, LOCAL):
        return
    rest = address.split("://", 1)[1] if "://" in address else address
    host, sep, port_text = rest.rstrip("/").rpartition(":")
    if not sep or not port_text.isdigit():
        raise UserError(f"--ray {address!r} is not an address: expected HOST:PORT, ray://HOST:PORT, auto or local")
    host = host.strip("[]")
    try:
        with socket.create_connection((host, int(port_text)), timeout=timeout_s) as conn:
            if os.environ.get("RAY_USE_TLS", "0").strip().lower() in ("1", "true"):
                return
            problem = _not_grpc(conn, timeout_s)
    except OSError as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or type(exc).__name__)
        raise UserError(f"cannot reach Ray at {address}: {reason}",
                        hint="start the head with `ray start --head` and pass its address (HOST:6379), "
                             "or use --ray local for a private one-node Ray") from None
    if problem:
        raise UserError(f"{address} does not answer as Ray does: {problem}",
                        hint="pass the head's GCS port (`ray start --head --port`, default 6379; not the dashboard's "
                             "8265), ray://HOST:10001 for Ray Client, or --ray local for a private one-node Ray")


# the client's HTTP/2 connection preface and an empty SETTINGS frame (length 0, type 0x4, no flags, stream 0)
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 0x4, 0, 0, 0, 0, 0])
_FRAME_HEADER = 9


def _not_grpc(conn: socket.socket, timeout_s: float) -> str | None:
    """Why the server on ``conn`` is not an HTTP/2 (gRPC) server, or None when its first frame is SETTINGS."""
    deadline = time.monotonic() + timeout_s  # for the whole answer: a server that trickles bytes gets no more
    got = b""
    try:
        conn.settimeout(timeout_s)
        conn.sendall(_H2_PREFACE)
        while len(got) < _FRAME_HEADER:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            conn.settimeout(left)
            chunk = conn.recv(_FRAME_HEADER - len(got))
            if not chunk:
                break
            got += chunk
    except TimeoutError:
        if not got:
            return f"it accepted the connection but sent nothing in {timeout_s:g} s (a gRPC server answers at once)"
    except OSError as exc:
        if not got:
            return f"it dropped the connection ({exc.strerror or type(exc).__name__}) instead of answering as gRPC"
    if len(got) == _FRAME_HEADER and got[3] == 0x4 and got[5:9] == bytes(4):
        return None
    if not got:
        return "it closed the connection without answering as gRPC (HTTP/2) does"
    try:  # a little more of the answer, to name what is there (e.g. an HTTP/1.1 status line)
        conn.settimeout(min(timeout_s, 1.0))
        got += conn.recv(80)
    except OSError:
        pass
    text = " ".join(got.decode("ascii", "replace").split())  # one line, whatever it sent
    return f"it answered {text[:60]!r}, not with HTTP/2 (gRPC)"


@contextmanager
def ray_session(address: str, *, num_cpus: int | None = None, temp_dir: str | None = None,
                ship_code: bool | None = None) -> Iterator[None]:
    """Connect for the duration of the block; an already connected process is left connected."""
    import ray

    if ray.is_initialized():
        yield
        return
    try:
        # ray.init installs its core worker's native SIGTERM handler over Python's: SIGTERM then aborted the driver
        # (exit 134, a crash dump) instead of the clean stop runner.cli.signals makes of it (143). Python's handler,
        # whatever it was, is put back once Ray is up.
        handler = signal.getsignal(signal.SIGTERM) if threading.current_thread() is threading.main_thread() else None
        ray.init(**init_kwargs(address, num_cpus=num_cpus, temp_dir=temp_dir, ship_code=ship_code))
        if handler is not None:
            signal.signal(signal.SIGTERM, handler)
    except ConnectionError as exc:
        raise UserError(f"cannot connect to Ray at {address!r}: {exc}",
                        hint="start a cluster with `ray start --head`, pass its address, "
                             "or use --ray local for a private one-node Ray") from None
    from cluster.reaper import start_reaper  # here, not at the top: looking up the plugin imports only what it names

    reaper = start_reaper() if address == LOCAL else None  # ends the private Ray if this process is killed
    try:
        yield
    finally:
        ray.shutdown()
        if reaper is not None:
            reaper.done()
