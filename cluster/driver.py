"""A whole run of a sweep on Ray: the cluster-mode counterpart of ``runner.execution.run.run_sweep``.

The output is opened, repaired and resumed by ``runner.execution.run.open_output`` and
written by its ``TrialSink`` on the driver, so a Ray run's directory is the same as
a single-node run's: same parts format, same manifest, and either mode resumes the
other's output (a killed driver leaves streams that the next run repairs). Only
the middle differs: instead of one engine, ``Dispatcher`` feeds chunks of the
pending grid to worker actors and writes the record batches they return.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from cluster.scheduler import Dispatcher, DispatchStats, chunked
from cluster.session import check_reachable, ray_session
from cluster.shares import engine_share
from cluster.worker import TrialWorker
from runner.config.sweep import LoadedSweep
from runner.core.manifest import EngineRecord, write_manifest
from runner.execution.engine import EngineStats
from runner.execution.progress import RunProgress
from runner.execution.run import RunResult, open_output

#: the sink's worker name for parts written by a Ray driver (``part-ray-NNNNN.arrow``)
SINK_NAME = "ray"


def default_workers() -> int:
    """One worker per CPU of the cluster (the driver shares a CPU with one of them)."""
    import ray

    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def default_chunk_size(loaded: LoadedSweep, workers: int) -> int:
    """Twice a worker's concurrency, so one chunk's stragglers overlap the next chunk's start."""
    per_worker = engine_share(loaded.sweep.engine.concurrency, workers, 0)
    return max(64, min(4096, 2 * per_worker))


def run_on_ray(loaded: LoadedSweep, out: Path, *, address: str = "auto", workers: int | None = None,
               chunk_size: int | None = None, in_flight: int = 2, quiet: bool = False,
               say: Callable[[str], None] = lambda s: None, strict_params: bool = False,
               notify: Callable[[str], None] | None = None, num_cpus: int | None = None,
               temp_dir: str | None = None, ship_code: bool | None = None,
               limiter_window_s: float = 60.0, retry_kinds: tuple[str, ...] | None = None,
               wait: bool = False) -> RunResult:
    """Run (or resume) ``loaded`` into ``out`` on Ray. Raises ``UserError`` for a mismatched ``out``.

    ``address``: ``auto``, ``local`` or a cluster address (see ``cluster.session``);
    ``num_cpus`` and ``temp_dir`` apply to ``local`` only. If this process is already
    connected to Ray, that connection is used as is. ``ship_code`` (default: unless
    inside a Ray Job) sends trialgrid's packages to the workers as ``py_modules``. ``strict_params`` and ``notify``
    mean what they mean for ``run_sweep``; ``limiter_window_s`` shortens the rate
    window (tests only: providers count per minute).
    """
    import ray

    from cluster.shared import SharedServices

    check_reachable(address)  # a dead address fails in one line, before the output is touched
    # a wrong --out fails before any cluster work; the output's lock is held from here to finish
    output = open_output(loaded, out, say, retry_kinds=retry_kinds, wait=wait)
    output.manifest.strict_params = strict_params
    output.manifest.sessions[-1].engine = EngineRecord(mode="ray", address=address)

    def announce(entry: dict[str, Any]) -> None:
        if notify is not None:
            notify(f"remedy learned for {entry['provider']} model {entry['model_id']!r}: {entry['remedy']} "
                   f"(the server said: {entry['server_message']}); applied to every later request, "
                   "recorded in the manifest")
    connected = ExitStack()
    try:
        connected.enter_context(ray_session(address, num_cpus=num_cpus, temp_dir=temp_dir, ship_code=ship_code))
    except BaseException:
        output.finish("failed", 0, 0.0)  # the session says so, and the output's lock is free again
        raise
    with connected:
        n = workers or default_workers()
        size = chunk_size or default_chunk_size(loaded, n)
        cpus = float(ray.cluster_resources().get("CPU", 1))
        cpu_each = 1.0 if n <= cpus else cpus / n  # more workers than CPUs: fractional, never unschedulable
        services = SharedServices.start(loaded, output.manifest, strict_params=strict_params,
                                        window_s=limiter_window_s)
        loaded_ref = ray.put(loaded)
        actor = ray.remote(TrialWorker)
        hooks = services.hooks()

        def make_worker(index: int) -> Any:
            return actor.options(num_cpus=cpu_each, scheduling_strategy="SPREAD", max_restarts=0,
                                 max_concurrency=max(16, 4 * in_flight)).remote(loaded_ref, output.schema, index, n,
                                                                                hooks)

        dispatcher = Dispatcher(make_worker, n, in_flight=in_flight, on_lost=say)
        ray.get([w.ready.remote() for w in dispatcher.workers])  # a worker that cannot start fails the run now
        nodes = len({n_["NodeID"] for n_ in ray.nodes() if n_.get("Alive")})
        say(f"ray: {n} workers on {nodes} node(s), chunks of {size} trials, {in_flight} in flight per worker")

        started = time.perf_counter()
        status = "interrupted"
        dispatch = DispatchStats()
        by_status: dict[str, int] = {}
        try:
            with output.sink(SINK_NAME) as sink, \
                    RunProgress(output.total, already_done=len(output.done), quiet=quiet) as progress:
                next_drain = [time.monotonic() + 1.0]

                def on_result(chunk: Any, batch: pa.RecordBatch, errors: int) -> None:
                    sink.write_batch(batch)
                    _count(batch, by_status)
                    progress.advance(batch.num_rows, errors)
                    if time.monotonic() >= next_drain[0]:  # remedies reach the manifest as they are learned
                        next_drain[0] = time.monotonic() + 1.0
                        if services.drain_remedies(output.manifest, announce):
                            write_manifest(out, output.manifest)

                dispatch = dispatcher.run(chunked(output.pending(), size), on_result)
            status = "complete"
        finally:
            elapsed = time.perf_counter() - started
            try:
                services.drain_remedies(output.manifest, announce)
            except Exception as exc:
                say(f"could not collect remedies learned at the end: {type(exc).__name__}")
            counts = output.finish(status, sum(by_status.values()), elapsed)  # rows written, even if interrupted
            _close_workers(dispatcher.workers)
            services.stop()
    stats = EngineStats(done=dispatch.trials, errors=dispatch.errors, by_status=by_status)
    return RunResult(out, output.total, len(output.done), stats, counts, elapsed, output.repaired, status)


def _count(batch: pa.RecordBatch, into: dict[str, int]) -> None:
    for item in pc.value_counts(batch.column(batch.schema.get_field_index("status"))).to_pylist():
        into[item["values"]] = into.get(item["values"], 0) + item["counts"]


def _close_workers(workers: list[Any], timeout_s: float = 10.0) -> None:
    """Let workers close their HTTP clients; a worker that is gone or slow is left to Ray."""
    import ray

    refs = []
    for worker in workers:
        try:
            refs.append(worker.aclose.remote())
        except Exception:
            pass
    if refs:
        ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
    for worker in workers:
        try:
            ray.kill(worker, no_restart=True)
        except Exception:
            pass


__all__ = ["SINK_NAME", "default_chunk_size", "default_workers", "run_on_ray"]
