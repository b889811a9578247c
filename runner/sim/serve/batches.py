"""``trialgrid serve``'s batch APIs: OpenAI Batch (with its Files API), Anthropic Message Batches and the Gemini
API's batch mode.

They exist so batch mode (``runner/execution/backends/batch``) — submission, polling, result files,
partial failures, expiry, resuming a killed run — is tested offline against the
same wire shapes the vendors use. Every request of a batch is answered by the
server's ``SimProvider`` through the same codecs and parameter rules as a live
request, so a batch outcome equals the live outcome of the same request.

Routes (under ``/v1``): ``POST /files``, ``GET /files``, ``GET /files/{id}``,
``DELETE /files/{id}``, ``GET /files/{id}/content``, ``POST /batches`` (endpoint
``/v1/chat/completions`` or ``/v1/responses``), ``GET /batches``, ``GET /batches/{id}``,
``POST /batches/{id}/cancel``, ``POST /messages/batches``, ``GET /messages/batches``,
``GET /messages/batches/{id}``, ``POST /messages/batches/{id}/cancel``,
``DELETE /messages/batches/{id}``, ``GET /messages/batches/{id}/results``; under ``/v1beta``:
``POST /models/{model}:batchGenerateContent`` (requests inline), ``GET /batches``, ``GET /batches/{id}`` (the
answers inline once it has ended), ``POST /batches/{id}:cancel``, ``DELETE /batches/{id}``.

Cancelling a batch that has not ended ends it at once: its requests are
``cancelled`` (OpenAI: the batch is ``cancelled``, no output file) or ``canceled``
(Anthropic: the batch is ``ended``, each result ``canceled``; Gemini: ``BATCH_STATE_CANCELLED``, no answers).

Answers are computed when a batch is created and shown once ``batch_delay_s`` has
passed (until then the batch is ``in_progress``). Each request's fate is drawn from
a hash of the fault seed and its ``custom_id`` — so a test can predict it and a
resubmission of the same request meets the same fate: ``batch_expire_rate`` of
requests are left unprocessed as if the completion window closed (the OpenAI batch
then ends ``expired``, a Gemini one ``BATCH_STATE_EXPIRED`` with the answers it has), ``batch_error_rate`` get a
500 server error result.

The Messages API has no seed field and a batch has no per-request headers, so the
trial seed of an Anthropic batch request travels in ``metadata.user_id`` as
``trialgrid-seed-N`` (see ``runner/providers/batches.py``).
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from runner.providers.errors import ProviderError
from runner.providers.google_status import GRPC_STATUS
from runner.providers.seed_channel import SEED_HEADER, SEED_METADATA_KEY, SEED_USER_PREFIX
from runner.sim.serve.codec_table import CODECS
from runner.sim.serve.codecs import BadRequest, OpenAICodec

if TYPE_CHECKING:
    from runner.sim.serve.app import SimServer

_JSON = "application/json"
OPENAI_ENDPOINT = "/v1/chat/completions"
#: OpenAI batch endpoint → the codec that answers its requests
_OPENAI_ENDPOINTS = {"/v1/chat/completions": "openai", "/v1/responses": "responses"}


@dataclass
class _Batch:
    api: str
    id: str
    created: float
    ready_at: float
    #: custom_id → ("ok", body) | ("error", status, body) | ("expired",)
    results: dict[str, tuple[Any, ...]]
    input_file_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    output_file_id: str | None = None
    error_file_id: str | None = None
    finished: bool = False
    endpoint: str = OPENAI_ENDPOINT
    cancelled_at: float | None = None


class BatchRoutes:
    """The batch endpoints of one ``SimServer``; state lives on the server's event loop."""

    def __init__(self, server: SimServer) -> None:
        self.server = server
        self.files: dict[str, tuple[bytes, str, str]] = {}  # id → (content, purpose, filename)
        self.batches: dict[str, _Batch] = {}

    def register(self, app: web.Application) -> None:
        r = app.router
        r.add_post("/v1/files", self._upload)
        r.add_get("/v1/files", self._file_list)
        r.add_get("/v1/files/{id}", self._file)
        r.add_delete("/v1/files/{id}", self._file_delete)
        r.add_get("/v1/files/{id}/content", self._file_content)
        r.add_post("/v1/batches", self._openai_create)
        r.add_get("/v1/batches", self._openai_list)
        r.add_get("/v1/batches/{id}", partial(self._show, "openai"))
        r.add_post("/v1/batches/{id}/cancel", self._openai_cancel)
        r.add_post("/v1/messages/batches", self._anthropic_create)
        r.add_get("/v1/messages/batches", self._anthropic_list)
        r.add_get("/v1/messages/batches/{id}", partial(self._show, "anthropic"))
        r.add_post("/v1/messages/batches/{id}/cancel", self._anthropic_cancel)
        r.add_delete("/v1/messages/batches/{id}", self._anthropic_delete)
        r.add_get("/v1/messages/batches/{id}/results", self._anthropic_results)
        r.add_post("/v1beta/models/{model}:batchGenerateContent", self._gemini_create)
        r.add_get("/v1beta/batches", self._gemini_list)
        r.add_get("/v1beta/batches/{id}", partial(self._show, "gemini"))
        r.add_post("/v1beta/batches/{id}:cancel", self._gemini_cancel)
        r.add_delete("/v1beta/batches/{id}", self._gemini_delete)

    # ------------------------------------------------------------ shared

    def _denied(self, request: web.Request, api: str) -> web.Response | None:
        keys = self.server.options.keys
        codec = CODECS[api]
        key = codec.key_of(request.headers)
        if keys and key not in keys:
            return _json(401, codec.auth_error(key))
        return None

    def fate(self, custom_id: str) -> str:
        """What happens to the request ``custom_id`` in any batch: ok, error or expired."""
        options = self.server.options
        digest = hashlib.sha256(f"{options.fault_seed}:{custom_id}".encode()).digest()
        u = int.from_bytes(digest[:8], "big") / 2**64
        if u < options.batch_expire_rate:
            return "expired"
        if u < options.batch_expire_rate + options.batch_error_rate:
            return "error"
        return "ok"

    def _answer(self, api: str, custom_id: str, body: Any, headers: dict[str, str],
                model: str | None = None) -> tuple[Any, ...]:
        """One request of a batch, answered like a live request of ``api`` (without latency or live faults);
        ``model``: the one the batch names, where the request's body does not (Gemini)."""
        codec = CODECS[api]
        try:
            chat = codec.decode(body, headers)
            if model is not None:
                chat = replace(chat, model=model)
        except (BadRequest, KeyError, TypeError, AttributeError, ValueError) as exc:
            message = str(exc) if isinstance(exc, BadRequest) else f"could not parse the request: {type(exc).__name__}"
            return ("error", 400, codec.error(400, message))
        has_tools = bool(chat.tools)
        for rule in self.server.options.rules:
            if rule.applies(chat.model, codec.params_of(body), has_tools):
                self.server.stats.rejected(rule.spec, chat.model, rule.param)
                return ("error", 400, codec.rule_error(rule, body, has_tools))
        fate = self.fate(custom_id)
        if fate == "expired":
            return ("expired",)
        if fate == "error":
            return ("error", 500, codec.error(500, "injected batch fault: the request failed", kind=codec.kind_for(500)))
        try:
            answer = self.server.sim.respond(chat)
        except ProviderError as exc:  # a simulated failure (the flaky auditor persona): a 500 result
            return ("error", 500, codec.error(500, exc.message, kind=codec.kind_for(500)))
        except ValueError:
            return ("error", *codec.unknown_model(chat.model))
        return ("ok", self.server.encode_answers(api, (answer,), chat.model, body))

    def _new(self, api: str, prefix: str, results: dict[str, tuple[Any, ...]]) -> _Batch:
        now = time.time()
        batch = _Batch(api, prefix + secrets.token_hex(12), now, now + self.server.options.batch_delay_s, results)
        self.batches[batch.id] = batch
        self.server.stats.batch_created(api, len(results))
        return batch

    def _get(self, request: web.Request, api: str) -> _Batch | None:
        batch = self.batches.get(request.match_info["id"])
        return batch if batch is not None and batch.api == api else None

    def _batch(self, request: web.Request, api: str) -> _Batch | web.Response:
        """The batch the route names, or the vendor's answer when the key is refused or there is no such batch."""
        if (denied := self._denied(request, api)) is not None:
            return denied
        batch = self._get(request, api)
        if batch is not None:
            return batch
        wanted = request.match_info["id"]
        if api == "anthropic":
            return _json(404, CODECS["anthropic"].error(404, f"message batch {wanted} not found", kind="not_found_error"))
        if api == "gemini":
            return _json(404, CODECS["gemini"].error(404, f"Batch batches/{wanted} not found."))
        return _json(404, CODECS["openai"].error(404, f"No batch found with id {wanted!r}"))

    async def _show(self, api: str, request: web.Request) -> web.Response:
        """GET of one batch: its object as the vendor writes it."""
        batch = self._batch(request, api)
        if isinstance(batch, web.Response):
            return batch
        if api == "anthropic":
            return _json(200, self._anthropic_object(batch, request))
        return _json(200, self._gemini_object(batch) if api == "gemini" else self._openai_object(batch))

    # ------------------------------------------------------------ OpenAI Files

    async def _upload(self, request: web.Request) -> web.Response:
        if (denied := self._denied(request, "openai")) is not None:
            return denied
        try:
            form = await request.post()
        except ValueError:
            form = {}  # type: ignore[assignment]
        upload, purpose = form.get("file"), form.get("purpose")
        if not isinstance(upload, web.FileField) or not isinstance(purpose, str):
            return _json(400, _oai_error("a multipart form with 'file' and 'purpose' is required"))
        content = upload.file.read()
        file_id = "file-" + secrets.token_hex(12)
        self.files[file_id] = (content, purpose, upload.filename or "upload.jsonl")
        return _json(200, self._file_object(file_id))

    def _file_object(self, file_id: str) -> dict[str, Any]:
        content, purpose, filename = self.files[file_id]
        return {"id": file_id, "object": "file", "bytes": len(content), "created_at": int(time.time()),
                "filename": filename, "purpose": purpose}

    async def _file(self, request: web.Request) -> web.Response:
        if (denied := self._denied(request, "openai")) is not None:
            return denied
        file_id = request.match_info["id"]
        if file_id not in self.files:
            return _json(404, _oai_error(f"No such File object: {file_id}"))
        return _json(200, self._file_object(file_id))

    async def _file_content(self, request: web.Request) -> web.Response:
        if (denied := self._denied(request, "openai")) is not None:
            return denied
        file_id = request.match_info["id"]
        if file_id not in self.files:
            return _json(404, _oai_error(f"No such File object: {file_id}"))
        return web.Response(body=self.files[file_id][0], content_type="application/jsonl")

    # ------------------------------------------------------------ OpenAI Batch

    async def _openai_create(self, request: web.Request) -> web.Response:
        if (denied := self._denied(request, "openai")) is not None:
            return denied
        try:
            body = orjson.loads(await request.read())
            file_id, endpoint = body["input_file_id"], body["endpoint"]
        except (ValueError, KeyError, TypeError):
            return _json(400, _oai_error("input_file_id, endpoint and completion_window are required"))
        if endpoint not in _OPENAI_ENDPOINTS:
            return _json(400, _oai_error(f"endpoint must be one of {', '.join(_OPENAI_ENDPOINTS)} "
                                         "(the ones this server batches)"))
        if file_id not in self.files:
            return _json(404, _oai_error(f"No such File object: {file_id}"))
        results: dict[str, tuple[Any, ...]] = {}
        for n, line in enumerate(self.files[file_id][0].splitlines(), 1):
            if not line.strip():
                continue
            try:
                item = orjson.loads(line)
                custom_id, url, req = item["custom_id"], item["url"], item["body"]
            except (ValueError, KeyError, TypeError):
                return _json(400, _oai_error(f"line {n} of the input file is not a batch request "
                                             "(custom_id, method, url, body)"))
            if url != endpoint:
                return _json(400, _oai_error(f"line {n}: url {url!r} differs from the batch's endpoint {endpoint}"))
            if custom_id in results:
                return _json(400, _oai_error(f"line {n}: duplicate custom_id {custom_id!r}"))
            results[custom_id] = self._answer(_OPENAI_ENDPOINTS[endpoint], custom_id, req, {})
        batch = self._new("openai", "batch_", results)
        batch.input_file_id, batch.metadata, batch.endpoint = file_id, body.get("metadata") or {}, endpoint
        return _json(200, self._openai_object(batch))

    def _openai_finish(self, batch: _Batch) -> None:
        if batch.finished or (time.time() < batch.ready_at and batch.cancelled_at is None):
            return
        out, err = [], []
        for custom_id, result in batch.results.items():
            rid = "batch_req_" + secrets.token_hex(8)
            if result[0] == "ok":
                out.append({"id": rid, "custom_id": custom_id, "response": {
                    "status_code": 200, "request_id": secrets.token_hex(8), "body": result[1]}, "error": None})
            elif result[0] == "error":
                err.append({"id": rid, "custom_id": custom_id, "response": {
                    "status_code": result[1], "request_id": secrets.token_hex(8), "body": result[2]}, "error": None})
            elif result[0] == "cancelled":
                err.append({"id": rid, "custom_id": custom_id, "response": None, "error": {
                    "code": "batch_cancelled", "message": "This request was not executed: the batch was cancelled."}})
            else:
                err.append({"id": rid, "custom_id": custom_id, "response": None, "error": {
                    "code": "batch_expired",
                    "message": "This request could not be executed before the completion window expired."}})
        for lines, attr in ((out, "output_file_id"), (err, "error_file_id")):
            if lines:
                file_id = "file-" + secrets.token_hex(12)
                self.files[file_id] = (b"".join(orjson.dumps(x) + b"\n" for x in lines), "batch_output",
                                       f"{batch.id}_{attr}.jsonl")
                setattr(batch, attr, file_id)
        batch.finished = True

    def _openai_object(self, batch: _Batch) -> dict[str, Any]:
        self._openai_finish(batch)
        results = batch.results.values()
        expired = any(r[0] == "expired" for r in results)
        status = ("expired" if expired else "completed") if batch.finished else "in_progress"
        if batch.cancelled_at is not None:
            status = "cancelled"
        done = batch.finished
        failed = sum(1 for r in results if r[0] != "ok") if done else 0
        ended = int(batch.ready_at) if done else None
        return {
            "id": batch.id, "object": "batch", "endpoint": batch.endpoint, "errors": None,
            "input_file_id": batch.input_file_id, "completion_window": "24h", "status": status,
            "output_file_id": batch.output_file_id, "error_file_id": batch.error_file_id,
            "created_at": int(batch.created), "in_progress_at": int(batch.created),
            "expires_at": int(batch.created) + 86400, "completed_at": ended if status == "completed" else None,
            "expired_at": ended if status == "expired" else None, "failed_at": None,
            "cancelled_at": int(batch.cancelled_at) if batch.cancelled_at is not None else None,
            "request_counts": {"total": len(batch.results), "completed": len(batch.results) - failed if done else 0,
                               "failed": failed},
            "metadata": batch.metadata,
        }

    async def _openai_list(self, request: web.Request) -> web.Response:
        if (denied := self._denied(request, "openai")) is not None:
            return denied
        data = [self._openai_object(b) for b in reversed(self.batches.values()) if b.api == "openai"]
        return _json(200, {"object": "list", "data": data, "has_more": False,
                           "first_id": data[0]["id"] if data else None, "last_id": data[-1]["id"] if data else None})

    # ------------------------------------------------------------ Anthropic Message Batches

    async def _anthropic_create(self, request: web.Request) -> web.Response:
        if (denied := self._denied(request, "anthropic")) is not None:
            return denied
        codec = CODECS["anthropic"]
        try:
            items = orjson.loads(await request.read())["requests"]
            if not isinstance(items, list) or not items:
                raise TypeError
        except (ValueError, KeyError, TypeError):
            return _json(400, codec.error(400, "requests: Field required (a non-empty list)"))
        results: dict[str, tuple[Any, ...]] = {}
        for n, item in enumerate(items):
            custom_id, params = item.get("custom_id"), item.get("params")
            if not isinstance(custom_id, str) or not isinstance(params, dict):
                return _json(400, codec.error(400, f"requests.{n}: custom_id and params are required"))
            if custom_id in results:
                return _json(400, codec.error(400, f"requests.{n}: duplicate custom_id {custom_id!r}"))
            headers = {"anthropic-version": request.headers.get("anthropic-version", "")}
            user = (params.get("metadata") or {}).get("user_id") or ""
            if user.startswith(SEED_USER_PREFIX):
                headers[SEED_HEADER] = user[len(SEED_USER_PREFIX):]
            results[custom_id] = self._answer("anthropic", custom_id, params, headers)
        return _json(200, self._anthropic_object(self._new("anthropic", "msgbatch_", results), request))

    def _anthropic_object(self, batch: _Batch, request: web.Request) -> dict[str, Any]:
        ended = time.time() >= batch.ready_at
        counts = {"processing": 0 if ended else len(batch.results), "succeeded": 0, "errored": 0, "canceled": 0,
                  "expired": 0}
        if ended:
            for result in batch.results.values():
                counts[{"ok": "succeeded", "error": "errored", "expired": "expired",
                        "cancelled": "canceled"}[result[0]]] += 1
        origin = f"{request.scheme}://{request.host}"
        return {
            "id": batch.id, "type": "message_batch", "processing_status": "ended" if ended else "in_progress",
            "request_counts": counts, "created_at": _iso(batch.created), "expires_at": _iso(batch.created + 86400),
            "ended_at": _iso(batch.ready_at) if ended else None, "archived_at": None,
            "cancel_initiated_at": _iso(batch.cancelled_at) if batch.cancelled_at is not None else None,
            "results_url": f"{origin}/v1/messages/batches/{batch.id}/results" if ended else None,
        }

    async def _anthropic_results(self, request: web.Request) -> web.Response:
        batch = self._batch(request, "anthropic")
        if isinstance(batch, web.Response):
            return batch
        codec = CODECS["anthropic"]
        if time.time() < batch.ready_at:
            return _json(400, codec.error(400, f"message batch {batch.id} has not ended; results are not ready"))
        lines = []
        for custom_id, result in batch.results.items():
            if result[0] == "ok":
                body: dict[str, Any] = {"type": "succeeded", "message": result[1]}
            elif result[0] == "error":
                body = {"type": "errored", "error": result[2]}
            elif result[0] == "cancelled":
                body = {"type": "canceled"}
            else:
                body = {"type": "expired"}
            lines.append(orjson.dumps({"custom_id": custom_id, "result": body}) + b"\n")
        return web.Response(body=b"".join(lines), content_type="application/x-jsonl")


    # ------------------------------------------------------------ the Gemini API's batch mode

    async def _gemini_create(self, request: web.Request) -> web.Response:
        if (denied := self._denied(request, "gemini")) is not None:
            return denied
        codec = CODECS["gemini"]
        model = request.match_info["model"]
        try:
            batch = orjson.loads(await request.read())["batch"]
            items = batch["inputConfig"]["requests"]["requests"]
            if not isinstance(batch, dict) or not isinstance(items, list) or not items:
                raise TypeError
        except (ValueError, KeyError, TypeError):
            return _json(400, codec.error(400, "* BatchGenerateContentRequest.batch.input_config: the requests are "
                                               "required (inline: inputConfig.requests.requests, a non-empty list)"))
        results: dict[str, tuple[Any, ...]] = {}
        for n, item in enumerate(items):
            body = item.get("request") if isinstance(item, dict) else None
            meta = item.get("metadata") if isinstance(item, dict) else None
            meta = meta if isinstance(meta, dict) else {}  # a client may send anything: what is not a map is none
            if not isinstance(body, dict):
                return _json(400, codec.error(400, f"* inputConfig.requests.requests[{n}].request: required"))
            key = meta.get("key")
            key = key if isinstance(key, str) else str(n)  # a request without a key answers in its place
            if key in results:
                return _json(400, codec.error(400, f"* inputConfig.requests.requests[{n}]: duplicate key {key!r}"))
            named = str(body.get("model") or model).removeprefix("models/")
            seed = meta.get(SEED_METADATA_KEY)
            headers = {SEED_HEADER: seed} if isinstance(seed, str) else {}
            results[key] = self._answer("gemini", key, {k: v for k, v in body.items() if k != "model"}, headers,
                                        named)
        created = self._new("gemini", "", results)
        created.metadata = {"displayName": str(batch.get("displayName") or ""), "model": f"models/{model}"}
        return _json(200, self._gemini_object(created))

    def _gemini_object(self, batch: _Batch) -> dict[str, Any]:
        """The batch as the API's long-running operation: its state and counts in ``metadata``, and once it has
        ended, the answers inline (``metadata.output``), each with its request's key."""
        ended = time.time() >= batch.ready_at
        results = batch.results.items()
        cancelled = batch.cancelled_at is not None
        expired = any(r[0] == "expired" for _, r in results)
        state = ("BATCH_STATE_CANCELLED" if cancelled else "BATCH_STATE_EXPIRED" if expired
                 else "BATCH_STATE_SUCCEEDED") if ended else "BATCH_STATE_RUNNING"
        answered = [(key, r) for key, r in results if r[0] in ("ok", "error")] if ended and not cancelled else []
        inlined = []
        for key, r in answered:
            if r[0] == "ok":
                inlined.append({"response": r[1], "metadata": {"key": key}})
            else:
                error = r[2].get("error") or {}
                code = next((c for c, (_, name) in GRPC_STATUS.items() if name == error.get("status")), 2)
                inlined.append({"error": {"code": code, "message": error.get("message", "")}, "metadata": {"key": key}})
        ok = sum(r[0] == "ok" for _, r in answered)
        meta: dict[str, Any] = {
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1beta.GenerateContentBatch",
            "name": f"batches/{batch.id}", **batch.metadata, "state": state, "createTime": _iso(batch.created),
            "updateTime": _iso(min(time.time(), batch.ready_at)),
            "batchStats": {"requestCount": str(len(batch.results)), "successfulRequestCount": str(ok),
                           "failedRequestCount": str(len(answered) - ok),
                           "pendingRequestCount": "0" if ended else str(len(batch.results))}}
        if ended:
            meta["endTime"] = _iso(batch.ready_at)
            meta["output"] = {"inlinedResponses": {"inlinedResponses": inlined}}
        return {"name": f"batches/{batch.id}", "metadata": meta, "done": ended}

    async def _gemini_list(self, request: web.Request) -> web.Response:
        if (denied := self._denied(request, "gemini")) is not None:
            return denied
        return _json(200, {"operations": [self._gemini_object(b) for b in reversed(self.batches.values())
                                          if b.api == "gemini"]})

    async def _gemini_cancel(self, request: web.Request) -> web.Response:
        batch = self._batch(request, "gemini")
        if isinstance(batch, web.Response):
            return batch
        self._cancel(batch)
        return _json(200, {})

    async def _gemini_delete(self, request: web.Request) -> web.Response:
        batch = self._batch(request, "gemini")
        if isinstance(batch, web.Response):
            return batch
        del self.batches[batch.id]
        return _json(200, {})

    # ------------------------------------------------------------ lists, cancels, deletes

    def _cancel(self, batch: _Batch) -> None:
        """End a batch that has not ended: its requests are cancelled, none is answered."""
        now = time.time()
        if now >= batch.ready_at or batch.cancelled_at is not None:
            return
        batch.cancelled_at = now
        batch.ready_at = now
        batch.results = dict.fromkeys(batch.results, ("cancelled",))

    async def _file_list(self, request: web.Request) -> web.Response:
        if (denied := self._denied(request, "openai")) is not None:
            return denied
        purpose = request.query.get("purpose")
        data = [self._file_object(f) for f in reversed(self.files) if purpose in (None, self.files[f][1])]
        return _json(200, {"object": "list", "data": data, "has_more": False,
                           "first_id": data[0]["id"] if data else None, "last_id": data[-1]["id"] if data else None})

    async def _file_delete(self, request: web.Request) -> web.Response:
        if (denied := self._denied(request, "openai")) is not None:
            return denied
        file_id = request.match_info["id"]
        if self.files.pop(file_id, None) is None:
            return _json(404, CODECS["openai"].error(404, f"No such File object: {file_id}"))
        return _json(200, {"id": file_id, "object": "file", "deleted": True})

    async def _openai_cancel(self, request: web.Request) -> web.Response:
        batch = self._batch(request, "openai")
        if isinstance(batch, web.Response):
            return batch
        if batch.finished and batch.cancelled_at is None:
            return _json(409, CODECS["openai"].error(409, f"Cannot cancel a batch with status "
                                                          f"{self._openai_object(batch)['status']!r}."))
        self._cancel(batch)
        return _json(200, self._openai_object(batch))

    async def _anthropic_list(self, request: web.Request) -> web.Response:
        if (denied := self._denied(request, "anthropic")) is not None:
            return denied
        data = [self._anthropic_object(b, request) for b in reversed(self.batches.values()) if b.api == "anthropic"]
        return _json(200, {"data": data, "has_more": False, "first_id": data[0]["id"] if data else None,
                           "last_id": data[-1]["id"] if data else None})

    async def _anthropic_cancel(self, request: web.Request) -> web.Response:
        batch = self._batch(request, "anthropic")
        if isinstance(batch, web.Response):
            return batch
        self._cancel(batch)
        return _json(200, self._anthropic_object(batch, request))

    async def _anthropic_delete(self, request: web.Request) -> web.Response:
        batch = self._batch(request, "anthropic")
        if isinstance(batch, web.Response):
            return batch
        codec = CODECS["anthropic"]
        if time.time() < batch.ready_at:
            return _json(400, codec.error(400, f"message batch {batch.id} is still processing; cancel it first"))
        del self.batches[batch.id]
        return _json(200, {"id": batch.id, "type": "message_batch_deleted"})


def _json(status: int, body: Any) -> web.Response:
    return web.Response(status=status, body=orjson.dumps(body), content_type=_JSON)


def _oai_error(message: str) -> dict[str, Any]:
    return OpenAICodec.error(400, message)


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
