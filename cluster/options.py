"""The Ray backend's own options: ``RunOptions``' ``address`` and ``workers``, and what its ``backend_options`` may hold.

``runner``'s ``RunOptions`` knows the cluster only as an address and a worker count (the
``--ray`` and ``--workers`` flags); the Ray backend's tuning travels as the mapping
``backend_options`` (``runner.run(..., mode="ray", backend_options={"chunk_size": 64})``)
and is read through this model, so a misspelt or ill-typed one fails in one line here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runner.core.errors import UserError


class RayOptions(BaseModel):
    """How to run on Ray, beside the generic options (quiet, cache, retries...)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    address: str = Field(default="auto", description="the cluster: auto, local or an address (cluster.session)")
    workers: int | None = Field(default=None, ge=1, description="worker actors (default: one per CPU of the cluster)")
    chunk_size: int | None = Field(default=None, ge=1, description="trials per chunk handed to a worker "
                                                                  "(default: twice a worker's concurrency)")
    in_flight: int = Field(default=2, ge=1, description="chunks outstanding per worker")
    num_cpus: int | None = Field(default=None, ge=1, description="CPUs of a cluster started here (address local)")
    temp_dir: str | None = Field(default=None, description="Ray's temp dir for a cluster started here")
    ship_code: bool | None = Field(default=None, description="send trialgrid's packages to the workers "
                                                             "(default: unless inside a Ray Job)")
    limiter_window_s: float = Field(default=60.0, gt=0, description="the shared rate limiter's window "
                                                                    "(providers count per minute)")
    watch_interval_s: float = Field(default=5.0, gt=0, description="how often the cluster's summary is logged "
                                                                   "and written into the manifest")

    @classmethod
    def of(cls, options: Mapping[str, Any]) -> RayOptions:
        """``options`` checked; an unknown or ill-typed one is a one-line ``UserError``."""
        try:
            return cls.model_validate(dict(options))
        except ValidationError as exc:
            first = exc.errors()[0]
            key = ".".join(str(p) for p in first["loc"]) or "options"
            raise UserError(f"Ray backend option {key!r}: {first['msg']}",
                            hint=f"the Ray backend takes {', '.join(cls.model_fields)}") from None


__all__ = ["RayOptions"]
