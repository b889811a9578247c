"""A sweep whose models (some or all) go through the vendors' batch APIs: submit, poll, collect.

The order of a session:

1. open the output as any run does (``run.open_output``: manifest, repair, resume set)
   and read ``OUT/batches.json``; trials waiting in a batch not yet collected are
   *covered* and never submitted again;
2. record the request of every other pending batch-mode trial (``capture``), and
   submit them per model in batches of ``engine.batch_max_requests`` — each batch is
   written to the ledger as soon as the vendor accepts it;
3. run the live-mode models' trials through the ordinary engine meanwhile;
4. poll the open batches every ``engine.batch_poll_s``; when one ends, fetch its
   results and replay its trials through the ordinary ``TrialRunner`` into the same
   sink (the probe scores the batch's answer with its own code), flush, and mark the
   batch collected.

A failed, expired or missing per-request result is an error row with its kind
(``expired``, ``transient``, ``rejected_param``, ``fatal``...), never dropped and
never scored. Learned parameter remedies are not applied to batch requests: a
rejected parameter is a ``rejected_param`` error row. Only single-turn probes can
run this way (``Probe.single_turn``); a multi-turn probe (``propagation``) is refused
before anything is sent, by ``runner.execution.modes``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

from runner.config.sweep import LoadedSweep, ModelConfig
from runner.core.errors import UserError
from runner.core.manifest import BatchRecord, RemedyRecord, write_manifest
from runner.core.types import TrialSpec
from runner.execution.backends.base import RunOptions
from runner.execution.backends.batch.capture import CURRENT_TRIAL, ReplayProvider, body_hash, capture_request
from runner.execution.backends.batch.ledger import COLLECTED, ENDED, BatchEntry, BatchLedger
from runner.execution.backends.batch.vendors import VENDORS, VendorBatches
from runner.execution.engine import EngineStats, run_trials
from runner.execution.progress import RunProgress
from runner.execution.run import RunOutput, RunResult, build_trial_runner, open_output, per_model_concurrency
from runner.execution.trial import ModelBinding, TrialRunner
from runner.output.sink import TrialSink
from runner.providers import ProviderError
from runner.providers.remedies import Learned


class _Session:
    """The state of one batch-mode session: vendors, replay runner, ledger, sink, counts."""

    def __init__(self, loaded: LoadedSweep, output: RunOutput, ledger: BatchLedger, chosen: set[str],
                 say: Callable[[str], None]) -> None:
        self.loaded, self.output, self.ledger, self.say = loaded, output, ledger, say
        self.models: dict[str, ModelConfig] = {m.name: m for m in loaded.sweep.models if m.name in chosen}
        self.probes = {p.name: p for p in loaded.probes}
        self.vendors: dict[str, VendorBatches] = {}
        self.replays: dict[str, ReplayProvider] = {}
        bindings = {}
        for name, m in self.models.items():
            vendor = self.vendors[name] = VENDORS[m.provider](m.connection, m.retry)
            replay = self.replays[name] = ReplayProvider(vendor.encode, f" to {m.provider} at {vendor.base}")
            bindings[name] = ModelBinding(name, m.provider, replay, m.model_id, dict(m.params), m.tool_call_parser)
        self.runner = TrialRunner(self.probes, bindings, loaded.sweep.engine.timeout_s)
        self.stats = EngineStats()

    async def aclose(self) -> None:
        await self.runner.aclose()
        for vendor in self.vendors.values():
            await vendor.aclose()

    async def _replay(self, spec: TrialSpec) -> dict[str, Any]:
        token = CURRENT_TRIAL.set(spec.trial_id)
        try:
            return await self.runner(spec)
        finally:
            CURRENT_TRIAL.reset(token)
            self.replays[spec.model].forget(spec.trial_id)

    async def write(self, specs: list[TrialSpec], sink: TrialSink, progress: RunProgress) -> EngineStats:
        stats = await run_trials(specs, self._replay, sink, concurrency=self.loaded.sweep.engine.concurrency,
                                 progress=progress)
        sink.flush()  # before the ledger says "collected": a kill must not lose rows the ledger calls written
        self.stats.done += stats.done
        self.stats.errors += stats.errors
        for status, n in stats.by_status.items():
            self.stats.by_status[status] = self.stats.by_status.get(status, 0) + n
        return stats

    async def submit(self, pending: dict[str, TrialSpec], sink: TrialSink, progress: RunProgress) -> None:
        """Record and submit every pending trial no open batch covers."""
        covered = self.ledger.covered()
        cap = self.loaded.sweep.engine.batch_max_requests
        queued: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        unasked: list[TrialSpec] = []
        for tid, spec in pending.items():
            if tid in covered:
                continue
            m = self.models[spec.model]
            request = await capture_request(self.probes[spec.probe], spec, m.model_id, m.params)
            if request is None:
                unasked.append(spec)
                continue
            items = queued.setdefault(spec.model, [])
            items.append((tid, self.vendors[spec.model].encode(request)))
            if len(items) >= cap:
                await self._submit(spec.model, items)
                items.clear()
        for model, items in queued.items():
            if items:
                await self._submit(model, items)
        if unasked:  # the probe ended (or failed) without asking the model: its row needs no batch
            await self.write(unasked, sink, progress)

    async def _submit(self, model: str, items: list[tuple[str, dict[str, Any]]]) -> None:
        m, vendor = self.models[model], self.vendors[model]
        label = self.ledger.next_label()
        remote = await vendor.submit(items, f"{self.loaded.sweep_id}-{label}")
        self.ledger.add(BatchEntry(label, model, m.provider, vendor.base, remote,
                                   {tid: body_hash(body) for tid, body in items}))
        self.say(f"submitted batch {label} ({remote['id']}): {len(items):,} requests of model {model!r}")

    async def collect(self, pending: dict[str, TrialSpec], sink: TrialSink, progress: RunProgress) -> None:
        """Poll until every batch in the ledger is collected."""
        poll_s = self.loaded.sweep.engine.batch_poll_s
        while True:
            open_entries = self.ledger.open_entries()
            if not open_entries:
                return
            for entry in open_entries:
                vendor = self.vendors[entry.model]
                poll = await vendor.poll(entry.remote)
                changed = (poll.status, poll.counts) != (entry.vendor_status, entry.counts)
                entry.vendor_status, entry.counts = poll.status, poll.counts
                if not poll.ended:
                    if changed:
                        self.ledger.save()
                    continue
                if entry.state != ENDED:
                    entry.state, entry.ended_at = ENDED, time.time()
                    self.ledger.save()
                answers = await vendor.results(entry.remote, poll, entry.trials)
                replay = self.replays[entry.model]
                specs = []
                for tid, submitted in entry.trials.items():
                    spec = pending.get(tid)
                    if spec is not None:  # not written by an earlier session
                        replay.answers[tid] = (answers[tid], submitted)
                        specs.append(spec)
                stats = await self.write(specs, sink, progress)
                entry.state, entry.collected_at = COLLECTED, time.time()
                self.ledger.save()
                self.say(f"collected batch {entry.label} ({entry.remote.get('id')}, {poll.status}): "
                         f"{stats.done:,} rows, {stats.errors:,} errors")
            if self.ledger.open_entries():
                await asyncio.sleep(poll_s)


def run_batch_sweep(loaded: LoadedSweep, out: Path, *, models: Collection[str], quiet: bool = False,
                    say: Callable[[str], None] = lambda s: None, worker: str = "local", strict_params: bool = False,
                    notify: Callable[[str], None] | None = None, retry_kinds: Sequence[str] | None = None,
                    wait: bool = False) -> RunResult:
    """Run (or resume) ``loaded`` into ``out``, sending ``models`` through batch APIs and the others live.

    ``models`` comes checked from ``runner.execution.modes.batch_models`` (``runner.run``
    calls this through ``BATCH``): each has a batch API and every probe is single-turn.
    """
    submitting = set(models)
    output = open_output(loaded, out, say, retry_kinds=retry_kinds, wait=wait)
    try:
        ledger = BatchLedger(output.out)
        covered = ledger.covered()
        # a batch an earlier session submitted is polled even if this session runs its model live
        chosen = submitting | {e.model for e in ledger.open_entries() if any(m.name == e.model for m in loaded.sweep.models)}
        if not chosen:
            raise UserError("no model of this sweep runs in batch mode", file=loaded.path,
                            hint="set `mode: batch` on an openai or anthropic model, or pass --batch")
        output.manifest.strict_params = strict_params
        output.manifest.batch_models = sorted(chosen)

        def learned(entry: Learned) -> None:
            output.manifest.remedies.append(RemedyRecord.model_validate(entry.as_json()))
            write_manifest(output.out, output.manifest)
            if notify is not None:
                notify(f"remedy learned for {entry.provider} model {entry.model_id!r}: {entry.remedy.describe()} "
                       f"(the server said: {entry.message}); applied to every later live request, recorded in the manifest")

        live, providers = build_trial_runner(loaded, strict_params=strict_params, on_learn=learned,
                                             known_remedies=[r.as_json() for r in output.manifest.remedies])
        pending = {s.trial_id: s for s in output.pending() if s.model in submitting or s.trial_id in covered}
    except BaseException:
        output.finish("failed", 0, 0.0)
        raise
    started = time.perf_counter()
    status = "interrupted"
    session: _Session | None = None
    stats = EngineStats()
    opened: list[TrialSink] = []
    try:
        with output.sink(worker) as sink, \
                RunProgress(output.total, already_done=len(output.done), quiet=quiet) as progress:
            opened.append(sink)
            session = _Session(loaded, output, ledger, chosen, say)

            async def main() -> EngineStats:
                assert session is not None
                try:
                    await session.submit(pending, sink, progress)
                    live_specs = (s for s in output.pending() if s.model not in submitting and s.trial_id not in covered)
                    live_stats = await run_trials(live_specs, live, sink,
                                                  concurrency=loaded.sweep.engine.concurrency,
                                                  per_model=per_model_concurrency(loaded), progress=progress)
                    await session.collect(pending, sink, progress)
                finally:
                    await session.aclose()
                    await live.aclose()
                    for provider in providers:
                        await provider.aclose()
                total = session.stats
                total.done += live_stats.done
                total.errors += live_stats.errors
                for key, n in live_stats.by_status.items():
                    total.by_status[key] = total.by_status.get(key, 0) + n
                return total

            try:
                stats = asyncio.run(main())
            except ProviderError as exc:
                raise UserError(f"batch mode: {exc.message}", hint="submitted batches and written trials are kept "
                                f"(see {ledger.path}); fix the cause and rerun the same command to resume") from None
        status = "complete"
    finally:
        elapsed = time.perf_counter() - started
        output.manifest.batches = [BatchRecord.model_validate(b) for b in ledger.summary()]
        if session is not None and stats.done == 0:
            stats = session.stats
        counts = output.finish(status, opened[0].rows_written if opened else 0, elapsed)
    return RunResult(output.out, output.total, len(output.done), stats, counts, elapsed, output.repaired, status)


class _BatchBackend:
    """The ``batch`` backend: ``options.batch_models`` through the vendors' batch APIs, the rest live."""

    name = "batch"

    def run(self, loaded: LoadedSweep, out: Path, options: RunOptions) -> RunResult:
        return run_batch_sweep(loaded, out, models=options.batch_models, quiet=options.quiet, say=options.say,
                               strict_params=options.strict_params, notify=options.notify,
                               retry_kinds=options.retry_kinds, wait=options.wait)


BATCH = _BatchBackend()
