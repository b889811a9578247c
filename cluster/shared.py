"""The run's shared services on Ray: limiter actors per provider key, the remedy actor,
and, when the run has them, the spend meter (``cluster.spend``) and the response cache
(``cluster.cache``) — both pinned to the driver's node.

The driver starts them (``SharedServices.start``) before any worker, gives each
worker a ``WorkerHooks`` — the picklable recipe a worker runs, inside its own
event loop, to get the keyword arguments ``runner.execution.run.build_trial_runner`` takes
for a shared ``book`` and ``limiter_factory`` — and at the end (and as it goes)
drains the remedies learned into the run's session (``Session.learned``), the one
place every mode records them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster.cache import CacheActor, SharedCache
from cluster.limiter import LeasedLimiter, LimiterActor, LimiterKey
from cluster.remedies import RemedyActor, SharedRemedyBook
from cluster.spend import SpendMeterActor, SpendState
from cluster.watch import CountingLimiter, WaitCounter
from runner.config.sweep import LoadedSweep
from runner.core.manifest import Manifest
from runner.providers import CONFIGURED
from runner.providers.limiter import Limiter, make_limiter
from runner.providers.remedies import remedy_from_json
from runner.providers.settings import Limits


@dataclass
class WorkerHooks:
    """What a worker needs to reach the shared services (pickled into each worker actor)."""

    remedy_actor: Any
    limiter_actors: dict[LimiterKey, Any]
    strict_params: bool
    known_remedies: list[dict[str, Any]] = field(default_factory=list)
    #: the run's ``SpendMeterActor`` when the sweep has a budget (the worker builds its ``BudgetGate``)
    spend_actor: Any = None
    #: the run's ``CacheActor`` when the run uses the response cache
    cache_actor: Any = None

    def __call__(self, index: int, workers: int) -> dict[str, Any]:
        import ray

        me = ray.get_runtime_context().current_actor
        self.remedy_actor.subscribe.remote(me)
        for actor in self.limiter_actors.values():
            actor.subscribe.remote(me)
        actors = self.limiter_actors
        waits = WaitCounter()

        def limiter_factory(key: LimiterKey, limits: Limits | None) -> Limiter:
            actor = actors.get(tuple(key))  # type: ignore[arg-type]
            # every HTTP key gets its actor (a learned pace is shared even without `limits:`)
            if actor is None:
                return CountingLimiter(make_limiter(limits), waits)
            return CountingLimiter(LeasedLimiter(actor, key, limits or Limits(), index, workers), waits)

        extra: dict[str, Any] = {"book": SharedRemedyBook(self.remedy_actor), "limiter_factory": limiter_factory,
                                 "strict_params": self.strict_params, "known_remedies": self.known_remedies,
                                 "wait_counter": waits}
        if self.cache_actor is not None:
            extra["cache"] = SharedCache(self.cache_actor)
        return extra


class SharedServices:
    def __init__(self, remedy_actor: Any, limiter_actors: dict[LimiterKey, Any], strict_params: bool,
                 known_remedies: list[dict[str, Any]], spend_actor: Any = None, cache_actor: Any = None) -> None:
        self.remedy_actor = remedy_actor
        self.limiter_actors = limiter_actors
        self.strict_params = strict_params
        self.known_remedies = known_remedies
        self.spend_actor = spend_actor
        self.cache_actor = cache_actor

    @classmethod
    def start(cls, loaded: LoadedSweep, manifest: Manifest, *, strict_params: bool = False,
              window_s: float = 60.0, spent: tuple[float, int] | None = None,
              cache_dir: Path | None = None) -> SharedServices:
        """Start the actors (no CPU reserved: they are waiting on calls, not computing).

        ``spent`` (what the output already spent) starts the spend meter, with a budget;
        ``cache_dir`` starts the cache actor. Both run on this (the driver's) node: the
        cache's file is on its disk, and the meter is asked by every worker.
        """
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        spend_actor = cache_actor = None
        if loaded.sweep.budget is not None:
            usd, tokens = spent or (0.0, 0)
            remote_meter: Any = ray.remote(SpendMeterActor)
            spend_actor = remote_meter.options(num_cpus=0, max_concurrency=1,
                                                              scheduling_strategy=here).remote(
                loaded.sweep.prices, loaded.sweep.budget, usd, tokens)
        if cache_dir is not None:
            remote_cache: Any = ray.remote(CacheActor)
            cache_actor = remote_cache.options(num_cpus=0, max_concurrency=1,
                                                         scheduling_strategy=here).remote(str(cache_dir.resolve()))
            ray.get(cache_actor.stats.remote())  # a directory it cannot open fails the run here

        known = [r.as_json() for r in manifest.remedies] if not strict_params else []
        parsed = [p for p in (remedy_from_json(e) for e in known) if p is not None]
        remedy_actor = ray.remote(RemedyActor).options(num_cpus=0, max_concurrency=1000).remote(parsed)
        limits_by_key: dict[LimiterKey, Limits] = {}
        for m in loaded.sweep.models:
            if m.provider not in CONFIGURED:
                continue  # in-process providers are not limited
            # every key of a reached provider gets an actor, limits or not: the pace it learns is shared
            limits_by_key.setdefault(m.connection.limiter_key, getattr(m, "limits", None) or Limits())
        actor = ray.remote(LimiterActor).options(num_cpus=0, max_concurrency=10_000)
        limiter_actors = {key: actor.remote(key, limits, window_s) for key, limits in limits_by_key.items()}
        return cls(remedy_actor, limiter_actors, strict_params, known, spend_actor, cache_actor)

    def hooks(self) -> WorkerHooks:
        return WorkerHooks(self.remedy_actor, self.limiter_actors, self.strict_params, self.known_remedies,
                           self.spend_actor, self.cache_actor)

    def spend(self) -> SpendState | None:
        import ray

        return None if self.spend_actor is None else ray.get(self.spend_actor.state.remote())

    def cache_stats(self) -> dict[str, Any] | None:
        import ray

        return None if self.cache_actor is None else ray.get(self.cache_actor.stats.remote())

    def drain_remedies(self, learned: Callable[[dict[str, Any]], None]) -> int:
        """Hand each newly learned remedy to ``learned`` once (the run's ``Session.learned``); return how many."""
        import ray

        entries = ray.get(self.remedy_actor.new_entries.remote())
        for entry in entries:
            learned(entry)
        return len(entries)

    def limiter_counters(self) -> dict[LimiterKey, dict[str, int]]:
        import ray

        return {key: ray.get(a.counters.remote()) for key, a in self.limiter_actors.items()}

    def stop(self) -> None:
        import ray

        if self.cache_actor is not None:
            try:
                ray.get(self.cache_actor.close.remote(), timeout=30)
            except Exception:
                pass
        extra = [a for a in (self.spend_actor, self.cache_actor) if a is not None]
        for actor in [self.remedy_actor, *self.limiter_actors.values(), *extra]:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:
                pass
