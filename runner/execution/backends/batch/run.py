"""A sweep whose models (some or all) go through the vendors' batch APIs: submit, poll, collect.

The order of a session:

1. open the session as any run does (``runner.execution.session``: lock, manifest,
   repair, resume set, budget) and read ``OUT/batches.json``; trials waiting in a batch
   not yet collected are *covered* and never submitted again;
2. record the request of every other pending batch-mode trial (``capture``), price it
   (``CostMeter.estimate``: a submitted batch is paid for whatever it costs, so the
   budget is checked *before* submitting) and submit them per model in batches of
   ``engine.batch_max_requests`` — each batch is written to the ledger as soon as the
   vendor accepts it. With a ``budget:``, requests are taken in grid order while their
   estimate fits what is left; the first that does not ends the submitting: the batch
   is *cut* to what fits, or *refused* when nothing fits, and the session ends
   ``stopped_budget`` with one line that says which (a rerun with a raised budget
   submits the rest);
3. run the live-mode models' trials through the ordinary engine meanwhile, metered by
   the same budget;
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
from collections.abc import Collection
from pathlib import Path
from typing import Any

from runner.config.sweep import LoadedSweep, ModelConfig
from runner.core.errors import UserError
from runner.core.manifest import BatchRecord
from runner.core.messages import say
from runner.core.types import TrialSpec
from runner.execution.backends.base import Plan
from runner.execution.backends.batch.capture import CURRENT_TRIAL, ReplayProvider, body_hash, capture_request
from runner.execution.backends.batch.ledger import COLLECTED, ENDED, BatchEntry, BatchLedger
from runner.execution.budget import CostMeter
from runner.execution.engine import EngineStats, RowSink, run_trials
from runner.execution.options import RunOptions
from runner.execution.progress import RunProgress
from runner.execution.run import RunResult, build_trial_runner, per_model_concurrency
from runner.execution.session import Session
from runner.execution.trial import ModelBinding, TrialRunner
from runner.output.sink import TrialSink
from runner.providers import ProviderError
from runner.providers.batches import VENDORS, VendorBatches


class _Batches:
    """The batch side of one session: vendors, replay runner, ledger, the rows' sink, counts."""

    def __init__(self, session: Session, ledger: BatchLedger, chosen: set[str], sink: TrialSink) -> None:
        self.session, self.loaded, self.ledger, self.sink = session, session.loaded, ledger, sink
        self.rows: RowSink = session.metered(sink)  # every row, batch or live, counts against the budget
        loaded = session.loaded
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

    async def write(self, specs: list[TrialSpec], progress: RunProgress) -> EngineStats:
        # never stopped by the budget: these trials' answers are paid for already
        stats = await run_trials(specs, self._replay, self.rows, concurrency=self.loaded.sweep.engine.concurrency,
                                 progress=progress)
        self.sink.flush()  # before the ledger says "collected": a kill must not lose rows the ledger calls written
        self.stats.done += stats.done
        self.stats.errors += stats.errors
        for status, n in stats.by_status.items():
            self.stats.by_status[status] = self.stats.by_status.get(status, 0) + n
        return stats

    async def submit(self, pending: dict[str, TrialSpec], progress: RunProgress) -> None:
        """Record, price and submit every pending trial no open batch covers, while it fits the budget."""
        covered = self.ledger.covered()
        cap = self.loaded.sweep.engine.batch_max_requests
        meter = self.session.meter
        queued: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        unasked: list[TrialSpec] = []
        fit = _Tally()  # the requests submitted this session, and their estimate
        cut = _Tally()  # those left out for the budget
        for tid, spec in pending.items():
            m = self.models[spec.model]
            if tid in covered:
                if meter is not None:  # submitted by an earlier session, not yet written: its cost is committed
                    request = await capture_request(self.probes[spec.probe], spec, m.model_id, m.params)
                    if request is not None:
                        meter.reserve(tid, *meter.estimate(spec.model, request))
                continue
            request = await capture_request(self.probes[spec.probe], spec, m.model_id, m.params)
            if request is None:
                unasked.append(spec)
                continue
            if meter is not None:
                usd, tokens = meter.estimate(spec.model, request)
                if cut.n or self.session.should_stop() or not meter.fits(usd, tokens):
                    cut.add(usd, tokens)  # once one does not fit, none after it goes: the cut is a grid-order prefix
                    continue
                meter.reserve(tid, usd, tokens)
                fit.add(usd, tokens)
            items = queued.setdefault(spec.model, [])
            items.append((tid, self.vendors[spec.model].encode(request)))
            if len(items) >= cap:
                await self._submit(spec.model, items)
                items.clear()
        for model, items in queued.items():
            if items:
                await self._submit(model, items)
        if cut.n and meter is not None:
            self.session.stop(_cut_line(meter, fit, cut))
        if unasked:  # the probe ended (or failed) without asking the model: its row needs no batch
            await self.write(unasked, progress)

    async def _submit(self, model: str, items: list[tuple[str, dict[str, Any]]]) -> None:
        m, vendor = self.models[model], self.vendors[model]
        label = self.ledger.next_label()
        remote = await vendor.submit(items, f"{self.loaded.sweep_id}-{label}")
        self.ledger.add(BatchEntry(label, model, m.provider, vendor.base, remote,
                                   {tid: body_hash(body) for tid, body in items}))
        say(f"submitted batch {label} ({remote['id']}): {len(items):,} requests of model {model!r}")

    async def collect(self, pending: dict[str, TrialSpec], progress: RunProgress) -> None:
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
                stats = await self.write(specs, progress)
                entry.state, entry.collected_at = COLLECTED, time.time()
                self.ledger.save()
                say(f"collected batch {entry.label} ({entry.remote.get('id')}, {poll.status}): "
                         f"{stats.done:,} rows, {stats.errors:,} errors")
            if self.ledger.open_entries():
                await asyncio.sleep(poll_s)


class _Tally:
    """Requests counted with their estimated cost."""

    def __init__(self) -> None:
        self.n, self.usd, self.tokens = 0, 0.0, 0

    def add(self, usd: float, tokens: int) -> None:
        self.n += 1
        self.usd += usd
        self.tokens += tokens


def _cut_line(meter: CostMeter, fit: _Tally, cut: _Tally) -> str:
    """The one line saying whether the budget refused the batch or cut it to what fits."""
    budget = meter.budget

    def cost(usd: float, tokens: int) -> str:
        return " and ".join(([f"${usd:,.2f}"] if budget.usd is not None else [])
                            + ([f"{tokens:,} tokens"] if budget.tokens is not None else []))

    total = fit.n + cut.n
    spent = cost(meter.usd, meter.tokens)
    if not fit.n:
        return (f"budget of {budget.describe()}: batch refused, nothing submitted: its {total:,} requests are "
                f"estimated at {cost(cut.usd, cut.tokens)} and {spent} is already spent")
    return (f"budget of {budget.describe()}: batch cut to what fits: {fit.n:,} of {total:,} requests submitted "
            f"(estimated {cost(fit.usd, fit.tokens)} of {cost(fit.usd + cut.usd, fit.tokens + cut.tokens)}; "
            f"{spent} already spent); the other {cut.n:,} are not")


def run_batch_sweep(loaded: LoadedSweep, out: Path, options: RunOptions, *, models: Collection[str],
                    worker: str = "local") -> RunResult:
    """Run (or resume) ``loaded`` into ``out``, sending ``models`` through batch APIs and the others live.

    ``models`` comes checked from ``runner.execution.modes.batch_models`` (``runner.run``
    calls this through ``BATCH``): each has a batch API and every probe is single-turn.
    ``options``: the run's ``RunOptions``, as ``runner.run`` checked them.
    """
    submitting = set(models)
    strict_params, quiet = options.strict_params, options.quiet
    stats = EngineStats()
    with Session(loaded, out, options, remedies_apply_to="every later live request") as session:
        ledger = BatchLedger(session.out)
        try:
            covered = ledger.covered()
            # a batch an earlier session submitted is polled even if this session runs its model live
            chosen = submitting | {e.model for e in ledger.open_entries()
                                   if any(m.name == e.model for m in loaded.sweep.models)}
            if not chosen:
                raise UserError("no model of this sweep runs in batch mode", file=loaded.path,
                                hint="set `mode: batch` on an openai or anthropic model, or pass --batch")
            session.manifest.batch_models = sorted(chosen)
            live, providers = build_trial_runner(loaded, strict_params=strict_params, on_learn=session.learned,
                                                 known_remedies=[r.as_json() for r in session.manifest.remedies])
            pending = {s.trial_id: s for s in session.pending() if s.model in submitting or s.trial_id in covered}
            session.begin()
            with session.sink(worker) as sink, \
                    RunProgress(session.total, already_done=len(session.done), quiet=quiet) as progress:
                batches = _Batches(session, ledger, chosen, sink)

                async def main() -> EngineStats:
                    try:
                        await batches.submit(pending, progress)
                        live_specs = (s for s in session.pending()
                                      if s.model not in submitting and s.trial_id not in covered)
                        live_stats = await run_trials(live_specs, live, batches.rows,
                                                      concurrency=loaded.sweep.engine.concurrency,
                                                      per_model=per_model_concurrency(loaded), progress=progress,
                                                      stop=session.should_stop)
                        await batches.collect(pending, progress)
                    finally:
                        await batches.aclose()
                        await live.aclose()
                        for provider in providers:
                            await provider.aclose()
                    if live_stats.stopped:
                        session.stop()
                    total = batches.stats
                    total.done += live_stats.done
                    total.errors += live_stats.errors
                    for key, n in live_stats.by_status.items():
                        total.by_status[key] = total.by_status.get(key, 0) + n
                    return total

                try:
                    stats = asyncio.run(main())
                except ProviderError as exc:
                    raise UserError(f"batch mode: {exc.message}", hint="submitted batches and written trials are "
                                    f"kept (see {ledger.path}); fix the cause and rerun the same command to "
                                    "resume") from None
        finally:
            session.manifest.batches = [BatchRecord.model_validate(b) for b in ledger.summary()]
    return session.result(stats)


class _BatchBackend:
    """The ``batch`` backend: the plan's ``batch_models`` through the vendors' batch APIs, the rest live."""

    name = "batch"

    def run(self, loaded: LoadedSweep, out: Path, options: RunOptions, plan: Plan) -> RunResult:
        return run_batch_sweep(loaded, out, options, models=plan.batch_models)


BATCH = _BatchBackend()
