"""Before the grid: is each model's endpoint there, does it take the key, does it know the model?

A sweep against an endpoint that does not answer used to retry every trial of the grid
before it said anything (14 trials, 204 s, silent). So before anything is sent, each
distinct (provider, endpoint, key, headers, model) of the sweep gets one request that
bills nothing: ``GET {base}/models/{model}``, the model-retrieval route of the OpenAI and
Anthropic APIs (and of ``trialgrid serve``, llama.cpp, vLLM and Ollama's OpenAI-compatible
servers, some of which answer it with a plain 404 for the route). The answer is read only
for what it proves:

- nothing answered: refused, reset, no such host, or no answer within the model's
  ``timeout_s`` (a server that accepts the connection and says nothing);
- the key was refused (401, 403);
- the model is unknown (a 404 whose error says so: ``model_not_found``, or naming it).

Each is one line naming the model entry and what to do; anything else (a route the
server does not have, a 429, a 5xx) proves nothing and the run goes on. Same transport
settings as the run (no proxy from the environment), all endpoints at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from runner.core.redact import scrub
from runner.providers.secrets import secret_from_env
from runner.providers.settings import Connection, redact_url

if TYPE_CHECKING:
    import httpx

    from runner.providers.http_base import HttpProvider

__all__ = ["SIMULATED_SERVER", "Checked", "Endpoint", "Finding", "check_endpoints"]

#: the ``Server`` header ``trialgrid serve``'s model routes answer with: how the preflight tells the simulated agent
#: from a local model server (which runs one request at a time, where the simulated agent answers many at once)
SIMULATED_SERVER = "trialgrid-serve"


@dataclass(frozen=True)
class Endpoint:
    """One model entry of a sweep, as the preflight sees it."""

    name: str            # the model entry's name in the sweep
    provider: str
    model_id: str
    connection: Connection


@dataclass(frozen=True)
class Finding:
    """What the preflight proved wrong about a model's endpoint."""

    endpoint: Endpoint
    problem: str
    hint: str

    def line(self) -> str:
        e = self.endpoint
        where = redact_url(e.connection.base_url.rstrip("/")) if e.connection.base_url else e.provider
        return f"model {e.name!r} ({e.provider} {e.model_id!r} at {where}): {self.problem}"


def _provider_class(name: str) -> type[HttpProvider] | None:
    from runner.providers import PROVIDERS

    wire = getattr(PROVIDERS.get(name), "wire", None)  # (a bare (factory, check) pair registers too: no wire)
    if wire is None:  # sim, callable: no HTTP endpoint (and no HTTP client imported for them)
        return None
    found: type[HttpProvider] = wire()
    return found


@dataclass(frozen=True)
class Checked:
    """What the preflight found: the problems, and the model entries that cannot be a local model server that
    answers a request at a time: ``trialgrid serve`` answered for them, or no such server speaks their wire."""

    findings: list[Finding]
    not_queueing: frozenset[str]


def check_endpoints(endpoints: Sequence[Endpoint]) -> Checked:
    """One request per distinct endpoint and model; the findings, in the order of ``endpoints``. Endpoints of a
    provider with no HTTP API (``sim``, ``callable``) are not checked."""
    distinct: dict[tuple[str, str, Connection], list[Endpoint]] = {}
    for e in endpoints:
        if _provider_class(e.provider) is not None:
            distinct.setdefault((e.provider, e.model_id, e.connection), []).append(e)
    if not distinct:
        return Checked([], frozenset())

    async def all_of() -> list[tuple[Finding | None, bool]]:
        return list(await asyncio.gather(*(_check(group[0]) for group in distinct.values())))

    found = asyncio.run(all_of())
    not_queueing = {e.name for (_, served), group in zip(found, distinct.values(), strict=True) for e in group
                    if served or not getattr(_provider_class(e.provider), "local_model_servers", True)}
    return Checked([f for f, _ in found if f is not None], frozenset(not_queueing))


async def _check(e: Endpoint) -> tuple[Finding | None, bool]:
    """The finding about ``e``'s endpoint (None: nothing proven wrong), and whether ``trialgrid serve`` answered."""
    finding, response = await _ask(e)
    return finding, response is not None and response.headers.get("server") == SIMULATED_SERVER


async def _ask(e: Endpoint) -> tuple[Finding | None, httpx.Response | None]:
    import httpx  # here: a sweep of simulated agents sends nothing and loads no HTTP client

    cls = _provider_class(e.provider)
    assert cls is not None
    connection = e.connection
    if not cls.has_models_route:
        problem = cls.check_offline(connection)
        return (None if problem is None else Finding(e, problem, "--no-preflight skips this check")), None
    try:
        secret = secret_from_env(connection.api_key_env) if connection.api_key_env else None
    except KeyError:
        return None, None  # the sweep's loader says this one, in its own words
    url = f"{cls.api_base(connection.base_url)}/models/{quote(e.model_id, safe='')}"
    headers = {"accept": "application/json", **cls.auth_headers(secret), **connection.header_map}
    timeout = connection.timeout_s
    try:
        async with httpx.AsyncClient(timeout=timeout, trust_env=False, follow_redirects=False) as client:
            # the whole request within the model's timeout, as for a trial's (a server may drip its answer)
            response = await asyncio.wait_for(client.get(url, headers=headers), timeout)
    except (TimeoutError, httpx.TimeoutException):
        return Finding(e, f"no answer within its {timeout:g} s timeout_s",
                       "start the server, or correct base_url; --no-preflight skips this check"), None
    except (httpx.TransportError, OSError) as exc:
        return Finding(e, f"nothing answered ({_cause(exc)})",
                       "start the server it names (a local model server, `trialgrid serve`) or correct base_url; "
                       "--no-preflight skips this check"), None
    status = response.status_code
    if status in (401, 403) or (status == 400 and "API_KEY_INVALID" in response.text[:4096]):  # Google says 400
        key = f"the key in ${connection.api_key_env}" if connection.api_key_env else "a request without a key"
        return Finding(e, f"the server refused {key} ({status}: {_message(response)})",
                       "check the key the model's api_key_env names, and that it may use this model"), response
    if status == 404 and cls.knows_models and _names_the_model(response, e.model_id):
        return Finding(e, f"the server does not know this model ({_message(response)})",
                       "check the model id (for a local server: the name it serves the model under)"), response
    return None, response


def _cause(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return scrub(text.splitlines()[0][:200])


def _body(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _message(response: httpx.Response) -> str:
    body = _body(response)
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    text = message if isinstance(message, str) else response.text
    return scrub(" ".join(text.split())[:200]) or f"HTTP {response.status_code}"


def _names_the_model(response: httpx.Response, model_id: str) -> bool:
    """A 404 about the model (OpenAI's ``model_not_found``, an error naming it), not about the route."""
    body = _body(response)
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return False
    if error.get("code") == "model_not_found":  # OpenAI, trialgrid serve
        return True
    message = error.get("message")
    if not isinstance(message, str) or message.startswith("Invalid URL"):  # OpenAI's words for a route it lacks
        return False
    # Anthropic ("model: NAME"), Ollama ('model "NAME" not found'): an error about the model, naming it
    return "model" in message.lower() and model_id in message
