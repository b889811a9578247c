"""Every model call on the row: the request exactly as sent, every response, from the output alone.

- the agent's record, encoded into a row and decoded back, is the request built (messages, the tools in the order
  offered, params, seed, tool choice) and every response or failure;
- over HTTP, the recorded request, encoded by the wire format, is the body ``trialgrid serve`` received;
- the report's example trials come from the output with the case files deleted;
- a repeated system prompt and catalogue are stored once per record batch, whatever the number of trials;
- an output written before calls were recorded still reports.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping
from html import unescape
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
import yaml
from typer.testing import CliRunner

import runner
from runner.cli.app import app
from runner.config.sweep import load_sweep
from runner.core.calls import Blobs, decode_calls, encode_calls, first_in_batch, referenced_blobs, row_calls
from runner.core.types import ChatRequest, ChatResponse, Message, ToolCall, ToolSpec, Usage
from runner.output import Output
from runner.output.sink import to_record_batch
from runner.probes.misselection import DEFAULT_SYSTEM
from runner.providers import Agent, ErrorKind, ProviderError
from runner.providers.openai_wire import encode_request
from runner.sim.serve import ServeOptions, ServerThread
from runner.sim.serve.codecs import OpenAICodec
from tests.conftest import CONFIGS
from tests.execution.test_rescore import _copy_sweep
from tests.helpers.rows import without_calls

WEATHER = ToolSpec("get_weather", "Weather for a city.", {"type": "object", "properties": {"city": {"type": "string"}}})
TIME = ToolSpec("get_time", "", {})  # empty description and parameters: stored as they were, not defaulted


class _Scripted:
    """A provider answering from a list: a response, or a ProviderError to raise."""

    name = "scripted"

    def __init__(self, answers: list[ChatResponse | ProviderError]) -> None:
        self.answers = answers
        self.sent: list[ChatRequest] = []

    async def complete(self, request: ChatRequest) -> ChatResponse:
        self.sent.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, ProviderError):
            raise answer
        return answer

    async def aclose(self) -> None:
        return None


def _row_values(agent: Agent) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """The agent's record through the row schema and back, as a reader gets it."""
    from runner.core.schema import COMMON_FIELDS

    calls, blobs = encode_calls(agent.record)
    fields = [f for f in COMMON_FIELDS if f.name in ("calls", "call_blobs")]
    batch = to_record_batch([{"calls": calls, "call_blobs": blobs}], pa.schema(fields))
    (row,) = batch.to_pylist()
    return row["calls"], row["call_blobs"]


def test_the_record_of_a_multi_turn_trial_decodes_to_every_request_and_response_exactly() -> None:
    call = ToolCall("get_weather", '{"city":"Lisbon"}', {"city": "Lisbon"}, "c0")
    first = ChatResponse("", (call,), Usage(11, 3), 0.25, "tool_calls", attempts=2, remedies=("drop temperature",))
    provider = _Scripted([first, ProviderError(ErrorKind.RATE_LIMITED, "429 slow down"), ChatResponse("done")])
    agent = Agent(provider, "m-1", {"temperature": 0, "tool_choice": "required"}, trial_seed=7)
    system, user = Message("system", "You are careful."), Message("user", "Weather in Lisbon?")
    asyncio.run(agent.chat((system, user), (TIME, WEATHER), seed=7))
    turn2 = (system, user, Message("assistant", "", (call,)),
             Message("tool", '{"temp": 21}', tool_call_id="c0", name="get_weather"))
    with pytest.raises(ProviderError):
        asyncio.run(agent.chat(turn2, (WEATHER, TIME, WEATHER), seed=8))  # offered twice: kept as offered
    asyncio.run(agent.chat(turn2, (), seed=9))

    calls, blobs = _row_values(agent)
    assert [c["request"]["prefix"] for c in calls] == [0, 2, 4]  # later turns store only the new messages
    assert {b["kind"] for b in blobs} == {"system", "tools", "params"} and len(blobs) == 4
    decoded = decode_calls(calls, Blobs.gather([blobs]), "m-1", 7)
    assert [d.request for d in decoded] == provider.sent  # messages, tools in the order offered, params, seed
    assert decoded[0].request.tool_choice == "required"
    assert decoded[0].response == first and decoded[2].response == ChatResponse("done")
    assert decoded[1].response is None and (decoded[1].error_kind, decoded[1].error) == ("rate_limited", "429 slow down")


def test_each_blob_is_kept_on_the_first_row_of_a_batch_that_names_it() -> None:
    a, b = {"id": "a", "kind": "system", "content": "x"}, {"id": "b", "kind": "tools", "content": "[]"}
    assert first_in_batch([[a, b], None, [b], [a, b]]) == [[a, b], None, None, None]
    assert first_in_batch([[b], [a, b]]) == [[b], [a]]


def _sweep_on(tmp_path: Path, name: str, runs: int, **model: Any) -> Path:
    return _copy_sweep(tmp_path, name, runs, **model)


@pytest.mark.parametrize("name", ["quickstart", "propagation"])
def test_the_recorded_request_is_the_body_serve_received(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         name: str) -> None:
    received: list[Any] = []
    decode = OpenAICodec.decode

    def logged(body: Any, headers: Mapping[str, str]) -> ChatRequest:
        received.append(body)  # the server's own view: the JSON body it parsed
        return decode(body, headers)

    monkeypatch.setattr(OpenAICodec, "decode", staticmethod(logged))
    with ServerThread(ServeOptions(host="127.0.0.1", port=0)) as server:
        sweep = _sweep_on(tmp_path, name, 1, provider="openai", base_url=server.base_url, api_key_env=None)
        runner.run(load_sweep(sweep), tmp_path / "out", quiet=True)
    frame = pl.scan_ipc(str(tmp_path / "out" / "trials" / "*.arrow")).collect()
    blobs = Output.open(tmp_path / "out").blobs()
    recorded = [orjson.dumps(encode_request(c.request), option=orjson.OPT_SORT_KEYS)
                for row in frame.iter_rows(named=True) for c in row_calls(row, blobs) or ()]
    sent = [orjson.dumps(b, option=orjson.OPT_SORT_KEYS) for b in received]
    assert len(sent) == frame["attempts"].sum() >= frame.height
    if name == "propagation":
        assert len(sent) > frame.height  # several turns per trial: each one's full history is rebuilt
    assert sorted(recorded) == sorted(sent)


def test_report_examples_come_from_the_output_with_the_case_files_deleted(tmp_path: Path) -> None:
    sweep = _sweep_on(tmp_path, "quickstart", 2)
    triples = yaml.safe_load((tmp_path / "triples.yaml").read_text())
    asked = {v for t in (triples["triples"] if isinstance(triples, dict) else triples) for v in t.values()
             if isinstance(v, str)}
    runner.run(load_sweep(sweep), tmp_path / "out", quiet=True)
    for name in ("triples.yaml", "tools.json", "quickstart.yaml"):
        (tmp_path / name).unlink()
    html = tmp_path / "r.html"
    done = CliRunner().invoke(app, ["report", str(tmp_path / "out"), "--html", str(html)])
    assert done.exit_code == 0, done.output
    section = html.read_text().split('id="examples-misselection"', 1)[1].split("</section>", 1)[0]
    shown = [unescape(m) for m in re.findall(r"<b>request</b><pre>(.*?)</pre>", section, re.S)]
    assert shown and set(shown) <= asked  # the texts the model was asked, though no case file is left
    frame = pl.scan_ipc(str(tmp_path / "out" / "trials" / "*.arrow")).collect()
    blobs = Output.open(tmp_path / "out").blobs()
    firsts = {}
    for row in frame.iter_rows(named=True):
        (call,) = row_calls(row, blobs) or ()
        firsts[(row["case_id"], row["condition"], row["model"], row["run"])] = call.request
    for case, condition, model, run in re.findall(
            r"<summary><b>([^<]*)</b> · ([^ ]*) · ([^ ]*) · run (\d+)", section):
        request = firsts[(unescape(case), condition, model, int(run))]
        example = section.split(f"<summary><b>{case}</b> · {condition} · {model} · run {run}", 1)[1]
        example = unescape(example.split("</details></details>", 1)[0])
        assert f"<pre>{request.messages[-1].content}</pre>" in example  # the request as recorded
        assert f"system: {DEFAULT_SYSTEM}" in example  # every call, its system prompt from the stored blob
        assert ", ".join(t.name for t in request.tools) in example  # the tools in the order offered


def test_a_repeated_system_prompt_and_catalogue_are_stored_once_per_batch(tmp_path: Path) -> None:
    sizes: dict[int, tuple[int, set[int]]] = {}
    for runs in (2, 8):
        out = tmp_path / f"out{runs}"
        runner.run(load_sweep(_sweep_on(tmp_path, "quickstart", runs)), out, quiet=True)
        (part,) = (out / "trials").glob("*.arrow")
        with pa.memory_map(str(part)) as source:
            reader = ipc.open_file(source)
            batches = [b for i in range(reader.num_record_batches) if (b := reader.get_batch(i)).num_rows]  # not the seal
        rows = sum(b.num_rows for b in batches)
        for batch in batches:  # each blob once per batch, and every id a row names is in its batch
            carried = [b["id"] for v in batch.column("call_blobs").to_pylist() for b in v or ()]
            named = {i for v in batch.column("calls").to_pylist() for i in referenced_blobs(v)}
            assert sorted(carried) == sorted(set(carried)) and set(carried) == named
        # the system prompt's bytes are in the file once per batch, not once per trial
        assert part.read_bytes().count(DEFAULT_SYSTEM.encode()) == len(batches) < rows
        columns = [b.column("call_blobs") for b in batches]
        content = [c.flatten().nbytes for c in columns]  # the blobs themselves, once per batch
        per_row = sum(c.nbytes - f for c, f in zip(columns, content, strict=True)) / rows
        assert per_row <= 5  # what each row adds to the column: a list offset and a validity bit
        sizes[runs] = (rows, set(content))
    (small, small_content), (large, large_content) = sizes[2], sizes[8]
    assert large == 4 * small and small_content == large_content  # 4x the trials, the same stored content


def test_trials_imported_without_their_calls_still_report(tmp_path: Path) -> None:
    runner.run(load_sweep(_sweep_on(tmp_path, "quickstart", 2)), tmp_path / "out", quiet=True)
    old = without_calls(tmp_path / "out", tmp_path / "old")
    done = CliRunner().invoke(app, ["report", str(old), "--html", str(tmp_path / "r.html"),
                                    "--json", str(tmp_path / "s.json")])
    assert done.exit_code == 0, done.output
    html = (tmp_path / "r.html").read_text()
    assert "(not recorded: these trials were imported without their calls)" in html
    assert json.loads((tmp_path / "s.json").read_text())["runs"]
    assert not list((CONFIGS / "misselection").glob("*.tmp"))


def test_a_batch_run_records_the_request_it_submitted_and_the_batch_answer(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import runner
    from tests.providers.conftest import trials, write
    from tests.providers.test_batch import batch_sweep

    received: list[Any] = []
    decode = OpenAICodec.decode

    def logged(body: Any, headers: Mapping[str, str]) -> ChatRequest:
        received.append(body)  # each request of the batch file, as the server parsed it
        return decode(body, headers)

    monkeypatch.setattr(OpenAICodec, "decode", staticmethod(logged))
    with ServerThread(ServeOptions(host="127.0.0.1", port=0)) as server:
        path = write(tmp_path, batch_sweep(server.base_url, "openai"))
        runner.run(path, tmp_path / "batch", mode="batch", quiet=True)
        assert server.stats()["requests"] == 0  # every call went through the batch API
    frame = trials(tmp_path / "batch")
    blobs = Output.open(tmp_path / "batch").blobs()
    recorded = [(row["trial_id"], row_calls(row, blobs) or []) for row in frame.iter_rows(named=True)]
    assert all(len(calls) == 1 and calls[0].response is not None for _, calls in recorded)
    bodies = sorted(orjson.dumps(encode_request(calls[0].request), option=orjson.OPT_SORT_KEYS) for _, calls in recorded)
    assert bodies == sorted(orjson.dumps(b, option=orjson.OPT_SORT_KEYS) for b in received)
    # the answer recorded is the one the row was scored on
    for row, (_, calls) in zip(frame.iter_rows(named=True), recorded, strict=True):
        response = calls[0].response
        assert response is not None and response.text == (row["response_text"] or "")
        assert [c.raw_arguments for c in response.tool_calls] == [c["arguments"] for c in row["tool_calls"] or ()]
