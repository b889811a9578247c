"""A whole run of a sweep on Ray: the Ray middle of a ``runner.execution.session.Session``.

The session — the same one a local or a batch run is — opens, repairs and resumes the
output, holds its lock, meters the budget, records remedies and cache statistics and
finishes the manifest; rows are written by its ``TrialSink`` on the driver, so a Ray
run's directory is the same as a single-node run's: same parts format, same manifest,
and either mode resumes the other's output (a killed driver leaves streams that the
next run repairs). Only the middle is Ray's: instead of one engine, ``Dispatcher`` feeds
chunks of the pending grid to worker actors and writes the record batches they return,
the shared services (``cluster.shared``) give the workers one limiter, remedy book,
spend meter and cache, and ``Watch`` logs and records the cluster's summary.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from cluster.options import RayOptions
from cluster.records import RaySessionRecord, put_ray_record
from cluster.scheduler import Dispatcher, DispatchStats, chunked
from cluster.session import check_reachable, ray_session
from cluster.shares import engine_share
from cluster.watch import Watch, detail_line
from cluster.worker import TrialWorker
from runner.config.sweep import LoadedSweep
from runner.core.messages import say
from runner.execution.engine import EngineStats
from runner.execution.options import RunOptions
from runner.execution.progress import RunProgress
from runner.execution.run import RunResult, response_cache_dir
from runner.execution.session import Session
from runner.providers.cache import ResponseCache

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


def run_on_ray(loaded: LoadedSweep, out: Path, options: RunOptions | None = None,
               ray_options: RayOptions | None = None) -> RunResult:
    """Run (or resume) ``loaded`` into ``out`` on Ray (``runner.run``'s ``ray`` backend). ``UserError`` for a bad ``out``.

    ``options``: the run's ``RunOptions`` (quiet, strict_params, cache, retry_errors,
    wait), as ``runner.run`` checked them; ``ray_options``: the cluster and its tuning
    (``cluster.options.RayOptions``: address ``auto``, ``local`` or a cluster's; if this
    process is already connected to Ray, that connection is used as is). The response
    cache is served to every worker by one actor on this node; a sweep's ``budget`` is
    metered across all workers (``cluster.spend``); the cluster's summary is logged and
    written into the manifest every ``watch_interval_s``.
    """
    options = options or RunOptions()
    ray_options = ray_options or RayOptions()
    address, in_flight, quiet = ray_options.address, ray_options.in_flight, options.quiet
    strict_params = options.strict_params
    import ray

    from cluster.shared import SharedServices

    cache_dir = response_cache_dir(loaded, options.cache_dir)
    if cache_dir is not None:  # the cache actor runs on this node: a directory it cannot open fails here, in one line
        ResponseCache(cache_dir).close()
    check_reachable(address)  # a dead address fails in one line, before the output is touched
    dispatch = DispatchStats()
    by_status: dict[str, int] = {}
    # a wrong --out fails here, before any cluster work; the lock is held from here to the session's finish
    with Session(loaded, out, options) as session, \
            ray_session(address, num_cpus=ray_options.num_cpus, temp_dir=ray_options.temp_dir,
                        ship_code=ray_options.ship_code):
        put_ray_record(session.manifest.sessions[-1], RaySessionRecord(address=address))
        n = ray_options.workers or default_workers()
        size = ray_options.chunk_size or default_chunk_size(loaded, n)
        cpus = float(ray.cluster_resources().get("CPU", 1))
        cpu_each = 1.0 if n <= cpus else cpus / n  # more workers than CPUs: fractional, never unschedulable
        meter = session.meter
        services = SharedServices.start(loaded, session.manifest, strict_params=strict_params,
                                        window_s=ray_options.limiter_window_s, cache_dir=cache_dir,
                                        spent=(meter.usd, meter.tokens) if meter is not None else None)
        dispatcher: Dispatcher | None = None
        try:
            loaded_ref = ray.put(loaded)
            actor = ray.remote(TrialWorker)
            hooks = services.hooks()

            def make_worker(index: int) -> Any:
                return actor.options(num_cpus=cpu_each, scheduling_strategy="SPREAD", max_restarts=0,
                                     max_concurrency=max(16, 4 * in_flight)).remote(loaded_ref, session.schema, index,
                                                                                    n, hooks)

            dispatcher = Dispatcher(make_worker, n, in_flight=in_flight, should_stop=session.should_stop)
            ray.get([w.ready.remote() for w in dispatcher.workers])  # a worker that cannot start fails the run now
            nodes = len({n_["NodeID"] for n_ in ray.nodes() if n_.get("Alive")})
            say(f"ray: {n} workers on {nodes} node(s), chunks of {size} trials, {in_flight} in flight per worker")
            session.begin()
            _dispatch(session, dispatcher, services, size, dispatch, by_status, quiet=quiet,
                      cache_on=cache_dir is not None, watch_interval_s=ray_options.watch_interval_s)
        finally:
            if dispatcher is not None:
                _close_workers(dispatcher.workers)
            services.stop()
    stats = EngineStats(done=dispatch.trials, errors=dispatch.errors, by_status=by_status)
    return session.result(stats)


def _dispatch(session: Session, dispatcher: Dispatcher, services: Any, size: int, dispatch: DispatchStats,
              by_status: dict[str, int], *, quiet: bool, cache_on: bool, watch_interval_s: float) -> None:
    """Feed the pending grid to the workers in chunks, write what they return, watch; stop when the budget says."""
    budget = session.loaded.sweep.budget
    watch = Watch(session.total, len(session.done), interval_s=watch_interval_s)
    log_lines = [True]

    def cache_hits() -> int:  # as of the last poll: asking the cache actor per chunk would queue behind workers
        return (watch.record.cache_hits or 0) if watch.record is not None else 0

    def publish() -> None:
        spend = services.spend()
        cache = services.cache_stats()
        watch.poll(dispatcher.workers, requeued=dispatch.requeued_chunks, lost=dispatch.workers_lost, spend=spend,
                   budget=budget.describe() if budget is not None else None,
                   cache_hits=None if cache is None else int(cache["hits"]))
        # on a terminal the progress bar shows it; in a log (a Ray Job's) a line every interval does
        watch.publish(session.manifest, session.save, log=log_lines[0])

    chunks = chunked(session.pending(), size)
    try:
        with session.sink(SINK_NAME) as sink, \
                RunProgress(session.total, already_done=len(session.done), quiet=quiet,
                            cache_hits=cache_hits if cache_on else None,
                            detail=lambda: detail_line(watch.record) if watch.record else "") as progress:
            rows = session.metered(sink)
            next_drain = [time.monotonic() + 1.0]
            log_lines[0] = not progress.enabled

            def on_result(chunk: Any, batch: pa.RecordBatch, errors: int, result_stopped: bool) -> None:
                rows.write_batch(batch)
                _count(batch, by_status)
                watch.done += batch.num_rows
                progress.advance(batch.num_rows, errors)
                if result_stopped:
                    session.stop()  # no new chunk is handed out; the outstanding ones end early
                if time.monotonic() >= next_drain[0]:  # remedies reach the manifest as they are learned
                    next_drain[0] = time.monotonic() + 1.0
                    services.drain_remedies(session.learned)
                if watch.due():
                    publish()

            def on_idle() -> None:
                if watch.due():
                    publish()

            dispatcher.run(chunks, on_result, stats=dispatch, on_idle=on_idle)
        if session.should_stop() and next(chunks, None) is not None:  # the budget left chunks never handed out
            session.stop()
        if session.stopping:
            final = services.spend()  # the spend meter's words: it counts every worker's trials, lost ones too
            if final is not None and final.exhausted:
                session.stop(final.reason)
    finally:
        try:
            services.drain_remedies(session.learned)
            cache = services.cache_stats()
            if cache is not None:
                session.record_cache(cache)
            log_lines[0] = True  # the last summary is logged either way
            publish()
        except Exception as exc:
            say(f"could not collect the shared services' counts at the end: {type(exc).__name__}")


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
