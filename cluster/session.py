"""Connecting this process to Ray: which cluster, and what code its workers run.

``--ray`` takes ``auto`` (the cluster this node belongs to, as ``ray start`` left it),
``local`` (a private one-node Ray started for this run and stopped after it), or an
address (``HOST:PORT`` of a head's GCS, or ``ray://HOST:10001`` for Ray Client).

When the driver joins an existing cluster, trialgrid's own packages are shipped to
the workers as ``py_modules``: the code a worker runs is then always the driver's
code, even on a node with an older (or no) trialgrid install. Third-party
dependencies (pyarrow, polars, pydantic, httpx, ...) must be installed on every node.
Inside a Ray Job (``trialgrid submit``) nothing is shipped: the job's working
directory already carries the project to every worker.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from runner.core.errors import UserError

LOCAL = "local"
AUTO = "auto"


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
    """An explicit ``HOST:PORT`` (or ``ray://HOST:PORT``) must accept a TCP connection, else ``UserError`` in one
    line — before ``ray.init``, which would retry for minutes, print raw warnings, and leave the output running.
    Only the address given is dialled; ``auto`` and ``local`` are Ray's to find."""
    if address in (AUTO, LOCAL):
        return
    rest = address.split("://", 1)[1] if "://" in address else address
    host, sep, port_text = rest.rstrip("/").rpartition(":")
    if not sep or not port_text.isdigit():
        raise UserError(f"--ray {address!r} is not an address: expected HOST:PORT, ray://HOST:PORT, auto or local")
    host = host.strip("[]")
    try:
        with socket.create_connection((host, int(port_text)), timeout=timeout_s):
            pass
    except OSError as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or type(exc).__name__)
        raise UserError(f"cannot reach Ray at {address}: {reason}",
                        hint="start the head with `ray start --head` and pass its address (HOST:6379), "
                             "or use --ray local for a private one-node Ray") from None


@contextmanager
def ray_session(address: str, *, num_cpus: int | None = None, temp_dir: str | None = None,
                ship_code: bool | None = None) -> Iterator[None]:
    """Connect for the duration of the block; an already connected process is left connected."""
    import ray

    if ray.is_initialized():
        yield
        return
    try:
        ray.init(**init_kwargs(address, num_cpus=num_cpus, temp_dir=temp_dir, ship_code=ship_code))
    except ConnectionError as exc:
        raise UserError(f"cannot connect to Ray at {address!r}: {exc}",
                        hint="start a cluster with `ray start --head`, pass its address, "
                             "or use --ray local for a private one-node Ray") from None
    try:
        yield
    finally:
        ray.shutdown()
