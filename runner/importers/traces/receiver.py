"""``trialgrid audit --listen``: production traces audited as they arrive, over OTLP/HTTP.

Point an OpenTelemetry SDK's OTLP/HTTP exporter, or a Collector's ``otlphttp`` exporter, at the receiver's
``/v1/traces``. Each export request is read by the same span reader as an OTLP file
(``runner.importers.traces.otlp``: one reader and one ``Sink`` for the receiver's life, so a tool span finds its
model span's context across requests, and a span sent twice is imported once), its calls are written to
``DIR/traces.jsonl`` exactly as ``trialgrid import traces`` writes them, audited with the containment baseline,
and their flagged fields appended to ``DIR/findings.jsonl`` (OTel ``gen_ai.evaluation.result`` events beside it,
as ``trialgrid audit --findings`` writes them). ``trialgrid audit DIR/traces.jsonl --out REPORT`` gives the flag
rates with intervals over everything received so far.

Nothing is acknowledged before it is on disk: the calls of a request are written and fsynced, then audited,
then the checkpoint (``DIR/listen.json``: how much of each file is audited) is replaced, and only then does
the exporter get its 200. A receiver killed at any point restarts from its checkpoint: calls written but not
yet audited are audited then (and counted), findings past the checkpoint are cut (they are made again), a
line cut short by the kill is dropped (its request was never acknowledged, so the exporter sends it again),
and the ids of the calls already written are remembered, so a request sent again is not imported twice.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from runner.core.errors import UserError
from runner.core.messages import say
from runner.core.safety import binds_loopback
from runner.importers.traces import INCOMPLETE_FILE, TRACES_FILE, read_record
from runner.importers.traces._core import Sink, Where
from runner.importers.traces.otlp import reader as otlp_reader
from runner.importers.traces.otlp_http import decode_export

LISTEN_FILE = "listen.json"
FINDINGS_FILE = "findings.jsonl"
EVENTS_FILE = "findings.otel.jsonl"
#: the tail of a file read at start for the ids already written (a resent request is one of the last few)
_REMEMBERED_TAIL_BYTES = 32 << 20
#: the ``file`` a received record is counted under in skip lines and each trace's ``source``
SOURCE_LABEL = "otlp-http"


@dataclass
class Checkpoint:
    """How far each file of the receiver's directory is written and audited: what a restart trusts."""

    traces_bytes: int = 0
    traces_lines: int = 0
    incomplete_bytes: int = 0
    findings_bytes: int = 0
    events_bytes: int = 0
    requests: int = 0
    calls: int = 0
    incomplete: int = 0
    findings: int = 0
    #: calls written before a crash and audited when the receiver started again
    recovered: int = 0
    #: lines a crash cut short (their requests were never acknowledged)
    dropped_lines: int = 0
    #: with ``--export-to``: how much of the events file the endpoint has taken, the events it accepted, and the
    #: ones it refused for good (a 4xx other than 429)
    exported_bytes: int = 0
    exported: int = 0
    export_refused: int = 0
    skipped: dict[str, int] = field(default_factory=dict)


class _Lines(list[bytes]):
    """What the ``Sink`` writes, held until the request's calls are written together."""

    def write(self, data: bytes) -> None:
        self.append(data)


class Receiver:
    """The receiver's state in ``out``: files, checkpoint, the span reader. Not thread-safe: one request at a time."""

    def __init__(self, out: Path) -> None:
        self.out = out
        out.mkdir(parents=True, exist_ok=True)
        self.traces_path, self.incomplete_path = out / TRACES_FILE, out / INCOMPLETE_FILE
        self.findings_path, self.events_path = out / FINDINGS_FILE, out / EVENTS_FILE
        self.checkpoint_path = out / LISTEN_FILE
        self.state = self._read_checkpoint()
        self._calls, self._incomplete = _Lines(), _Lines()
        self.sink = Sink(self._calls, self._incomplete)
        self.sink.skips.more = f"skipped more records for {{reason!r}}; the count is in {LISTEN_FILE}"
        self._handle = otlp_reader(self.sink)
        self._files: dict[str, IO[bytes]] = {}
        self._recover()

    # -- files -------------------------------------------------------------------------------------------------

    def _read_checkpoint(self) -> Checkpoint:
        if not self.checkpoint_path.exists():
            for path in (self.traces_path, self.findings_path):
                if path.exists() and path.stat().st_size:
                    raise UserError(f"{path.name} exists but {LISTEN_FILE} does not: not a receiver's directory",
                                    file=self.out, hint="choose another --out")
            return Checkpoint()
        try:
            data = json.loads(self.checkpoint_path.read_text(encoding="utf-8"))
            return Checkpoint(**data)
        except (ValueError, TypeError) as exc:
            raise UserError(f"{LISTEN_FILE} is not a receiver's checkpoint ({exc})", file=self.checkpoint_path,
                            hint="choose another --out") from None

    def _file(self, path: Path) -> IO[bytes]:
        fh = self._files.get(path.name)
        if fh is None:
            fh = self._files[path.name] = path.open("ab")
        return fh

    def _cut(self, path: Path, size: int) -> None:
        """``path`` back to ``size`` bytes (what the checkpoint trusts), when it has grown past it."""
        if path.exists() and path.stat().st_size > size:
            with path.open("r+b") as fh:
                fh.truncate(size)

    def _whole_lines(self, path: Path, start: int) -> list[bytes]:
        """The complete lines of ``path`` from byte ``start``; a last line without its newline is cut off."""
        if not path.exists():
            return []
        size = path.stat().st_size
        if size < start:
            raise UserError(f"{path.name} is shorter than {LISTEN_FILE} says it is: it was changed by something "
                            f"else", file=path, hint="choose another --out")
        with path.open("rb") as fh:
            fh.seek(start)
            tail = fh.read()
        end = tail.rfind(b"\n") + 1
        if end < len(tail):
            self.state.dropped_lines += 1
            self._cut(path, start + end)
        return tail[:end].splitlines()

    def _recover(self) -> None:
        """Start from the checkpoint: the files cut to what it trusts, calls written but not audited audited."""
        state = self.state
        self._cut(self.findings_path, state.findings_bytes)
        self._cut(self.events_path, state.events_bytes)
        unaudited = self._whole_lines(self.traces_path, state.traces_bytes)
        state.incomplete += len(self._whole_lines(self.incomplete_path, state.incomplete_bytes))
        if self.incomplete_path.exists():
            state.incomplete_bytes = self.incomplete_path.stat().st_size
        for path in (self.traces_path, self.incomplete_path):
            for tid in _ids_in_tail(path):
                self.sink.remember(tid)
        if unaudited:
            state.recovered += len(unaudited)
            state.traces_bytes = self.traces_path.stat().st_size  # the tail is audited now: trusted from here on
            self._audit(unaudited)
            say(f"{len(unaudited):,} call(s) written before the receiver stopped were audited now")
        self.save()

    def save(self) -> None:
        state = self.state
        partial = self.checkpoint_path.with_name(f".{LISTEN_FILE}.partial")
        partial.write_text(json.dumps(asdict(state), indent=1) + "\n", encoding="utf-8")
        os.replace(partial, self.checkpoint_path)

    def close(self) -> None:
        for fh in self._files.values():
            fh.close()
        self._files.clear()

    # -- requests ----------------------------------------------------------------------------------------------

    def accept(self, body: bytes, content_type: str | None) -> tuple[int, str]:
        """Read, write, audit and checkpoint one export request; (spans rejected, why). ``BadExport`` for a body
        that cannot be read at all (nothing of it is kept)."""
        value = decode_export(body, content_type)
        state = self.state
        state.requests += 1
        skipped_before = Counter(self.sink.skipped)
        read_record(self._handle, self.sink, value, Where(SOURCE_LABEL, state.requests))
        calls, incomplete = list(self._calls), list(self._incomplete)
        self._calls.clear()
        self._incomplete.clear()
        if incomplete:
            state.incomplete_bytes += self._append(self.incomplete_path, incomplete)
            state.incomplete += len(incomplete)
        if calls:
            state.traces_bytes += self._append(self.traces_path, calls)
            self._audit([line.rstrip(b"\n") for line in calls])
        skipped = self.sink.skipped - skipped_before
        for reason, n in skipped.items():
            state.skipped[reason] = state.skipped.get(reason, 0) + n
        self.save()
        rejected = sum(skipped.values())
        return rejected, (f"{rejected} span(s) or call(s) not readable; see {LISTEN_FILE}" if rejected else "")

    def _append(self, path: Path, lines: list[bytes]) -> int:
        """Write ``lines`` (each ends in a newline) to ``path`` and make them durable; bytes written."""
        fh = self._file(path)
        data = b"".join(lines)
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
        return len(data)

    def _audit(self, lines: list[bytes]) -> None:
        """The baseline over ``lines`` (the next lines of ``traces.jsonl``); their findings appended."""
        import polars as pl

        from runner.probes.phantom.audit import baseline_chunk
        from runner.probes.phantom.calibration import evaluation_event, findings

        state = self.state
        first = state.traces_lines + 1
        numbered = list(enumerate(lines, start=first))
        batch, summary, _ids, _digests = baseline_chunk(0, str(self.traces_path), numbered, False)
        found, events = [], []
        for rec in findings(pl.from_arrow(batch)):  # type: ignore[arg-type]  # a RecordBatch is a frame
            found.append(orjson.dumps(rec) + b"\n")
            event = evaluation_event(rec)
            if event is not None:
                events.append(orjson.dumps(event) + b"\n")
        if found:
            state.findings_bytes += self._append(self.findings_path, found)
        if events:
            state.events_bytes += self._append(self.events_path, events)
        state.traces_lines += len(lines)
        state.calls += summary.calls
        state.findings += len(found)
        for reason, n in summary.skipped.items():
            state.skipped[reason] = state.skipped.get(reason, 0) + n

    def progress(self) -> str:
        s = self.state
        skipped = sum(s.skipped.values())
        return (f"{s.requests:,} request(s), {s.calls:,} call(s) audited, {s.findings:,} finding(s)"
                + (f", {s.incomplete:,} call(s) with their context cut short (kept apart)" if s.incomplete else "")
                + (f", {skipped:,} skipped" if skipped else "")
                + (f", {s.exported:,} event(s) exported" if s.exported else "")
                + (f", {s.export_refused:,} refused by the export endpoint" if s.export_refused else ""))


def _ids_in_tail(path: Path) -> list[str]:
    """The ids of the traces in the last ``_REMEMBERED_TAIL_BYTES`` of ``path``."""
    if not path.exists():
        return []
    with path.open("rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        fh.seek(max(0, size - _REMEMBERED_TAIL_BYTES))
        tail = fh.read()
    lines = tail.split(b"\n")
    if size > _REMEMBERED_TAIL_BYTES:
        lines = lines[1:]  # the first is cut
    ids = []
    for line in lines:
        if line:
            try:
                value: Any = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(value, dict) and isinstance(value.get("id"), str):
                ids.append(value["id"])
    return ids


# -- the HTTP server -------------------------------------------------------------------------------------------------

#: a progress line at most this often, when something arrived
PROGRESS_EVERY_S = 10.0
TRACES_PATH = "/v1/traces"


@dataclass(frozen=True)
class Listen:
    """Where the receiver listens and what it asks of a sender."""

    host: str = "127.0.0.1"
    port: int = 4318
    #: a request must carry ``Authorization: Bearer <token>`` (required off loopback)
    token: str | None = None


def parse_listen(text: str) -> tuple[str, int]:
    """``[HOST:]PORT`` (``[::1]:4318`` for an IPv6 host) as (host, port); loopback when no host is given."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", text
    host = host.strip("[]") or "127.0.0.1"
    if not port.isascii() or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise UserError(f"--listen {text!r}: the port is not a number from 0 to 65535", hint="e.g. --listen 4318")
    return host, int(port)


def make_app(receiver: Receiver, token: str | None, lock: Any = None) -> Any:
    """The aiohttp application: ``POST /v1/traces``, one request at a time through ``receiver`` (``lock``: an
    ``asyncio.Lock`` shared with whatever else moves the receiver's checkpoint)."""
    import asyncio
    import hmac

    from aiohttp import web

    from runner.importers.traces.otlp_http import MAX_BODY_BYTES, BadExport, export_response

    lock = lock or asyncio.Lock()
    expected = f"Bearer {token}".encode() if token else None

    async def traces(request: web.Request) -> web.Response:
        if expected is not None and not hmac.compare_digest(request.headers.get("Authorization", "").encode(),
                                                            expected):
            return web.json_response({"error": "a bearer token is required"}, status=401)
        content_type = request.headers.get("Content-Type")
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return web.json_response({"error": f"the body is over {MAX_BODY_BYTES >> 20} MiB"}, status=413)
        async with lock:  # the files, the reader's state and the checkpoint move one request at a time
            try:
                rejected, why = await asyncio.to_thread(receiver.accept, body, content_type)
            except BadExport as exc:
                return web.json_response({"error": str(exc)}, status=exc.status)
        data, media = export_response(content_type, rejected, why)
        return web.Response(body=data, content_type=media)

    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app.router.add_post(TRACES_PATH, traces)
    return app


def serve_receiver(out: Path, listen: Listen, started: Any = say, export_to: str | None = None) -> Checkpoint:
    """Receive and audit until interrupted (Ctrl-C / SIGTERM); the checkpoint at the end. ``started`` gets the
    endpoint's URL once the socket listens (``port`` 0: any free one). ``export_to``: an OTLP/HTTP logs endpoint
    the findings' evaluation events are sent to as they are made (``runner.importers.traces.export``)."""
    import asyncio
    import contextlib
    import signal

    from aiohttp import web

    if not binds_loopback(listen.host) and not listen.token:
        raise UserError(f"--listen {listen.host}: off loopback, senders must prove who they are",
                        hint="set --token-env to a variable holding a token; senders send it as a bearer token")
    receiver = Receiver(out)

    async def main() -> None:
        lock = asyncio.Lock()
        runner = web.AppRunner(make_app(receiver, listen.token, lock), access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, listen.host, listen.port)
        await site.start()
        sockets = getattr(site._server, "sockets", None) or []
        port = sockets[0].getsockname()[1] if sockets else listen.port
        host = f"[{listen.host}]" if ":" in listen.host else listen.host
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):  # before the line that says it listens: a stop then is clean
            with contextlib.suppress(NotImplementedError, RuntimeError):  # not on Windows, nor off the main thread
                loop.add_signal_handler(sig, stop.set)
        started(f"receiving OTLP traces on http://{host}:{port}{TRACES_PATH} → {out}")
        said = receiver.progress()
        exporting = None
        if export_to is not None:
            from runner.importers.traces.export import Sent, keep_exporting

            state = receiver.state

            async def committed(sent: Sent) -> None:
                async with lock:  # the checkpoint moves with the requests', never between their steps
                    state.exported_bytes += sent.size
                    state.exported += sent.accepted
                    state.export_refused += sent.refused
                    receiver.save()

            exporting = asyncio.ensure_future(keep_exporting(
                export_to, receiver.events_path, lambda: (state.exported_bytes, state.events_bytes), committed, stop))
        try:
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), PROGRESS_EVERY_S)
                line = receiver.progress()
                if line != said:
                    say(line)
                    said = line
        finally:
            if exporting is not None:
                await exporting  # it sends what arrived last, once, then ends
            await runner.cleanup()

    try:
        asyncio.run(main())
    finally:
        receiver.close()
    return receiver.state
