"""The Ray backend's own options: what ``RunOptions.backend_options`` may hold for ``mode="ray"``.

``runner``'s generic ``RunOptions`` carries no Ray fields: a backend's options travel as a
mapping (``runner.run(address=..., workers=...)`` puts them there) and the backend reads
them through its own model, so a misspelt or ill-typed one fails in one line here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runner.core.errors import UserError


class RayOptions(BaseModel):
    """How to run on Ray, beside the generic options (quiet, say, cache, retries...)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    address: str = Field(default="auto", description="the cluster: auto, local or an address (cluster.session)")
    workers: int | None = Field(default=None, ge=1, description="worker actors (default: one per CPU of the cluster)")

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
