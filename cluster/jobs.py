"""Ray Jobs: submit a sweep to a cluster's head, follow it, read its status and logs.

The job's working directory is the user's project (the directory holding the sweep
file and its case files), uploaded by Ray to every node, so workers need no separate
copy of the sweep. trialgrid's own packages travel with it: inside the working
directory when the project *is* a trialgrid checkout, otherwise as ``py_modules``.
The job runs ``python -m cluster run SWEEP --out OUT`` on the head, i.e. a Ray-mode
run whose driver is the head; ``OUT`` is a path on the head (or a shared filesystem).
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from runner.core.errors import UserError

#: never uploaded with the working directory: VCS data, caches, and run outputs (trial parts)
_EXCLUDES = [".git", "**/__pycache__", "**/.pytest_cache", ".venv", "venv", "node_modules", "*.egg-info",
            "**/*.arrow", "**/*.arrows", "**/*.parquet", "out"]
_TERMINAL = {"SUCCEEDED", "FAILED", "STOPPED"}
#: how long to retry a head whose job agent is not up yet
_AGENT_WAIT_S = 60.0


def _client(address: str) -> Any:
    from ray.job_submission import JobSubmissionClient

    try:
        return JobSubmissionClient(address)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise UserError(f"cannot reach the Ray Jobs API at {address}: {exc}",
                        hint="pass the head's dashboard address, e.g. --address http://HEAD:8265") from None


def runtime_env(project: Path) -> dict[str, Any]:
    import cluster
    import runner
    import stats

    env: dict[str, Any] = {"working_dir": str(project), "excludes": list(_EXCLUDES)}
    # package directories (the Jobs client uploads local paths; module objects do not serialize)
    dirs = [Path(m.__file__).resolve().parent for m in (runner, stats, cluster)]  # type: ignore[arg-type]
    shipped = [str(d) for d in dirs if d.parent != project.resolve()]
    if shipped:
        env["py_modules"] = shipped
    return env


def entrypoint(sweep: str, out: str, *, workers: int | None, strict_params: bool, cache: str | None = None) -> str:
    args = ["python", "-m", "cluster", "run", sweep, "--out", out]
    if cache is not None:
        args += ["--cache", cache]
    if workers is not None:
        args += ["--workers", str(workers)]
    if strict_params:
        args.append("--strict-params")
    return shlex.join(args)


def submit(sweep: Path, *, address: str, out: str, project: Path, workers: int | None = None,
           strict_params: bool = False, job_id: str | None = None, cache: str | None = None) -> str:
    """Submit the sweep; return the job id. ``sweep`` must lie inside ``project``."""
    project = project.resolve()
    try:
        relative = sweep.resolve().relative_to(project)
    except ValueError:
        raise UserError(f"the sweep file must be inside the project directory {project} (uploaded as the job's "
                        "working directory)", file=sweep, hint="run `trialgrid job submit` from the project directory, "
                        "or pass --project") from None
    if not Path(out).is_absolute() and "://" not in out:
        raise UserError(f"--out {out!r} is relative: the job would write it inside its temporary working directory, "
                        "which Ray deletes", hint="give an absolute path on the head node or a shared filesystem")
    if cache is not None and not Path(cache).is_absolute():
        raise UserError(f"--cache {cache!r} is relative: the job would keep it inside its temporary working directory, "
                        "which Ray deletes", hint="give an absolute path on the head node (where the cache actor runs)")
    client = _client(address)
    command = entrypoint(relative.as_posix(), out, workers=workers, strict_params=strict_params, cache=cache)
    env = runtime_env(project)
    deadline = time.monotonic() + _AGENT_WAIT_S
    while True:
        try:
            return client.submit_job(entrypoint=command, runtime_env=env, submission_id=job_id)
        except RuntimeError as exc:
            # a head that has just started answers 500 until its job agent is up
            if "No available agent" not in str(exc) or time.monotonic() > deadline:
                raise UserError(f"Ray Jobs refused the job: {exc}") from None
            time.sleep(1.0)


def status(job_id: str, *, address: str) -> str:
    return str(_client(address).get_job_status(job_id).value)


def output_dir(job_id: str, *, address: str) -> str | None:
    """The ``--out`` a job was submitted with (a path on the head node), from its entrypoint."""
    words = shlex.split(str(_client(address).get_job_info(job_id).entrypoint or ""))
    return words[words.index("--out") + 1] if "--out" in words[:-1] else None


def logs(job_id: str, *, address: str) -> str:
    return str(_client(address).get_job_logs(job_id))


def follow(job_id: str, *, address: str, write: Callable[[str], None], poll_s: float = 1.0) -> str:
    """Write the job's logs as they grow until it ends; return its final status."""
    client = _client(address)
    shown = 0
    while True:
        state = str(client.get_job_status(job_id).value)
        text = str(client.get_job_logs(job_id))
        if len(text) > shown:
            write(text[shown:])
            shown = len(text)
        if state in _TERMINAL:
            return state
        time.sleep(poll_s)


def list_jobs(*, address: str) -> Iterable[tuple[str, str, str]]:
    for job in _client(address).list_jobs():
        yield (job.submission_id or job.job_id or "?", str(job.status.value), job.entrypoint or "")
