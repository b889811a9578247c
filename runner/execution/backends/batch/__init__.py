"""Batch mode: a sweep's single-turn trials sent through the vendors' batch APIs, for overnight sweeps.

OpenAI Batch and Anthropic Message Batches answer at a fraction of the price, hours
later. Batch mode is a different transport, not a different measurement: requests
are built by the probes themselves (recorded, ``capture``), encoded by the live wire
formats and sent through each vendor's batch API (``runner.providers.batches``, beside the wire
formats), tracked in ``OUT/batches.json`` so a killed run resumes by
polling (``ledger``), and their answers are scored by replaying the probe through
the ordinary trial runner into the ordinary sink (``run``). The engine and the
probes know nothing of it; which models go this way is decided by ``runner.execution.modes``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runner.execution.backends.batch.run import BATCH, run_batch_sweep

__all__ = ["BATCH", "run_batch_sweep"]


def __getattr__(name: str) -> Any:
    # imported when used: every run reads the ledger (``ledger.has_open_batches``), and only a batch run needs the
    # submit-poll-collect machinery, the vendors' HTTP clients and the probes it replays
    if name in __all__:
        from runner.execution.backends.batch import run

        return getattr(run, name)
    raise AttributeError(name)
