"""``trialgrid audit --listen``: the OTLP/HTTP receiver, fed by the real OpenTelemetry SDK's exporter.

The receiver runs as a user runs it (``python -m runner audit --listen 0 --out DIR``, a child process on
loopback); the spans come from the ``openai`` SDK, instrumented by opentelemetry-instrumentation-openai-v2,
talking to ``trialgrid serve``, and leave through ``opentelemetry-exporter-otlp-proto-http`` (protobuf). The
same spans are also written to a file by the SDK's own encoder and imported the offline way: what the receiver
wrote and found must equal that, every call the server answered audited once.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from runner.core.errors import UserError
from runner.importers.traces import import_traces
from runner.importers.traces.otlp_http import BadExport, decode_export
from runner.importers.traces.receiver import LISTEN_FILE, Receiver, parse_listen, serve_receiver
from runner.importers.traces.receiver import Listen as ListenAt
from tests.conftest import ROOT
from tests.helpers.serving import serving
from tests.importers.test_import_traces_real import Seen, _answered, _model_spans, _openai_conversations

DATA = Path(__file__).parent / "data"
_URL = re.compile(r"http://127\.0\.0\.1:(\d+)/v1/traces")


class Receiving:
    """A receiver child process: its URL, and a way to stop it (SIGINT) or kill it (SIGKILL)."""

    def __init__(self, out: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "runner", "audit", "--listen", "0", "--out", str(out),
                                      *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env={**os.environ, **(env or {})})
        assert self.proc.stdout is not None
        self.lines: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.lines.append(line)
            if m := _URL.search(line):
                self.url = m.group(0)
                return
        self.proc.kill()
        raise AssertionError("the receiver did not start: " + "".join(self.lines))

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGINT)
        out, _ = self.proc.communicate(timeout=60)
        assert self.proc.returncode == 0, out
        return "".join(self.lines) + out

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)


@pytest.fixture
def receiving(tmp_path: Path) -> Iterator[tuple[Receiving, Path]]:
    out = tmp_path / "live"
    r = Receiving(out)
    try:
        yield r, out
    finally:
        if r.proc.poll() is None:
            r.kill()


def _traces(path: Path) -> dict[str, dict[str, Any]]:
    """The traces of a ``traces.jsonl`` by id, without where they were read from (a file, or the receiver)."""
    out = {}
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        rec["source"] = {k: v for k, v in rec["source"].items() if k not in ("file", "record")}
        assert rec["id"] not in out
        out[rec["id"]] = rec
    return out


def _findings(path: Path) -> set[tuple[str, str, str]]:
    if not path.exists():
        return set()
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    keys = {(r["trace"], r["field"], r["value"]) for r in rows}
    assert len(keys) == len(rows)  # nothing found twice
    return keys


def _offline(spans: Path, tmp_path: Path) -> tuple[dict[str, dict[str, Any]], set[tuple[str, str, str]]]:
    """The same spans the offline way: ``import traces`` then ``audit --findings``."""
    imported = tmp_path / "imported"
    import_traces([spans], imported, fmt="otlp")
    findings = tmp_path / "offline-findings.jsonl"
    done = subprocess.run([sys.executable, "-m", "runner", "audit", str(imported / "traces.jsonl"), "--out",
                           str(tmp_path / "offline-audit"), "--findings", str(findings)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return _traces(imported / "traces.jsonl"), _findings(findings)


def test_sdk_exporter_to_receiver_equals_importing_the_same_spans(receiving: tuple[Receiving, Path],
                                                                    tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("openai")
    exporter_mod = pytest.importorskip("opentelemetry.exporter.otlp.proto.http.trace_exporter")
    instrumentation = pytest.importorskip("opentelemetry.instrumentation.openai_v2")
    encoder = pytest.importorskip("opentelemetry.exporter.otlp.proto.common.trace_encoder")
    from google.protobuf.json_format import MessageToJson
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    receiver, out = receiving
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    # small batches: several export requests, so a tool span's conversation crosses requests
    provider.add_span_processor(BatchSpanProcessor(exporter_mod.OTLPSpanExporter(endpoint=receiver.url),
                                                   max_export_batch_size=2, schedule_delay_millis=50))
    instrumentor = instrumentation.OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    seen = Seen()
    try:
        with serving() as server:
            _openai_conversations(server.base_url, seen, provider.get_tracer("test"))
            answered = _answered(server)
    finally:
        instrumentor.uninstrument()
    assert provider.force_flush(30_000)
    spans = tmp_path / "spans.otlp.json"
    spans.write_text(MessageToJson(encoder.encode_spans(memory.get_finished_spans())))
    provider.shutdown()
    log = receiver.stop()
    assert "stopped:" in log

    live = _traces(out / "traces.jsonl")
    offline, offline_findings = _offline(spans, tmp_path)
    assert live == offline
    assert len(live) == len(seen.calls) >= 3  # every call the server answered, once
    assert {t["source"]["call_id"] for t in live.values()} == set(seen.calls)
    assert _model_spans(spans, "gen_ai.input.messages") == answered  # every model request the server answered
    assert offline_findings and _findings(out / "findings.jsonl") == offline_findings
    state = json.loads((out / LISTEN_FILE).read_text())
    assert state["calls"] == len(live) and state["traces_lines"] == len(live) and state["requests"] >= 2
    assert state["recovered"] == 0 and state["dropped_lines"] == 0


def _flat_export() -> bytes:
    return (DATA / "otel_flat_openai.otlp.json").read_bytes()


def test_json_and_gzip_bodies_and_what_is_refused(receiving: tuple[Receiving, Path]) -> None:
    receiver, out = receiving
    body = _flat_export()
    with httpx.Client(timeout=30) as client:
        first = client.post(receiver.url, content=gzip.compress(body),
                            headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})
        assert first.status_code == 200 and first.json() == {}
        again = client.post(receiver.url, content=body, headers={"Content-Type": "application/json"})
        assert again.status_code == 200  # the same spans sent again: imported once
        bad = client.post(receiver.url, content=b'{"resourceSpans": [{"scopeSpans": [{"spans": [5]}]}]}',
                          headers={"Content-Type": "application/json"})
        assert bad.status_code == 200 and bad.json()["partialSuccess"]["rejectedSpans"] == "1"
        for content, ctype, status in ((b"[1]", "application/json", 400), (b"{", "application/json", 400),
                                       (b"\xff\x00garbage", "application/x-protobuf", 400),
                                       (body, "text/plain", 415)):
            refused = client.post(receiver.url, content=content, headers={"Content-Type": ctype})
            assert refused.status_code == status, (content[:20], refused.text)
            assert refused.json()["error"]
        assert client.get(receiver.url).status_code == 405
    receiver.stop()
    traces = (out / "traces.jsonl").read_text().splitlines()
    assert len(traces) == len(json.loads((DATA / "otel_flat_openai.seen.json").read_text()))  # by call id
    state = json.loads((out / LISTEN_FILE).read_text())
    assert state["requests"] == 3 and state["calls"] == len(traces) and state["skipped"] == {"wrong type": 1}


def test_killed_receiver_restarts_without_auditing_anything_twice(tmp_path: Path) -> None:
    """A steady stream of distinct exports; the receiver killed (SIGKILL) mid-stream; restarted on the same
    directory, and every request sent again as a retrying exporter would: each call audited once."""
    out = tmp_path / "live"
    doc = json.loads(_flat_export())
    bodies = []
    for n in range(40):  # distinct trace ids: 40 exports of the same calls in other traces
        copy = json.loads(json.dumps(doc))
        for rs in copy["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    span["traceId"] = f"{n:032x}"
        bodies.append(json.dumps(copy).encode())
    first = Receiving(out)
    sent = 0
    with httpx.Client(timeout=30) as client:
        for body in bodies[:25]:
            assert client.post(first.url, content=body, headers={"Content-Type": "application/json"}).status_code == 200
            sent += 1
    first.kill()
    second = Receiving(out)
    with httpx.Client(timeout=30) as client:
        for body in bodies:  # everything again: the exporter did not know what arrived
            assert client.post(second.url, content=body, headers={"Content-Type": "application/json"}).status_code == 200
    second.stop()
    ids = [json.loads(line)["id"] for line in (out / "traces.jsonl").read_text().splitlines()]
    per_export = len(ids) // len(bodies)
    assert len(ids) == len(set(ids)) == per_export * len(bodies) and per_export >= 1
    findings = [json.loads(line) for line in (out / "findings.jsonl").read_text().splitlines()]
    assert len({(f["trace"], f["field"]) for f in findings}) == len(findings)
    state = json.loads((out / LISTEN_FILE).read_text())
    assert state["calls"] == state["traces_lines"] == len(ids)
    assert state["findings"] == len(findings)


def test_a_crash_between_writing_and_auditing_is_recovered_on_start(tmp_path: Path) -> None:
    out = tmp_path / "live"
    receiver = Receiver(out)
    receiver.accept(_flat_export(), "application/json")
    receiver.close()
    done = json.loads((out / LISTEN_FILE).read_text())
    assert done["calls"] >= 2 and done["findings"] >= 1
    findings_before = (out / "findings.jsonl").read_bytes()
    # as a kill leaves it: the checkpoint from before the last calls, findings half written, a line cut short
    lines = (out / "traces.jsonl").read_bytes().splitlines(keepends=True)
    behind = {**done, "traces_bytes": len(lines[0]), "traces_lines": 1, "calls": 1, "findings": 0,
              "findings_bytes": 0}
    (out / LISTEN_FILE).write_text(json.dumps(behind))
    with (out / "findings.jsonl").open("ab") as fh:
        fh.write(b'{"half": ')
    with (out / "traces.jsonl").open("ab") as fh:
        fh.write(b'{"id": "cut-sh')
    again = Receiver(out)
    again.close()
    state = json.loads((out / LISTEN_FILE).read_text())
    assert state["recovered"] == len(lines) - 1 and state["dropped_lines"] == 1
    assert state["traces_lines"] == len(lines) and state["calls"] == done["calls"]
    assert (out / "traces.jsonl").read_bytes() == b"".join(lines)
    assert sorted((out / "findings.jsonl").read_bytes().splitlines()) == sorted(findings_before.splitlines())
    assert state["findings"] == done["findings"]
    # a second start trusts what the first one recovered: nothing audited again
    Receiver(out).close()
    assert json.loads((out / LISTEN_FILE).read_text()) == state
    assert sorted((out / "findings.jsonl").read_bytes().splitlines()) == sorted(findings_before.splitlines())


def test_a_directory_that_is_not_a_receivers_is_refused(tmp_path: Path) -> None:
    (tmp_path / "traces.jsonl").write_text('{"id": "x"}\n')
    with pytest.raises(UserError, match="not a receiver's directory"):
        Receiver(tmp_path)
    (tmp_path / LISTEN_FILE).write_text("[1, 2]")
    with pytest.raises(UserError, match="not a receiver's checkpoint"):
        Receiver(tmp_path)


def test_listen_addresses_and_tokens(tmp_path: Path) -> None:
    assert parse_listen("4318") == ("127.0.0.1", 4318)
    assert parse_listen("0.0.0.0:4318") == ("0.0.0.0", 4318)
    assert parse_listen("[::1]:9") == ("::1", 9)
    for bad in ("http", "70000", "host:", "１２"):
        with pytest.raises(UserError, match="--listen"):
            parse_listen(bad)
    with pytest.raises(UserError, match="off loopback"):
        serve_receiver(tmp_path / "x", ListenAt("0.0.0.0", 0, None))
    assert not (tmp_path / "x").exists()


def test_a_token_is_asked_of_every_sender(tmp_path: Path) -> None:
    out = tmp_path / "live"
    r = Receiving(out, "--token-env", "TG_TEST_TOKEN", env={"TG_TEST_TOKEN": "s3cret"})
    try:
        with httpx.Client(timeout=30) as client:
            headers = {"Content-Type": "application/json"}
            assert client.post(r.url, content=_flat_export(), headers=headers).status_code == 401
            wrong = {**headers, "Authorization": "Bearer nope"}
            assert client.post(r.url, content=_flat_export(), headers=wrong).status_code == 401
            right = {**headers, "Authorization": "Bearer s3cret"}
            assert client.post(r.url, content=_flat_export(), headers=right).status_code == 200
    finally:
        r.stop()
    assert json.loads((out / LISTEN_FILE).read_text())["requests"] == 1


@pytest.mark.parametrize(("args", "message"), [
    (["audit"], "give trace files"),
    (["audit", "--listen", "4318"], "--listen needs --out"),
    (["audit", "--listen", "4318", "--out", "x", "t.jsonl"], "--listen receives traces"),
    (["audit", "--listen", "4318", "--out", "x", "--token-env", "TG_UNSET_VARIABLE"], "is not set"),
])
def test_audit_command_lines_that_cannot_work_say_why(args: list[str], message: str, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "runner", *args], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, env={k: v for k, v in os.environ.items() if k != "TG_UNSET_VARIABLE"})
    assert done.returncode == 2
    assert message in done.stderr + done.stdout


def test_decode_refuses_what_is_not_an_export() -> None:
    assert decode_export(b'{"resourceSpans": []}', "application/json; charset=utf-8") == {"resourceSpans": []}
    with pytest.raises(BadExport) as bad:
        decode_export(b"x", "application/xml")
    assert bad.value.status == 415
