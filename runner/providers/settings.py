"""How to reach a provider and how hard to push it: the sweep keys a model entry adds.

These are the pydantic pieces ``runner.config.sweep.ModelConfig`` embeds (the config
imports providers, never the reverse), plus ``Connection``: the plain, hashable
identity of one endpoint as the provider factories see it. The API key itself is
never a setting — only the *name* of the environment variable that holds it.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

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

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

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


#: header names that carry credentials: refused in ``headers`` (the key comes from ``api_key_env``). Beside the
#: obvious words, the API gateways' own names: Azure's ``Ocp-Apim-Subscription-Key``, ``X-Auth``/``X-Auth-Token``,
#: ``Proxy-Authorization``, AWS's ``X-Amz-Security-Token`` and signed ``X-Amz-*`` credentials
CREDENTIAL_HEADER = re.compile(r"auth|api[-_]?key|access[-_]?key|subscription|token|secret|cookie|passw(or)?d|"
                               r"credential|signature|private[-_]?key", re.IGNORECASE)
#: a header value that is a credential whatever its name: an HTTP authentication scheme and what follows
CREDENTIAL_VALUE = re.compile(r"^\s*(bearer|basic|digest|token|negotiate|aws4-hmac-sha256|sharedkey)\s+\S",
                              re.IGNORECASE)
#: header names trialgrid's client owns: the body's framing and the connection (a sweep's value would corrupt them)
RESERVED_HEADERS = frozenset({"content-length", "transfer-encoding", "host", "connection", "keep-alive", "upgrade",
                              "te", "trailer", "proxy-connection", "expect"})
#: an RFC 9110 header name: a token (no space, no separator, not empty)
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
#: C0 controls (tab aside), DEL and C1: never in a URL or a header value (a CR/LF would start a new header)
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")
_HINT_KEY_ENV = ("name the environment variable holding the key in api_key_env instead: sweep files are copied "
                 "into the output and printed")


def redact_url(url: str) -> str:
    """``url`` fit to print: no userinfo (``user:KEY@``), and the value of every query parameter that looks like a
    credential (``?api_key=…``, ``?sig=…``) replaced by ``[redacted]``. Every message naming a ``base_url`` uses it."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    netloc = parts.netloc.rpartition("@")[2] if "@" in parts.netloc else parts.netloc
    query = parts.query
    if query:
        query = "&".join(f"{k}=[redacted]" if _secret_query_name(k) else (f"{k}={v}" if v else k)
                         for k, v in parse_qsl(query, keep_blank_values=True))
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _secret_query_name(name: str) -> bool:
    return bool(CREDENTIAL_HEADER.search(name) or re.fullmatch(r"(key|sig|code|pass|pwd)", name, re.IGNORECASE))


def check_base_url(value: str) -> None:
    """Refuse a ``base_url`` that cannot be sent or that carries a credential (``ValueError``, the URL redacted)."""
    shown = redact_url(_CONTROL.sub("?", value))
    bad = _CONTROL.search(value)
    if bad is not None or " " in value:
        what = "a space" if bad is None else f"the control character U+{ord(bad.group()):04X}"
        raise ValueError(f"base_url {shown!r} holds {what}; a URL is one line of printable characters")
    parts = urlsplit(value)
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"base_url {shown!r} carries a credential (user:password@ before the host); "
                         f"{_HINT_KEY_ENV}")
    secret = next((k for k, _ in parse_qsl(parts.query, keep_blank_values=True) if _secret_query_name(k)), None)
    if secret is not None:
        raise ValueError(f"base_url {shown!r} carries the query parameter {secret!r}, which looks like a "
                         f"credential; {_HINT_KEY_ENV}")


def check_headers(headers: Mapping[str, str]) -> None:
    """Refuse header names and values that cannot be sent, that trialgrid's client owns, or that look like a
    credential (``ValueError``)."""
    for name, value in headers.items():
        if not _HEADER_NAME.fullmatch(name):
            shown = _CONTROL.sub("?", name)
            raise ValueError(f"header name {shown!r} is not a valid HTTP header name (letters, digits and "
                             "!#$%&'*+-.^_`|~, no spaces, not empty)")
        if name.lower() in RESERVED_HEADERS:
            raise ValueError(f"header {name!r} is set by trialgrid's HTTP client (it frames the request); "
                             "remove it from headers")
        if CREDENTIAL_HEADER.search(name):
            raise ValueError(f"header {name!r} looks like a credential; {_HINT_KEY_ENV}")
        bad = _CONTROL.search(value)
        if bad is not None:
            raise ValueError(f"header {name!r} holds the control character U+{ord(bad.group()):04X} in its value "
                             "(a CR or LF would start another header); a header value is one line")
        if CREDENTIAL_VALUE.match(value):
            raise ValueError(f"header {name!r} holds a credential (an HTTP authentication scheme and its token); "
                             f"{_HINT_KEY_ENV}")


def check_json_numbers(value: Any, where: str = "params") -> None:
    """Refuse NaN and infinities anywhere in ``value`` (JSON has no such number: a server could never read them),
    and mapping keys that are not strings (JSON's keys are)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{where} is {value!r}; JSON has no NaN or infinity: write a finite number")
    if isinstance(value, Mapping):
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValueError(f"{where} has the key {k!r}, which is not a string; quote it")
            check_json_numbers(v, f"{where}.{k}")
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            check_json_numbers(v, f"{where}[{i}]")

#: the HTTP client every HTTP provider uses unless told (``runner.providers.transport``), chosen by
#: benchmarks/http_throughput.py (see docs/performance.md)
DEFAULT_TRANSPORT = "aiohttp"

DEFAULT_BASE_URL = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com/v1",
    "openai-responses": "https://api.openai.com/v1",
    "gemini": "https://generativelanguage.googleapis.com/v1beta",
}
#: the providers with a batch API ``mode: batch`` speaks (each one's client: ``runner.providers.batches.VENDORS``)
BATCH_PROVIDERS = ("openai", "openai-responses", "anthropic", "gemini")
DEFAULT_KEY_ENV = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "openai-responses": "OPENAI_API_KEY",
    "azure-openai": "AZURE_OPENAI_API_KEY",
    "gemini": "GEMINI_API_KEY",
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
    #: azure-openai: the deployments API's api-version (None: Azure's v1 API)
    api_version: str | None = None

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
