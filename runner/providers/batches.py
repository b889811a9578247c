"""The vendors' batch APIs, from the client side: submit, poll, fetch results.

- OpenAI Batch: upload a JSONL of ``{custom_id, method, url, body}`` lines through
  the Files API (purpose ``batch``), create the batch on ``/v1/chat/completions``,
  poll it, then download its output file (answers) and error file (per-request
  errors, expired requests).
- Anthropic Message Batches: create with ``{requests: [{custom_id, params}]}``,
  poll until ``processing_status`` is ``ended``, then read the JSONL at ``results_url``.
- The Gemini API's batch mode: ``models/{model}:batchGenerateContent`` with the requests inline (each
  ``{request, metadata: {key}}``), polled as ``batches/{id}`` until its state ends; the answers come back inline
  in the batch (``metadata.output.inlinedResponses``), each with its request's key. Vertex AI's batch
  prediction reads its input from Cloud Storage or BigQuery only, so ``provider: vertex`` has no batch mode.

Request bodies are the live wire encoders' (``openai_wire`` / ``anthropic_wire``),
answers go through the live decoders, and per-request errors through the same
``classify_http`` as a live failure — so a batch row and a live row of the same
trial agree. The custom id of every request is its trial id. The Messages API has
no seed and a batch has no per-request headers, so to ``trialgrid serve`` an
Anthropic request carries the trial seed in ``metadata.user_id`` (``trialgrid-seed-N``)
and an OpenAI Responses one in ``metadata.trialgrid_seed``. A vendor reads
``user_id`` as the end user's id (abuse handling), so neither is ever sent to a
vendor unasked: only to a loopback ``base_url`` or with ``sim_seed: true``
(``runner/providers/seed_channel.py``).

Batch-level calls (upload, create, poll, download) retry rate-limited and transient
failures with the model's retry policy; anything else raises ``ProviderError``.
"""

from __future__ import annotations

import asyncio
import io
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import quote

import httpx
import orjson

from runner.core.jsonlines import json_lines
from runner.core.types import ChatRequest, ChatResponse
from runner.providers import ErrorKind, ProviderError, make_provider
from runner.providers.classify import classify_http, filtered
from runner.providers.google_status import GRPC_STATUS
from runner.providers.http_base import HttpProvider
from runner.providers.seed_channel import SEED_METADATA_KEY, SEED_USER_PREFIX
from runner.providers.settings import Connection, RetryPolicy

OPENAI_ENDPOINT = "/v1/chat/completions"
#: Anthropic's error ``type`` → the HTTP status a live call would have got (for ``classify_http``)
_ANTHROPIC_STATUS = {"invalid_request_error": 400, "authentication_error": 401, "permission_error": 403,
                     "not_found_error": 404, "request_too_large": 413, "rate_limit_error": 429, "api_error": 500,
                     "overloaded_error": 529}


@dataclass(frozen=True)
class Answer:
    """What a batch said about one request: a response, or the per-request error."""

    response: ChatResponse | None = None
    error: ProviderError | None = None


@dataclass(frozen=True)
class Poll:
    """One look at a batch: has it ended, the vendor's status word, its request counts, the raw object."""

    ended: bool
    status: str
    counts: dict[str, int]
    info: dict[str, Any]


class VendorBatches:
    """Shared plumbing: the live wire provider (encoders, key, error fields) and an HTTP client."""

    name = ""

    def __init__(self, connection: Connection, policy: RetryPolicy) -> None:
        # the wire provider is built for its encoder, decoder, key and error reading; its own client is unused
        self.wire = cast(HttpProvider, make_provider(self.name, connection, transport="httpx"))
        # the live provider's API root, so ``base_url`` means the same in both modes (with or without /v1 for Anthropic)
        self.base = self.wire.base
        self.policy = policy
        headers = {**self.wire.auth_headers(self.wire.secret), **connection.header_map}
        self.client = httpx.AsyncClient(headers=headers, timeout=connection.timeout_s, trust_env=False)

    def encode(self, request: ChatRequest) -> dict[str, Any]:
        return self.wire.encode(request)

    async def aclose(self) -> None:
        await self.client.aclose()
        await self.wire.aclose()

    async def _send(self, method: str, url: str, what: str, **kw: Any) -> httpx.Response:
        """One batch-level call, retried like a live call when the failure is retryable."""
        failures = 0
        while True:
            try:
                response = await self.client.request(method, url, **kw)
            except httpx.TransportError as exc:
                error = ProviderError(ErrorKind.TRANSIENT, f"{what}: connection failed to {url}: "
                                      f"{type(exc).__name__} {self.wire.scrub(str(exc))}")
            else:
                if response.status_code < 300:
                    return response
                error = self.wire.http_error(response.status_code, response.headers, response.content,
                                             f" ({what}, {method} {url})")
            failures += 1
            if not error.kind.retryable or failures >= self.policy.max_attempts:
                raise error
            ceiling = min(self.policy.backoff_max_s, self.policy.backoff_base_s * 2 ** (failures - 1))
            await asyncio.sleep(max(random.random() * ceiling, error.retry_after_s or 0.0))

    def _json(self, response: httpx.Response, what: str) -> dict[str, Any]:
        try:
            data = orjson.loads(response.content)
        except orjson.JSONDecodeError:
            raise ProviderError(ErrorKind.TRANSIENT, f"{what}: malformed JSON from {response.request.url}") from None
        if not isinstance(data, dict):
            raise ProviderError(ErrorKind.TRANSIENT, f"{what}: expected a JSON object from {response.request.url}")
        return data

    def _decoded(self, body: Any, batch_id: str) -> Answer:
        try:
            response = self.wire.decode(body)
        except ProviderError as exc:  # what the wire format classifies in an answer (a safety block): as live
            return Answer(error=exc)
        except (KeyError, TypeError, IndexError, AttributeError, ValueError) as exc:
            return Answer(error=ProviderError(ErrorKind.TRANSIENT, f"unexpected response shape in batch {batch_id}: "
                                              f"{type(exc).__name__} {self.wire.scrub(str(exc))}"))
        refused = filtered(response, f" in batch {batch_id}")
        return Answer(response=None, error=refused) if refused is not None else Answer(response=response)

    def _missing(self, batch_id: str, status: str) -> Answer:
        kind = ErrorKind.EXPIRED if status == "expired" else ErrorKind.TRANSIENT
        return Answer(error=ProviderError(kind, f"batch {batch_id} ended {status} without a result for this request"))

    # what each vendor provides

    async def submit(self, items: list[tuple[str, dict[str, Any]]], label: str) -> dict[str, Any]:
        """Create a batch of (custom id, wire body); returns the ids to record (at least ``id``)."""
        raise NotImplementedError

    async def poll(self, remote: dict[str, Any]) -> Poll:
        raise NotImplementedError

    async def results(self, remote: dict[str, Any], poll: Poll, trial_ids: Iterable[str]) -> dict[str, Answer]:
        """An answer for every one of ``trial_ids`` (a missing result is an error answer)."""
        raise NotImplementedError


class _OpenAIBatches(VendorBatches):
    name = "openai"
    endpoint = OPENAI_ENDPOINT

    async def submit(self, items: list[tuple[str, dict[str, Any]]], label: str) -> dict[str, Any]:
        jsonl = b"".join(orjson.dumps({"custom_id": cid, "method": "POST", "url": self.endpoint, "body": body}) + b"\n"
                         for cid, body in items)
        uploaded = self._json(await self._send("POST", f"{self.base}/files", "uploading the batch input file",
                                               data={"purpose": "batch"},
                                               files={"file": (f"{label}.jsonl", jsonl, "application/jsonl")}),
                              "uploading the batch input file")
        created = self._json(await self._send(
            "POST", f"{self.base}/batches", "creating the batch",
            json={"input_file_id": uploaded["id"], "endpoint": self.endpoint, "completion_window": "24h",
                  "metadata": {"trialgrid_batch": label}}), "creating the batch")
        return {"id": created["id"], "input_file_id": uploaded["id"]}

    async def poll(self, remote: dict[str, Any]) -> Poll:
        info = self._json(await self._send("GET", f"{self.base}/batches/{remote['id']}", "polling the batch"),
                          "polling the batch")
        status = str(info.get("status"))
        ended = status in ("completed", "failed", "expired", "cancelled")
        return Poll(ended, status, dict(info.get("request_counts") or {}), info)

    async def results(self, remote: dict[str, Any], poll: Poll, trial_ids: Iterable[str]) -> dict[str, Answer]:
        batch_id = remote["id"]
        answers: dict[str, Answer] = {}
        for key in ("output_file_id", "error_file_id"):
            file_id = poll.info.get(key)
            if not file_id:
                continue
            content = (await self._send("GET", f"{self.base}/files/{file_id}/content",
                                        f"downloading the {key[:-8]} file of batch {batch_id}")).content
            for item in _result_lines(content):
                answers[item["custom_id"]] = self._answer(item, batch_id)
        failed = poll.status == "failed"
        why = "; ".join(str(e.get("message")) for e in ((poll.info.get("errors") or {}).get("data") or ()))
        for tid in trial_ids:
            if tid not in answers:
                answers[tid] = (Answer(error=ProviderError(ErrorKind.FATAL, f"batch {batch_id} failed: "
                                                           f"{self.wire.scrub(why) or 'no reason given'}"))
                                if failed else self._missing(batch_id, poll.status))
        return answers

    def _answer(self, item: dict[str, Any], batch_id: str) -> Answer:
        response, error = _mapping(item.get("response")), _mapping(item.get("error"))
        if response is not None and response.get("status_code") == 200:
            return self._decoded(response.get("body"), batch_id)
        if response is not None:
            code_given = response.get("status_code")
            status, body = code_given if isinstance(code_given, int) else 0, response.get("body")
            try:
                message, param, code = self.wire.error_fields(body)
            except (KeyError, TypeError, AttributeError):
                message, param, code = str(body)[:300], None, None
            return Answer(error=classify_http(status, {}, self.wire.scrub(message), param=param, code=code,
                                              where=f" in batch {batch_id}"))
        code = (error or {}).get("code")
        message = self.wire.scrub(str((error or {}).get("message") or "no message"))
        kind = ErrorKind.EXPIRED if code == "batch_expired" else ErrorKind.FATAL
        return Answer(error=ProviderError(kind, f"{code or 'error'} in batch {batch_id}: {message}"))


class _OpenAIResponsesBatches(_OpenAIBatches):
    """OpenAI Batch on ``/v1/responses``; to ``trialgrid serve``, the trial seed in ``metadata.trialgrid_seed`` (no seed
    field, no headers)."""

    name = "openai-responses"
    endpoint = "/v1/responses"

    def encode(self, request: ChatRequest) -> dict[str, Any]:
        body = self.wire.encode(request)
        if request.seed is not None and "metadata" not in body and self.wire.connection.sends_seed:
            body["metadata"] = {SEED_METADATA_KEY: str(request.seed)}
        return body


class _AnthropicBatches(VendorBatches):
    name = "anthropic"

    def encode(self, request: ChatRequest) -> dict[str, Any]:
        body = self.wire.encode(request)
        if request.seed is not None and "metadata" not in body and self.wire.connection.sends_seed:
            body["metadata"] = {"user_id": f"{SEED_USER_PREFIX}{request.seed}"}
        return body

    async def submit(self, items: list[tuple[str, dict[str, Any]]], label: str) -> dict[str, Any]:
        created = self._json(await self._send(
            "POST", f"{self.base}/messages/batches", "creating the message batch",
            json={"requests": [{"custom_id": cid, "params": body} for cid, body in items]}),
            "creating the message batch")
        return {"id": created["id"]}

    async def poll(self, remote: dict[str, Any]) -> Poll:
        info = self._json(await self._send("GET", f"{self.base}/messages/batches/{remote['id']}",
                                           "polling the message batch"), "polling the message batch")
        status = str(info.get("processing_status"))
        return Poll(status == "ended", status, dict(info.get("request_counts") or {}), info)

    async def results(self, remote: dict[str, Any], poll: Poll, trial_ids: Iterable[str]) -> dict[str, Answer]:
        batch_id = remote["id"]
        url = poll.info.get("results_url") or f"{self.base}/messages/batches/{batch_id}/results"
        content = (await self._send("GET", url, f"downloading the results of batch {batch_id}")).content
        answers: dict[str, Answer] = {}
        for item in _result_lines(content):
            result = _mapping(item.get("result")) or {}
            kind = result.get("type")
            if kind == "succeeded":
                answers[item["custom_id"]] = self._decoded(result.get("message"), batch_id)
            elif kind == "errored":
                outer = _mapping(result.get("error")) or {}
                inner: dict[str, Any] = outer["error"] if isinstance(outer.get("error"), dict) else outer
                status = _ANTHROPIC_STATUS.get(str(inner.get("type")), 500)
                answers[item["custom_id"]] = Answer(error=classify_http(
                    status, {}, self.wire.scrub(str(inner.get("message") or "")), code=inner.get("type"),
                    where=f" in batch {batch_id}"))
            elif kind == "expired":
                answers[item["custom_id"]] = Answer(error=ProviderError(
                    ErrorKind.EXPIRED, f"batch {batch_id} expired before this request ran"))
            else:
                what = "canceled before it ran" if kind == "canceled" else f"result type {kind!r}"
                answers[item["custom_id"]] = Answer(error=ProviderError(ErrorKind.FATAL, f"batch {batch_id}: {what}"))
        for tid in trial_ids:
            if tid not in answers:
                answers[tid] = self._missing(batch_id, poll.status)
        return answers


#: the Gemini batch states that end it, and the word ``_missing`` reads
_GEMINI_ENDED = {"BATCH_STATE_SUCCEEDED": "succeeded", "BATCH_STATE_FAILED": "failed",
                 "BATCH_STATE_CANCELLED": "cancelled", "BATCH_STATE_EXPIRED": "expired"}


class _GeminiBatches(VendorBatches):
    """The Gemini API's batch mode, the requests and answers inline. An item is ``{request, metadata}``: the
    request names its model (the URL's is the first's: a batch holds one model entry's trials); the metadata
    gets the trial id as its ``key`` and, to ``trialgrid serve``, the whole trial seed (``generationConfig`` has
    31 bits of it; a batch has no headers)."""

    name = "gemini"

    def encode(self, request: ChatRequest) -> dict[str, Any]:
        item: dict[str, Any] = {"request": {"model": f"models/{request.model}", **self.wire.encode(request)},
                                "metadata": {}}
        if request.seed is not None and self.wire.connection.sends_seed:
            item["metadata"][SEED_METADATA_KEY] = str(request.seed)
        return item

    async def submit(self, items: list[tuple[str, dict[str, Any]]], label: str) -> dict[str, Any]:
        model = str(items[0][1]["request"]["model"]).removeprefix("models/")
        created = self._json(await self._send(
            "POST", f"{self.base}/models/{quote(model, safe='')}:batchGenerateContent", "creating the batch",
            json={"batch": {"displayName": label, "inputConfig": {"requests": {"requests": [
                {**item, "metadata": {**item["metadata"], "key": cid}} for cid, item in items]}}}}),
            "creating the batch")
        if not isinstance(created.get("name"), str) or not created["name"].startswith("batches/"):
            raise ProviderError(ErrorKind.TRANSIENT, "creating the batch: the answer names no batch (batches/…)")
        return {"id": created["name"]}

    async def poll(self, remote: dict[str, Any]) -> Poll:
        info = self._json(await self._send("GET", f"{self.base}/{remote['id']}", "polling the batch"),
                          "polling the batch")
        meta = _mapping(info.get("metadata")) or {}
        state = str(meta.get("state"))
        counts = {k: int(v) for k, v in (_mapping(meta.get("batchStats")) or {}).items()
                  if isinstance(v, (int, str)) and str(v).isdigit()}
        return Poll(state in _GEMINI_ENDED, state, counts, info)

    async def results(self, remote: dict[str, Any], poll: Poll, trial_ids: Iterable[str]) -> dict[str, Answer]:
        batch_id = remote["id"]
        meta = _mapping(poll.info.get("metadata")) or {}
        output = _mapping(meta.get("output")) or _mapping(poll.info.get("response")) or {}
        inlined = (_mapping(output.get("inlinedResponses")) or {}).get("inlinedResponses")
        answers: dict[str, Answer] = {}
        for item in inlined if isinstance(inlined, list) else ():
            key = (_mapping(item.get("metadata")) or {}).get("key") if isinstance(item, dict) else None
            if not isinstance(key, str):
                continue  # answers no trial, which then gets the missing-answer error
            response, error = _mapping(item.get("response")), _mapping(item.get("error"))
            if response is not None:
                answers[key] = self._decoded(response, batch_id)
            else:
                code = (error or {}).get("code")
                status, name = GRPC_STATUS.get(code, (500, "UNKNOWN")) if isinstance(code, int) else (500, "UNKNOWN")
                body = {"error": {"code": status, "status": name, "message": str((error or {}).get("message") or ""),
                                  "details": (error or {}).get("details") or []}}
                answers[key] = Answer(error=self.wire.http_error(status, {}, orjson.dumps(body),
                                                                 f" in batch {batch_id}"))
        why = self.wire.scrub(str((_mapping(poll.info.get("error")) or {}).get("message") or "no reason given"))
        for tid in trial_ids:
            if tid not in answers:
                answers[tid] = (Answer(error=ProviderError(ErrorKind.FATAL, f"batch {batch_id} failed: {why}"))
                                if poll.status == "BATCH_STATE_FAILED"
                                else self._missing(batch_id, _GEMINI_ENDED.get(poll.status, poll.status)))
        return answers


VENDORS: dict[str, type[VendorBatches]] = {"openai": _OpenAIBatches, "anthropic": _AnthropicBatches,
                                           "openai-responses": _OpenAIResponsesBatches, "gemini": _GeminiBatches}


def _result_lines(content: bytes) -> Iterator[dict[str, Any]]:
    """The records of a vendor's results file that name a request (``custom_id``); a line that does not read, or
    names none, answers no trial, which then gets the missing-answer error (a server may send anything)."""
    for _number, item in json_lines(io.BytesIO(content)):
        if isinstance(item, dict) and isinstance(item.get("custom_id"), str):
            yield item


def _mapping(value: Any) -> dict[str, Any] | None:
    """``value`` if it is a JSON object, else None: a results file's fields are read as what they claim to be."""
    return value if isinstance(value, dict) else None
