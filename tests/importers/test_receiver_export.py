"""``audit --listen … --export-to URL``: each finding's evaluation event reaches an OTLP/HTTP logs endpoint once,
through an endpoint's outage and the receiver's restarts."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from runner.importers.traces.export import export_headers, export_url, logs_request
from runner.importers.traces.receiver import EVENTS_FILE, LISTEN_FILE
from tests.importers.test_receiver import DATA, Receiving


class Collector:
    """An OTLP/HTTP logs endpoint on loopback: the requests it took, and a script of answers to give first."""

    def __init__(self, answers: list[int] | None = None, port: int = 0) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.answers = list(answers or [])
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                status = collector.answers.pop(0) if collector.answers else 200
                if status == 200 and self.path == "/v1/logs":
                    collector.bodies.append(json.loads(body))
                    collector.headers.append(dict(self.headers))
                self.send_response(status if self.path == "/v1/logs" else 404)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b"{}" if status == 200 else b'{"error": "not now"}')

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def records(self) -> list[dict[str, Any]]:
        return [r for body in self.bodies for rl in body["resourceLogs"] for sl in rl["scopeLogs"]
                for r in sl["logRecords"]]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def started() -> Iterator[list[Receiving]]:
    """Receivers a test starts, killed at its end if still running (a failed assertion leaves none behind)."""
    procs: list[Receiving] = []
    yield procs
    for r in procs:
        if r.proc.poll() is None:
            r.kill()


def _receiving(started: list[Receiving], out: Path, *args: str, env: dict[str, str] | None = None) -> Receiving:
    r = Receiving(out, *args, env=env)
    started.append(r)
    return r


@pytest.fixture
def collector() -> Iterator[Collector]:
    c = Collector(answers=[503, 503])  # down for its first two requests: the receiver waits and sends again
    try:
        yield c
    finally:
        c.close()


def _send(url: str, name: str = "otel_flat_openai.otlp.json") -> None:
    with httpx.Client(timeout=30) as client:
        answer = client.post(url, content=(DATA / name).read_bytes(), headers={"Content-Type": "application/json"})
        assert answer.status_code == 200, answer.text


def _exported(out: Path) -> None:
    """Until the checkpoint says every event written is exported (a bound, not a measurement)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        state = json.loads((out / LISTEN_FILE).read_text())
        if state["events_bytes"] and state["exported_bytes"] == state["events_bytes"]:
            return
        time.sleep(0.1)
    raise AssertionError(f"not exported within a minute: {state}")


def test_every_event_reaches_the_endpoint_once_through_an_outage_and_a_restart(collector: Collector, tmp_path: Path,
                                                                               started: list[Receiving]) -> None:
    out = tmp_path / "live"
    receiver = _receiving(started, out, "--export-to", collector.url,
                          env={"OTEL_EXPORTER_OTLP_HEADERS": "x-api-key=s3cr%3Dt,x-team=evals"})
    _send(receiver.url)
    _send(receiver.url, "otel_flat_anthropic.otlp.json")
    _exported(out)  # through the endpoint's two 503s: it is asked again, a little later each time
    said = receiver.stop()
    events = [json.loads(line) for line in (out / EVENTS_FILE).read_text().splitlines()]
    assert events, "the fixtures are expected to flag something"
    got = collector.records()
    assert [(r["traceId"], r.get("spanId"), r["attributes"]) for r in got] == \
        [(e["traceId"], e.get("spanId"), e["attributes"]) for e in events]  # each once, in order
    assert all(r["eventName"] == "gen_ai.evaluation.result" and int(r["timeUnixNano"]) > 0 for r in got)
    resource = collector.bodies[0]["resourceLogs"][0]["resource"]["attributes"]
    assert {"key": "service.name", "value": {"stringValue": "trialgrid"}} in resource
    assert collector.headers[0]["x-api-key"] == "s3cr=t" and collector.headers[0]["x-team"] == "evals"
    assert "failing (HTTP 503" in said and "answering again" in said
    state = json.loads((out / LISTEN_FILE).read_text())
    assert state["exported"] == len(events) and state["exported_bytes"] == state["events_bytes"]

    again = _receiving(started, out, "--export-to", collector.url)  # a restart sends nothing it sent before
    _send(again.url)  # the same spans again: imported once, so no new finding either
    again.stop()
    assert len(collector.records()) == len(events)


def test_events_made_while_the_endpoint_was_down_are_sent_by_the_next_start(tmp_path: Path,
                                                                            started: list[Receiving]) -> None:
    down = Collector()
    url = down.url
    down.close()  # nothing listens there now
    out = tmp_path / "live"
    receiver = _receiving(started, out, "--export-to", url)
    _send(receiver.url)
    receiver.kill()  # not even a clean stop
    state = json.loads((out / LISTEN_FILE).read_text())
    assert state["events_bytes"] > 0 and state["exported_bytes"] == 0
    up = Collector(port=int(url.rsplit(":", 1)[1]))
    try:
        _receiving(started, out, "--export-to", url).stop()
        events = (out / EVENTS_FILE).read_text().splitlines()
        assert len(up.records()) == len(events)
        assert json.loads((out / LISTEN_FILE).read_text())["exported"] == len(events)
    finally:
        up.close()


def test_a_batch_refused_for_good_is_counted_and_passed_over(tmp_path: Path, started: list[Receiving]) -> None:
    c = Collector(answers=[400])
    try:
        out = tmp_path / "live"
        receiver = _receiving(started, out, "--export-to", c.url + "/v1/logs")
        _send(receiver.url)
        _send(receiver.url, "otel_flat_anthropic.otlp.json")
        said = receiver.stop()
        state = json.loads((out / LISTEN_FILE).read_text())
        assert state["export_refused"] > 0 and "HTTP 400 refused" in said
        assert state["exported"] + state["export_refused"] == len((out / EVENTS_FILE).read_text().splitlines())
        assert len(c.records()) == state["exported"]
    finally:
        c.close()


def test_urls_headers_and_the_request_shape() -> None:
    assert export_url("http://127.0.0.1:4318") == "http://127.0.0.1:4318/v1/logs"
    assert export_url("https://otel.example.com/") == "https://otel.example.com/v1/logs"
    assert export_url("https://otel.example.com/api/v1/logs") == "https://otel.example.com/api/v1/logs"
    with pytest.raises(Exception, match="not an http"):
        export_url("otel.example.com:4318")
    assert export_headers({"OTEL_EXPORTER_OTLP_HEADERS": "a=1, b = x%2Cy ,bad"}) == {"a": "1", "b": "x,y"}
    assert export_headers({"OTEL_EXPORTER_OTLP_HEADERS": "a=1", "OTEL_EXPORTER_OTLP_LOGS_HEADERS": "c=2"}) == {"c": "2"}
    body = json.loads(logs_request([b'{"eventName": "gen_ai.evaluation.result", "traceId": "ab"}'], 7))
    record = body["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0]
    assert record == {"eventName": "gen_ai.evaluation.result", "traceId": "ab", "timeUnixNano": "7",
                      "observedTimeUnixNano": "7"}
