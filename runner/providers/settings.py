"""How to reach a provider and how hard to push it: the sweep keys a model entry adds.

These are the pydantic pieces ``runner.config.sweep.ModelConfig`` embeds (the config
imports providers, never the reverse), plus ``Connection``: the plain, hashable
identity of one endpoint as the provider factories see it. The API key itself is
never a setting — only the *name* of the environment variable that holds it.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Limits(BaseModel):
    """Per provider and API key: what the account allows. Shared by every model on the key."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_concurrent: int | None = Field(default=None, ge=1, le=100_000, description="requests in flight at once")
    rpm: int | None = Field(default=None, ge=1, description="requests per minute (sliding 60 s window)")
    tpm: int | None = Field(default=None, ge=1, description="tokens per minute (estimated before a call, reconciled from usage)")

    @property
    def any(self) -> bool:
        return self.max_concurrent is not None or self.rpm is not None or self.tpm is not None


class RetryPolicy(BaseModel):
    """Retries of rate-limited and transient failures.

    Transient failures (5xx, timeouts, bad bodies) are retried with exponential
    backoff and full jitter, up to ``max_attempts`` requests. Rate-limited ones (429)
    are not counted against that: the limiter learns the pace from them, so they are
    retried after the server's retry-after for as long as ``max_wait_s`` allows (and
    the trial's own deadline).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_attempts: int = Field(default=6, ge=1, le=100,
                              description="requests per call, the first included (transient failures)")
    max_wait_s: float = Field(default=300.0, gt=0,
                              description="how long one call may keep being rate limited (429) before it fails")
    backoff_base_s: float = Field(default=1.0, ge=0, description="first backoff ceiling; doubles per retry")
    backoff_max_s: float = Field(default=60.0, ge=0, description="backoff ceiling")

    @model_validator(mode="after")
    def _ordered(self) -> RetryPolicy:
        if self.backoff_max_s < self.backoff_base_s:
            raise ValueError("backoff_max_s must be >= backoff_base_s")
        return self


#: header names that carry credentials: refused in ``headers`` (the key comes from ``api_key_env``)
CREDENTIAL_HEADER = re.compile(r"authorization|api[-_]?key|token|secret|cookie|password", re.IGNORECASE)

DEFAULT_BASE_URL = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com/v1",
    "openai-responses": "https://api.openai.com/v1",
}
DEFAULT_KEY_ENV = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "openai-responses": "OPENAI_API_KEY",
}


@dataclass(frozen=True)
class Connection:
    """One endpoint as a provider factory sees it. Hashable: equal connections share a client."""

    provider: str
    base_url: str | None = None
    api_key_env: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    timeout_s: float = 60.0
    function: str | None = None
    #: send the trial seed where ``trialgrid serve`` reads it; None: only to a loopback ``base_url``
    sim_seed: bool | None = None
    #: provider callable: the sweep file's folder, put on the import path before ``function`` is imported
    function_path: str | None = None

    @property
    def header_map(self) -> Mapping[str, str]:
        return dict(self.headers)

    @property
    def sends_seed(self) -> bool:
        """Whether requests carry the simulator's seed channels (``seed_channel.py``): never to a vendor unasked."""
        return self.sim_seed if self.sim_seed is not None else is_loopback(self.base_url)

    @property
    def limiter_key(self) -> tuple[str, str, str]:
        """Limits are per provider and per API key: the endpoint plus the key's variable."""
        return (self.provider, self.base_url or self.function or "", self.api_key_env or "")


def is_loopback(base_url: str | None) -> bool:
    """``base_url`` names this machine (``localhost``, ``127.0.0.0/8``, ``::1``, or ``0.0.0.0``, which a client
    reaches as this machine). No ``base_url`` is the vendor's public API: not loopback."""
    if not base_url:
        return False
    try:
        host = urlsplit(base_url).hostname
    except ValueError:
        return False
    if host is None:
        return False
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified
