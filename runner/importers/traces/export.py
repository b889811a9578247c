"""``audit --listen … --export-to URL``: the receiver's findings sent back over OTLP, as evaluation events.

The receiver writes each finding's ``gen_ai.evaluation.result`` event (an OTLP JSON log record, parented to
the span it evaluates) to ``findings.otel.jsonl`` before it acknowledges the traces. This module sends those
lines, in order, as OTLP/HTTP JSON logs export requests to a Collector's (or a backend's) logs endpoint, so the
evaluations show beside the traces where the team already looks.

Nothing is lost and nothing sent twice across restarts: how far the file is exported is in the receiver's
checkpoint (``exported_bytes``), moved only after the endpoint accepted a batch. An endpoint that does not
answer, refuses with 429 or fails with 5xx is tried again with a growing wait (the events wait on disk; one
line when it starts failing, one when it recovers); a batch refused with another 4xx can never be accepted as
it is, so it is counted (``export_refused``) and passed over with a line, not retried forever.

What leaves the machine: per finding, the tool's name, the call id, the field flagged and by which check, and the
trace and span ids, never an argument's value. Headers for the endpoint (an API key) come from
``OTEL_EXPORTER_OTLP_LOGS_HEADERS`` or ``OTEL_EXPORTER_OTLP_HEADERS``, as the OTel SDKs read them.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import orjson

from runner.core.errors import UserError
from runner.core.messages import say
from runner.core.safety import one_line
from runner.core.version import trialgrid_version

__all__ = ["EXPORT_BATCH_BYTES", "LOGS_PATH", "ExportFailed", "Sent", "export_headers", "export_url", "keep_exporting",
           "logs_request", "send_events"]

#: where an OTLP/HTTP endpoint takes logs, appended to a URL given without a path (as ``OTEL_EXPORTER_OTLP_ENDPOINT``)
LOGS_PATH = "/v1/logs"
#: at most this many bytes of event lines in one export request
EXPORT_BATCH_BYTES = 1 << 20
#: the wait before trying a failing endpoint again, doubling up to the most
RETRY_FIRST_S, RETRY_MOST_S = 1.0, 60.0
_TIMEOUT_S = 30.0
#: the last try at a stop: the receiver stops within this, the endpoint answering or not
_LAST_TRY_S = 5.0


def _bytes_left(path: Path, exported: int, written: int) -> str:
    with path.open("rb") as fh:
        fh.seek(exported)
        events = fh.read(max(0, written - exported)).count(b"\n")
    return f"{events:,} event(s)"


def export_url(text: str) -> str:
    """``--export-to``'s URL: ``http(s)://host[:port]`` gets ``/v1/logs``; a URL with a path is the logs endpoint."""
    parts = urlsplit(text.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UserError(f"--export-to {text!r}: not an http(s) URL",
                        hint="e.g. --export-to http://127.0.0.1:4318 (a Collector's OTLP/HTTP endpoint)")
    return text.strip().rstrip("/") + LOGS_PATH if parts.path in ("", "/") else text.strip()


def export_headers(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The endpoint's headers from ``OTEL_EXPORTER_OTLP_LOGS_HEADERS`` (else ``OTEL_EXPORTER_OTLP_HEADERS``):
    ``key=value`` pairs separated by commas, values percent-encoded, as the OTel SDKs read them."""
    env = os.environ if environ is None else environ
    raw = env.get("OTEL_EXPORTER_OTLP_LOGS_HEADERS") or env.get("OTEL_EXPORTER_OTLP_HEADERS") or ""
    headers: dict[str, str] = {}
    for item in raw.split(","):
        key, sep, value = item.partition("=")
        if sep and key.strip():
            headers[unquote(key.strip())] = unquote(value.strip())
    return headers


def logs_request(lines: list[bytes], now_ns: int) -> bytes:
    """An OTLP/HTTP JSON logs export request holding the event records ``lines`` (one JSON object each)."""
    records = []
    for line in lines:
        record: dict[str, Any] = orjson.loads(line)
        record.setdefault("timeUnixNano", str(now_ns))
        record.setdefault("observedTimeUnixNano", str(now_ns))
        records.append(record)
    service = {"key": "service.name", "value": {"stringValue": "trialgrid"}}
    return orjson.dumps({"resourceLogs": [{"resource": {"attributes": [service]}, "scopeLogs": [
        {"scope": {"name": "trialgrid", "version": trialgrid_version()}, "logRecords": records}]}]})


@dataclass
class Sent:
    """What one batch of ``send_events`` did: bytes of the file it moved past, events accepted and refused."""

    size: int = 0
    accepted: int = 0
    refused: int = 0


def _batches(path: Path, start: int, end: int) -> list[tuple[int, list[bytes]]]:
    """The whole lines of ``path`` between byte ``start`` and ``end``, as (bytes, lines) batches."""
    if end <= start:
        return []
    with path.open("rb") as fh:
        fh.seek(start)
        data = fh.read(end - start)
    batches: list[tuple[int, list[bytes]]] = []
    size, lines = 0, list[bytes]()
    for line in data.splitlines(keepends=True):
        if size and size + len(line) > EXPORT_BATCH_BYTES:
            batches.append((size, lines))
            size, lines = 0, []
        size += len(line)
        lines.append(line.rstrip(b"\n"))
    if lines:
        batches.append((size, lines))
    return batches


async def send_events(session: Any, url: str, headers: dict[str, str], path: Path, start: int, end: int,
                      committed: Callable[[Sent], Awaitable[None]], timeout_s: float = _TIMEOUT_S) -> None:
    """Send the events of ``path`` from byte ``start`` to ``end`` (whole lines, written before), a batch at a time,
    calling ``committed`` after each batch the endpoint answered for good (accepted, or refused for ever). Raises
    ``ExportFailed`` when the endpoint cannot take them now (no answer, 429, 5xx): the caller tries again later."""
    import aiohttp

    for size, lines in _batches(path, start, end):
        body = logs_request(lines, time.time_ns())
        try:
            async with session.post(url, data=body, headers={"Content-Type": "application/json", **headers},
                                    timeout=aiohttp.ClientTimeout(total=timeout_s)) as response:
                status = response.status
                text = (await response.content.read(2048)).decode("utf-8", "replace")
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise ExportFailed(f"no answer ({type(exc).__name__}: {one_line(str(exc))[:160]})") from None
        if status == 429 or status >= 500:
            raise ExportFailed(f"HTTP {status}: {one_line(text)[:160]}")
        if 200 <= status < 300:
            await committed(Sent(size, len(lines), 0))
        else:  # this batch can never be accepted as it is: said, counted, passed over
            say(f"export to {url}: HTTP {status} refused {len(lines):,} event(s): {one_line(text)[:200]}")
            await committed(Sent(size, 0, len(lines)))


class ExportFailed(Exception):
    """The endpoint cannot take events now; they wait on disk and are sent again later."""


async def keep_exporting(url: str, path: Path, progress: Callable[[], tuple[int, int]],
                         committed: Callable[[Sent], Awaitable[None]], stop: asyncio.Event,
                         every_s: float = 0.5) -> None:
    """Until ``stop``: send what ``progress()`` says is written past what is exported ((exported, written) bytes of
    ``path``), waiting ``every_s`` between looks, and longer (doubling to a minute) while the endpoint fails."""
    import aiohttp

    headers = export_headers()
    wait, failing = every_s, False
    async with aiohttp.ClientSession(trust_env=True) as session:
        while not stop.is_set():
            exported, written = progress()
            try:
                await send_events(session, url, headers, path, exported, written, committed)
            except ExportFailed as exc:
                if not failing:
                    say(f"export to {url} failing ({exc}); the events wait in {path.name} and are sent when it "
                        "answers")
                failing, wait = True, min(RETRY_MOST_S, max(RETRY_FIRST_S, wait * 2))
            else:
                if failing:
                    say(f"export to {url} answering again")
                failing, wait = False, every_s
            try:
                await asyncio.wait_for(stop.wait(), wait)
            except TimeoutError:
                pass
        exported, written = progress()
        if written > exported:  # what is still waiting, tried once more without waiting on a failing endpoint
            try:
                await send_events(session, url, headers, path, exported, written, committed, timeout_s=_LAST_TRY_S)
            except ExportFailed:
                say(f"export to {url}: {_bytes_left(path, *progress())} left to send; the next start sends them")
