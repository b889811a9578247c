"""The opt-in response cache: a rerun of a sweep answered from disk instead of the model.

Keyed by content: the provider and its endpoint, the model, the neutral
``ChatRequest`` canonicalised (messages, tool catalogue in the order shown, params,
tool choice, the seed sent) and the seed of the trial asking — so a cache never
makes two trials share one answer, and a first, cached run measures what an
uncached one would. The neutral request, not the wire body, because it is what the
experiment asked: it does not change when a parameter remedy is learned mid-run or
the transport changes, and it exists before the wire provider builds a body. The remedies that shaped the stored answer travel with it, so a row
served from the cache still says which parameters were changed.

Only answers are stored; a ``ProviderError`` passes through and is never cached, so
a rerun retries exactly the trials that failed. A hit comes back with
``attempts = 0`` (no request was sent) and ``cached = True``; the agent counts hits
into the row's ``cache_hits``.

Storage is one SQLite database in WAL mode (``DIR/responses.sqlite``): each put is its
own transaction, so a crash loses at most the answer in flight and never corrupts the
file; readers never block the writer; several processes may share one directory. On
this project's benchmark box it takes ~28k puts/s and ~160k gets/s — far above any
live provider, and a cached sweep runs at the engine's own speed.

A cache is a convenience, never a reason for a trial to fail: a database that is not
one, has another shape, or fails its integrity check is moved aside
(``damaged/responses.sqlite.damaged-TIME``; a symbolic link in its place is one too, moved as
a link and never written through) and rebuilt empty with a warning; a stored value
that does not decode into a well-formed answer is a miss; a read or write that fails
mid-run is a miss (or a skipped store) with one warning. Only a directory that
cannot hold a database at all is refused, in one line.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any, Protocol

from runner.core.errors import UserError, warn
from runner.core.redact import scrub_value
from runner.core.safety import check_target_path
from runner.core.types import ChatRequest, ChatResponse, ToolCall, ToolSpec, Usage, parse_tool_arguments
from runner.providers.base import Provider

_CACHE_FILE = "responses.sqlite"
#: where a damaged or foreign database is set aside, inside the cache's own folder
_DAMAGED_DIR = "damaged"
#: bump when the key or the stored value changes shape: old entries then simply miss
_KEY_VERSION = 1


_TOOL_DIGESTS: dict[int, tuple[ToolSpec, str]] = {}


def _tool_digest(tool: ToolSpec) -> str:
    # probes reuse their ToolSpec objects across trials; encoding each schema once per trial
    # was most of a cache hit's cost. The entry holds the tool, so its id cannot be reused.
    entry = _TOOL_DIGESTS.get(id(tool))
    if entry is None or entry[0] is not tool:
        if len(_TOOL_DIGESTS) >= 4096:
            _TOOL_DIGESTS.clear()
        blob = json.dumps([tool.name, tool.description, tool.parameters], sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False, default=repr)
        entry = _TOOL_DIGESTS[id(tool)] = (tool, hashlib.sha256(blob.encode()).hexdigest())
    return entry[1]


def request_key(provider: str, endpoint: str, request: ChatRequest) -> bytes:
    """sha256 of the canonical JSON of what was asked, where, of which model, by which trial."""
    body = {
        "v": _KEY_VERSION, "provider": provider, "endpoint": endpoint, "model": request.model,
        "messages": [[m.role, m.content, [[c.name, c.raw_arguments, c.id] for c in m.tool_calls], m.tool_call_id,
                      m.name] for m in request.messages],
        "tools": [_tool_digest(t) for t in request.tools],
        "params": request.params, "seed": request.seed, "tool_choice": request.tool_choice,
        "trial_seed": request.trial_seed,
    }
    blob = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)
    return hashlib.sha256(blob.encode()).digest()


def encode_response(response: ChatResponse) -> bytes:
    """A response as the cache stores it (``decode_response`` reads it back, as a hit)."""
    return json.dumps(scrub_value({  # the net under the wire's scrub: no key is ever stored (runner/core/redact.py)
        "text": response.text,
        "calls": [[c.name, c.raw_arguments, c.id, c.parse_error] for c in response.tool_calls],
        "usage": [response.usage.input_tokens, response.usage.output_tokens],
        "latency_s": response.latency_s, "finish_reason": response.finish_reason, "remedies": list(response.remedies),
    }), separators=(",", ":"), ensure_ascii=False).encode()


def _str_or_none(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _int_or_none(value: Any) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool))


def decode_response(blob: bytes) -> ChatResponse:
    """A stored answer; ``ValueError`` when the value is not a well-formed one (then it is not used)."""
    try:
        data = json.loads(blob)
        ok = (isinstance(data, dict) and _str_or_none(data["text"]) and isinstance(data["calls"], list)
              and isinstance(data["usage"], list) and len(data["usage"]) == 2 and all(map(_int_or_none, data["usage"]))
              and isinstance(data["latency_s"], int | float) and _str_or_none(data["finish_reason"])
              and isinstance(data["remedies"], list) and all(isinstance(r, str) for r in data["remedies"]))
        if not ok:
            raise ValueError("a field has the wrong type")
        calls = []
        for call in data["calls"]:
            if not (isinstance(call, list) and len(call) == 4 and all(map(_str_or_none, call))
                    and isinstance(call[0], str) and isinstance(call[1], str)):
                raise ValueError("a tool call is malformed")
            name, raw, call_id, error = call
            arguments = None if error is not None else parse_tool_arguments(raw)[0]
            calls.append(ToolCall(name, raw, arguments, call_id, error))
        usage = Usage(*data["usage"])
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise ValueError(f"malformed cached answer: {exc}") from None
    return ChatResponse(data["text"], tuple(calls), usage, data["latency_s"], data["finish_reason"], 0,
                        tuple(data["remedies"]), cached=True)


_COLUMNS = [("key", "BLOB", 1), ("value", "BLOB", 0)]  # name, type, primary-key position


def _shape_problem(db: sqlite3.Connection) -> str | None:
    """Why an existing database is not a response cache (None: it is one, or it is new)."""
    rows = db.execute("PRAGMA quick_check").fetchall()
    if [tuple(r) for r in rows] != [("ok",)]:
        return f"integrity check failed ({str(rows[0][0])[:120]})"
    columns = db.execute("PRAGMA table_info(responses)").fetchall()
    if columns and [(c[1], str(c[2]).upper(), c[5]) for c in columns] != _COLUMNS:
        return "its responses table has another shape"
    return None


class AnswerStore(Protocol):
    """Where ``CachedProvider`` looks answers up and stores them: ``ResponseCache`` here, a
    shared one in cluster mode (``cluster.cache``: lookups batched to the process that owns the file)."""

    async def lookup(self, key: bytes) -> ChatResponse | None: ...

    def store(self, key: bytes, response: ChatResponse) -> None: ...


class ResponseCache:
    """``DIR/responses.sqlite`` and the hit / miss / store counts of this process."""

    def __init__(self, directory: Path) -> None:
        """A damaged or failing cache is a ``TrialgridWarning``, never a failed run."""
        self.directory = directory
        self._warned = False
        self.hits = 0
        self.misses = 0
        self.stored = 0
        self.failures = 0  # reads, writes or stored values that failed: misses, never failed trials
        check_target_path(directory, what="response cache directory")
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(f"cannot create the response cache directory {directory}: {exc.strerror or exc}",
                            hint="choose a writable --cache directory (or remove the sweep's `cache` key)") from None
        path = directory / _CACHE_FILE
        problem = None
        try:
            if path.is_symlink() or (path.exists() and not path.is_file()):
                # sqlite would write through a link (to /dev/zero, to a file outside the cache): never open one
                raise sqlite3.DatabaseError("it is a symbolic link" if path.is_symlink() else "it is not a file")
            self._db = self._connect(path)
            problem = _shape_problem(self._db)
        except sqlite3.DatabaseError as exc:  # "file is not a database", a torn page
            problem = f"it does not read as a database ({exc})"
        except (OSError, sqlite3.Error) as exc:
            raise UserError(f"cannot open the response cache {path}: {exc}",
                            hint="choose a writable --cache directory (or remove the sweep's `cache` key)") from None
        if problem is not None:
            aside = self._move_aside(path)
            warn(f"the response cache {path} is damaged: {problem}; moved it to {_DAMAGED_DIR}/{aside.name} and started "
                 "an empty cache (answers are asked of the models again)")
            try:
                self._db = self._connect(path)
            except (OSError, sqlite3.Error) as exc:
                raise UserError(f"cannot rebuild the response cache {path}: {exc}",
                                hint="choose another --cache directory") from None

    @staticmethod
    def _connect(path: Path) -> sqlite3.Connection:
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA busy_timeout=30000")
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: a process crash loses nothing committed
        db.execute("CREATE TABLE IF NOT EXISTS responses (key BLOB PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID")
        return db

    def _move_aside(self, path: Path) -> Path:
        """Into the cache's own ``damaged/`` folder (as damaged trial parts go to ``trials/damaged/``): a link
        is moved as a link, never followed."""
        try:
            self._db.close()
        except (AttributeError, sqlite3.Error):
            pass
        folder = path.parent / _DAMAGED_DIR
        folder.mkdir(exist_ok=True)
        aside = folder / f"{path.name}.damaged-{time.strftime('%Y%m%dT%H%M%S')}"
        n = 1
        while os.path.lexists(aside):
            aside = folder / f"{path.name}.damaged-{time.strftime('%Y%m%dT%H%M%S')}-{n}"
            n += 1
        for suffix in ("", "-wal", "-shm"):
            source = Path(f"{path}{suffix}")
            if os.path.lexists(source):
                os.replace(source, Path(f"{aside}{suffix}"))
        return aside

    def _failed(self, what: str, exc: Exception) -> None:
        self.failures += 1
        if not self._warned:
            self._warned = True
            warn(f"the response cache in {self.directory} failed to {what} ({exc}); such requests "
                 "go to the model instead (said once)")

    def get(self, key: bytes) -> ChatResponse | None:
        try:
            row = self._db.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
            hit = decode_response(row[0]) if row is not None else None
        except (sqlite3.Error, ValueError) as exc:
            self._failed("read an answer", exc)
            hit = None
        if hit is None:
            self.misses += 1
            return None
        self.hits += 1
        return hit

    def put(self, key: bytes, response: ChatResponse) -> None:
        try:
            self._db.execute("INSERT OR IGNORE INTO responses (key, value) VALUES (?, ?)",
                             (key, encode_response(response)))
        except sqlite3.Error as exc:
            self._failed("store an answer", exc)
            return
        self.stored += 1

    async def lookup(self, key: bytes) -> ChatResponse | None:
        return self.get(key)

    def store(self, key: bytes, response: ChatResponse) -> None:
        self.put(key, response)

    def get_blobs(self, keys: list[bytes]) -> list[bytes | None]:
        """Stored values of ``keys`` as stored (``None`` for a miss), counted as ``get`` counts them."""
        found: list[bytes | None] = []
        for key in keys:
            row = self._db.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
            found.append(None if row is None else row[0])
        hits = sum(1 for f in found if f is not None)
        self.hits += hits
        self.misses += len(keys) - hits
        return found

    def put_blobs(self, items: list[tuple[bytes, bytes]]) -> None:
        """Store encoded answers in one transaction (a crash keeps all of them or none)."""
        with self._db:
            self._db.execute("BEGIN")
            self._db.executemany("INSERT OR IGNORE INTO responses (key, value) VALUES (?, ?)", items)
        self.stored += len(items)

    def __len__(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM responses").fetchone()[0])

    def stats(self) -> dict[str, Any]:
        return {"dir": str(self.directory), "hits": self.hits, "misses": self.misses, "stored": self.stored}

    def close(self) -> None:
        self._db.close()


class CachedProvider:
    """A provider answered from the cache when it can; the pool wraps every provider once, when caching."""

    def __init__(self, inner: Provider, cache: AnswerStore, *, endpoint: str, strict_params: bool = False) -> None:
        self.inner = inner
        self.name: str = inner.name
        self.endpoint = endpoint
        self.cache = cache
        self.strict_params = strict_params

    async def complete(self, request: ChatRequest) -> ChatResponse:
        key = request_key(self.name, self.endpoint, request)
        hit = await self.cache.lookup(key)
        # a stored answer a remedy shaped is not what --strict-params asks for: ask the model again
        if hit is not None and not (self.strict_params and hit.remedies):
            return hit
        response = await self.inner.complete(request)  # a ProviderError propagates: errors are never stored
        self.cache.store(key, response)
        return response

    async def aclose(self) -> None:
        """Nothing of its own: the pool closes the provider it wraps."""
