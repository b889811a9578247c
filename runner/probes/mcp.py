"""Tool catalogues read from a live MCP server instead of a file.

A probe entry may name an MCP server (``mcp_server: {command, args, env, cwd,
timeout_s}``) where it would name a catalogue file. At sweep load trialgrid starts
the server over stdio, sends ``initialize`` and ``notifications/initialized``, reads
``tools/list`` page by page (following ``nextCursor``), and stops the server. It never
sends ``tools/call``: the probe measures which tool an agent *picks*, so the server's
tools must not run.

The client is a small newline-delimited JSON-RPC loop rather than the ``mcp`` SDK's
client: three messages need no session machinery, the wire protocol is versioned and
negotiated while the SDK's Python API broke across its major versions, and the
catalogue is fetched synchronously at load time, where an anyio event loop would
collide with callers that already run one. So ``mcp`` is not a runtime dependency;
the tests build their server with the official SDK.

The tools become neutral ``ToolSpec`` (MCP's ``inputSchema`` is the JSON schema) and
the catalogue is recorded, with the sha256 of its canonical JSON, in the manifest;
the hash enters the sweep identity, so a server whose catalogue changed makes a
different sweep.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from runner.core.errors import UserError
from runner.core.safety import max_input_bytes
from runner.core.sources import Source
from runner.core.types import ToolSpec
from runner.core.version import trialgrid_version
from runner.probes.catalogue import load_catalogue, parse_catalogue
from runner.providers.settings import CREDENTIAL_HEADER

#: the revision trialgrid asks for; a server may answer with another it supports
_PROTOCOL_VERSION = "2025-06-18"
#: a server that keeps returning cursors is looping, not paginating
_MAX_PAGES = 1000
#: after the catalogue is read: how long the server gets to exit on EOF, then on SIGTERM
_STOP_GRACE_S = 2.0
_STDERR_TAIL_LINES = 20
#: what the stdout reader queues when the server writes past the input cap
_TOO_MUCH = b"\0too much"


class McpServer(BaseModel):
    """How to start an MCP server over stdio (the keys MCP client configs use)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    command: str = Field(min_length=1, description="executable to start (looked up on PATH)")
    args: list[str] = Field(default_factory=list, description="its arguments")
    env: dict[str, str] = Field(default_factory=dict, description="variables added to trialgrid's environment "
                                "(never credentials: the sweep is copied into the output)")
    cwd: str | None = Field(default=None, description="working directory, relative to the sweep file (default: its folder)")
    timeout_s: float = Field(default=30.0, gt=0, le=3600, description="deadline for start, initialize and every page")

    @field_validator("env")
    @classmethod
    def _no_credentials(cls, value: dict[str, str]) -> dict[str, str]:
        bad = next((k for k in value if CREDENTIAL_HEADER.search(k)), None)
        if bad is not None:
            raise ValueError(f"env {bad!r} looks like a credential; sweep files are written into the output, so "
                             "export it in the shell that runs trialgrid instead (the server inherits that environment)")
        return value


@dataclass(frozen=True)
class _McpCatalogue:
    """The tools a server listed, with what the manifest records about them."""

    tools: tuple[ToolSpec, ...]
    sha256: str
    record: dict[str, Any]


class _Failure(Exception):
    """A step of the exchange failed; ``_fetch_catalogue`` adds where, and the server's stderr."""


def catalogue_sha256(tools: tuple[ToolSpec, ...]) -> str:
    """Hash of what an agent sees (names, descriptions, schemas, in order), independent of JSON spacing."""
    plain = [{"name": t.name, "description": t.description, "parameters": t.parameters} for t in tools]
    blob = json.dumps(plain, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return hashlib.sha256(blob).hexdigest()


class _StdioClient:
    """One JSON-RPC conversation with a child process: requests out on stdin, lines in from stdout."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=env, cwd=cwd)
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.stderr: deque[str] = deque(maxlen=_STDERR_TAIL_LINES)
        self._next_id = 0
        # reader threads, so a deadline can interrupt a server that writes nothing
        threading.Thread(target=self._pump_stdout, daemon=True).start()
        threading.Thread(target=self._pump_stderr, daemon=True).start()

    def _pump_stdout(self) -> None:
        # a hostile server may write one endless line, or endless lines: both are bounded
        assert self.proc.stdout is not None
        cap, total = max_input_bytes(), 0
        while True:
            line = self.proc.stdout.readline(cap + 1)
            if not line:
                break
            total += len(line)
            if len(line) > cap or total > 4 * cap:
                self.lines.put(_TOO_MUCH)
                return
            self.lines.put(line)
        self.lines.put(None)

    def _pump_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line.decode("utf-8", "replace").rstrip())

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise _Failure(f"the server closed its input before {message.get('method')}"
                           f"{self._exit_note()}") from None

    def _exit_note(self) -> str:
        code = self.proc.poll()
        return f" (it exited with code {code})" if code is not None else ""

    def notify(self, method: str) -> None:
        self._send({"jsonrpc": "2.0", "method": method})

    def request(self, method: str, params: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        self._next_id += 1
        rid = self._next_id
        self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise _Failure(f"timed out after {timeout_s:g} s waiting for the answer to {method}") from None
            if line is _TOO_MUCH:
                raise _Failure(f"the server wrote more than the {max_input_bytes():,}-byte input cap while answering "
                               f"{method} (set TRIALGRID_MAX_INPUT_MB for a larger catalogue)")
            if line is None:
                self.proc.wait(timeout=_STOP_GRACE_S)
                raise _Failure(f"the server exited with code {self.proc.returncode} before answering {method}")
            if not line.strip():
                continue
            try:
                msg = json.loads(line)
            except RecursionError:
                raise _Failure(f"the server's answer to {method} nests too deeply to read") from None
            except ValueError:
                text = line.decode("utf-8", "replace").strip()
                raise _Failure(f"the server wrote a line that is not JSON-RPC to stdout while answering {method}: "
                               f"{text[:120]!r} (stdio servers must log to stderr)") from None
            if not isinstance(msg, dict):
                raise _Failure(f"the server sent a JSON {type(msg).__name__}, not a JSON-RPC message, to {method}")
            if "method" in msg:  # the server's own request or notification
                if "id" in msg:
                    self._answer_server_request(msg)
                continue
            if msg.get("id") != rid:
                continue  # an answer to nothing we are waiting for
            if "error" in msg:
                err = msg["error"] if isinstance(msg["error"], dict) else {"message": str(msg["error"])}
                raise _Failure(f"the server answered {method} with error {err.get('code')}: {err.get('message')}")
            result = msg.get("result")
            if not isinstance(result, dict):
                raise _Failure(f"the server's answer to {method} has no result object")
            return result

    def _answer_server_request(self, msg: dict[str, Any]) -> None:
        if msg["method"] == "ping":
            self._send({"jsonrpc": "2.0", "id": msg["id"], "result": {}})
        else:  # we declared no client capabilities (no sampling, roots, elicitation)
            self._send({"jsonrpc": "2.0", "id": msg["id"],
                        "error": {"code": -32601, "message": f"trialgrid does not support {msg['method']}"}})

    def stop(self) -> None:
        """The stdio shutdown MCP describes: close stdin, wait, SIGTERM, wait, SIGKILL."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass
        for signal_step in (None, self.proc.terminate, self.proc.kill):
            if signal_step is not None:
                signal_step()
            try:
                self.proc.wait(timeout=_STOP_GRACE_S)
                return
            except subprocess.TimeoutExpired:
                continue


def _list_tools(client: _StdioClient, timeout_s: float) -> tuple[list[Any], int]:
    tools: list[Any] = []
    cursor: str | None = None
    seen: set[str] = set()
    for page in range(1, _MAX_PAGES + 1):
        result = client.request("tools/list", {"cursor": cursor} if cursor is not None else {}, timeout_s)
        batch = result.get("tools")
        if not isinstance(batch, list):
            raise _Failure(f"page {page} of tools/list has no 'tools' list")
        tools.extend(batch)
        cursor = result.get("nextCursor")
        if cursor is None:
            return tools, page
        if not isinstance(cursor, str) or cursor in seen:
            raise _Failure(f"page {page} of tools/list returned the cursor {cursor!r} "
                           + ("again: the server's pagination loops" if cursor in seen else "(a cursor must be a string)"))
        seen.add(cursor)
    raise _Failure(f"tools/list still had more pages after {_MAX_PAGES}; the server's pagination does not end")


def _fetch_catalogue(server: McpServer, base_dir: Path, fail: Callable[[str], UserError]) -> _McpCatalogue:
    """Start ``server``, list its tools, stop it. Every failure is ``fail(message)`` (a located ``UserError``)."""
    argv = [server.command, *server.args]
    shown = " ".join(argv)
    cwd = base_dir / server.cwd if server.cwd is not None else base_dir
    if not cwd.is_dir():
        raise fail(f"mcp_server.cwd {server.cwd!r} is not a directory (resolved to {cwd})")
    try:
        client = _StdioClient(argv, {**os.environ, **server.env}, cwd)
    except FileNotFoundError:
        raise fail(f"cannot start the MCP server: command not found: {server.command!r} "
                   "(give a path, or make sure it is on PATH)") from None
    except OSError as exc:
        raise fail(f"cannot start the MCP server `{shown}`: {exc.strerror or exc}") from None
    try:
        init = client.request("initialize", {"protocolVersion": _PROTOCOL_VERSION, "capabilities": {},
                                             "clientInfo": {"name": "trialgrid", "version": trialgrid_version()}},
                              server.timeout_s)
        if not isinstance(init.get("capabilities"), dict) or "tools" not in init["capabilities"]:
            raise _Failure("the server does not offer tools (no 'tools' in its initialize capabilities)")
        client.notify("notifications/initialized")
        raw, pages = _list_tools(client, server.timeout_s)
    except _Failure as exc:
        client.stop()
        tail = " | ".join(line for line in client.stderr if line)[-600:]
        raise fail(f"MCP server `{shown}`: {exc}" + (f"; its stderr ends: {tail}" if tail else "")) from None
    client.stop()
    if not raw:
        raise fail(f"MCP server `{shown}` listed no tools; a catalogue needs at least one")
    try:
        tools = parse_catalogue({"tools": raw}, Source(path=Path(f"<tools/list of {shown}>"), data=raw))
    except UserError as exc:
        raise fail(f"MCP server `{shown}` returned a malformed tool at {exc.key_path}: {exc.message}") from None
    sha = catalogue_sha256(tools)
    info = server_info if isinstance(server_info := init.get("serverInfo"), dict) else {}
    record = {
        "command": argv,
        "server": {"name": info.get("name"), "version": info.get("version")},
        "protocol_version": init.get("protocolVersion"),
        "pages": pages,
        "sha256": sha,
        # plain form: a file with this list is a catalogue trialgrid reads back (`catalogue: tools.json`)
        "tools": [{"name": t.name, "description": t.description, "parameters": t.parameters} for t in tools],
    }
    return _McpCatalogue(tools, sha, record)


def probe_catalogue(catalogue: str | None, server: McpServer | None, base_dir: Path,
                    locate: Callable[[str, str], UserError]) -> tuple[tuple[ToolSpec, ...] | None, str | None,
                                                                      dict[str, Any] | None]:
    """A probe's catalogue from its file or its MCP server: (tools, sha256, manifest record); Nones for neither."""
    if server is not None:
        got = _fetch_catalogue(server, base_dir, lambda message: locate("mcp_server", message))
        return got.tools, got.sha256, got.record
    if catalogue is not None:
        tools, sha = load_catalogue(base_dir / catalogue)
        return tools, sha, None
    return None, None, None
