"""``OUT/batches.json``: every batch this output submitted, so a killed run polls instead of resubmitting.

An entry is written (atomically: temp file + rename) right after the vendor
accepted the batch, before anything waits on it, and updated as it is polled:
``submitted`` → ``ended`` → ``collected`` (its rows are in the sink, flushed). On
resume, the trial ids of every entry not yet collected are *covered*: they are not
recorded or submitted again, their batch is polled. Each entry also keeps the hash
of the body submitted for every trial, which the replay checks.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from runner.core.errors import UserError

_LEDGER = "batches.json"
FORMAT_VERSION = 1
_SUBMITTED, ENDED, COLLECTED = "submitted", "ended", "collected"


@dataclass
class BatchEntry:
    label: str  # ours: b0001, b0002 ... (also sent as the OpenAI batch's metadata)
    model: str  # the sweep's model label
    provider: str
    endpoint: str
    remote: dict[str, Any]  # the vendor's ids: id (and the OpenAI input_file_id)
    trials: dict[str, str]  # trial id → hash of the body submitted for it
    state: str = _SUBMITTED
    vendor_status: str = ""
    counts: dict[str, int] = field(default_factory=dict)
    submitted_at: float = 0.0
    ended_at: float | None = None
    collected_at: float | None = None


def has_open_batches(out: Path) -> bool:
    """True if ``out`` holds batches submitted but not yet collected (a rerun must poll them)."""
    path = out / _LEDGER
    if not path.exists():
        return False
    return bool(BatchLedger(out).open_entries())


class BatchLedger:
    def __init__(self, out: Path) -> None:
        self.path = out / _LEDGER
        self.entries: list[BatchEntry] = []
        if self.path.exists():
            try:
                data = json.loads(self.path.read_text())
                self.entries = [BatchEntry(**e) for e in data["batches"]]
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise UserError(f"cannot read the batch ledger: {exc}", file=self.path,
                                hint="it lists the batches this output submitted; restore it, or delete it to "
                                     "resubmit every trial not yet written") from None

    def open_entries(self) -> list[BatchEntry]:
        return [e for e in self.entries if e.state != COLLECTED]

    def covered(self) -> set[str]:
        """Trial ids waiting in a batch that has not been collected yet."""
        return {tid for e in self.open_entries() for tid in e.trials}

    def next_label(self) -> str:
        return f"b{len(self.entries) + 1:04d}"

    def add(self, entry: BatchEntry) -> None:
        entry.submitted_at = time.time()
        self.entries.append(entry)
        self.save()

    def save(self) -> None:
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps({"format_version": FORMAT_VERSION, "batches": [asdict(e) for e in self.entries]},
                                  indent=1) + "\n")
        os.replace(tmp, self.path)

    def summary(self) -> list[dict[str, Any]]:
        """What the manifest records of each batch (the ledger keeps the trial lists)."""
        return [{"label": e.label, "model": e.model, "provider": e.provider, "id": e.remote.get("id"),
                 "state": e.state, "vendor_status": e.vendor_status, "requests": len(e.trials)} for e in self.entries]
