"""What a Ray session writes into the manifest: cluster mode's own records, in the session's extension slot.

The core manifest (``runner.core.manifest``) knows nothing of Ray: each session has an
``extensions`` mapping, one JSON object per plug-in, which the core keeps verbatim. Cluster
mode owns the ``"ray"`` entry and its shape: the address asked for, and the live summary
(``watch``) the driver rewrites as it goes and ``trialgrid job status JOB`` prints. ``ray_record``
reads it back through these models, so a damaged entry fails in one located line here,
not in every reader.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runner.core.errors import UserError
from runner.core.manifest import SessionRecord

#: the key of cluster mode's entry in ``SessionRecord.extensions``
EXTENSION = "ray"


class _Record(BaseModel):
    # frozen: a summary is rebuilt, never edited; unknown keys (a newer trialgrid's) are ignored on read
    model_config = ConfigDict(extra="ignore", frozen=True)


class WorkerWatch(_Record):
    """One Ray worker in a cluster run's live summary."""

    index: int = Field(description="the worker's slot")
    trials: int = Field(description="trials it ran (since it started)")
    trials_per_s: float = Field(description="its rate over the last interval")
    in_flight: int = Field(description="requests it had in flight")
    limiter_waits: int = Field(description="sends that waited on a rate or concurrency limit")


class WatchRecord(_Record):
    """A cluster run's live summary (``trialgrid job status JOB`` prints it while the job runs)."""

    at: str = Field(description="when it was written (ISO 8601, UTC)")
    done: int = Field(description="trials written, this session and before")
    total: int = Field(description="trials in the grid")
    trials_per_s: float = Field(description="the run's rate over the last interval")
    requeued_chunks: int = Field(default=0, description="chunks re-run after a worker was lost")
    workers_lost: int = Field(default=0, description="workers lost (and replaced)")
    spent_usd: float | None = Field(default=None, description="spend so far, with a budget")
    spent_tokens: int | None = Field(default=None, description="tokens so far, with a budget")
    budget: str | None = Field(default=None, description="the budget in force")
    cache_hits: int | None = Field(default=None, description="answers served by the response cache")
    workers: list[WorkerWatch] = Field(default_factory=list, description="per worker")


class RaySessionRecord(_Record):
    """``sessions[i].extensions["ray"]``: how a session ran on Ray."""

    address: str | None = Field(default=None, description="the Ray address asked for (auto, local or a cluster "
                                                          "address); the driver records it as the session starts")
    watch: WatchRecord | None = Field(default=None, description="the live summary, rewritten as the run goes")


def ray_record(session: SessionRecord, *, index: int = -1, file: Path | None = None) -> RaySessionRecord | None:
    """The Ray record of ``session`` (``sessions[index]`` of the manifest ``file``); None for a session that did not
    run on Ray. A damaged entry is a ``UserError`` naming the file and the key path."""
    data = session.extensions.get(EXTENSION)
    if data is None:
        return None
    try:
        return RaySessionRecord.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UserError(f"damaged run manifest: {first['msg']}", file=file,
                        key_path=("sessions", index, "extensions", EXTENSION, *first["loc"]),
                        hint="restore it, or start the sweep in an empty --out directory") from None


def put_ray_record(session: SessionRecord, record: RaySessionRecord) -> None:
    """Write ``record`` into ``session``'s extension slot (replacing the previous one)."""
    # reassigned, not mutated in place: the session validates on assignment
    session.extensions = {**session.extensions, EXTENSION: record.model_dump(mode="json", exclude_none=True)}


__all__ = ["EXTENSION", "RaySessionRecord", "WatchRecord", "WorkerWatch", "put_ray_record", "ray_record"]
