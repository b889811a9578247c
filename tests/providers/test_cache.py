"""The response cache: a cached rerun asks the server nothing, and errors are never stored.

The server is a real ``trialgrid serve`` app on 127.0.0.1 (port 0, in a thread,
stopped by the test); its ``/stats`` request count is the proof.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import runner
from runner.config.sweep import load_sweep
from runner.core.types import ChatRequest, ChatResponse, Message, ToolCall, ToolSpec, Usage
from runner.providers.cache import CachedProvider, ResponseCache, request_key
from runner.providers.errors import ErrorKind, ProviderError
from runner.sim.serve import ServerThread
from tests.helpers import quickstart_dict, serving, write_yaml, written_rows

CELL = ["model", "case_id", "condition", "run"]
LIVE_ONLY = {"trial_id", "attempts", "cache_hits", "latency_ms", "finished_at", "calls"}


@pytest.fixture
def server() -> Iterator[ServerThread]:
    with serving() as thread:
        yield thread


TRIALS = 3 * 13 * 3  # models x cases x conditions of the quickstart, one run each


def _sweep(tmp_path: Path, base_url: str, name: str = "sweep.yaml", **top: Any) -> Path:
    data = quickstart_dict()
    data["probes"][0]["runs"] = 1  # one run per cell: every cache property below is per trial
    for m in data["models"]:
        m.update(provider="openai", base_url=base_url, api_key_env=None, retry={"max_attempts": 1})
    data.update(top)
    return write_yaml(tmp_path / name, data)


def _rows(out: Path) -> pl.DataFrame:
    return written_rows(out).sort(CELL)


def test_cached_rerun_sends_no_request_and_gives_identical_outcomes(tmp_path: Path, server: ServerThread) -> None:
    cache = tmp_path / "cache"
    loaded = load_sweep(_sweep(tmp_path, server.base_url, cache=str(cache)))
    first = runner.run(loaded, tmp_path / "live", quiet=True)
    sent = server.stats()["requests"]
    assert sent == first.total == TRIALS

    again = runner.run(loaded, tmp_path / "cached", quiet=True)
    assert server.stats()["requests"] == sent  # not one request reached the server
    live, cached = _rows(tmp_path / "live"), _rows(tmp_path / "cached")
    same = [c for c in live.columns if c not in LIVE_ONLY]
    assert live.select(same).equals(cached.select(same))
    # the recorded calls: the same requests and answers, each cached answer marked so, none of them sent
    def exchange(frame: pl.DataFrame) -> pl.DataFrame:
        calls = frame.select("trial_id", pl.col("calls").explode()).unnest("calls")
        return calls.select("trial_id", "request", pl.col("response").struct.field("text", "tool_calls"),
                            pl.col("response").struct.field("cached"), "attempts")
    recorded, replayed = exchange(live), exchange(cached)
    assert recorded.select("request", "text", "tool_calls").equals(replayed.select("request", "text", "tool_calls"))
    assert not recorded["cached"].any() and replayed["cached"].all() and replayed["attempts"].sum() == 0
    assert live["cache_hits"].to_list() == [0] * TRIALS and cached["cache_hits"].to_list() == [1] * TRIALS
    assert cached["attempts"].sum() == 0  # no request was sent for any cached trial
    manifest = json.loads((tmp_path / "cached" / "manifest.json").read_text())
    assert manifest["cache_hits"] == TRIALS
    assert manifest["sessions"][-1]["cache"] == {"dir": str(cache), "hits": TRIALS, "misses": 0, "stored": 0}
    assert again.counts == {"ok": TRIALS}


def test_errors_are_never_cached_so_a_rerun_asks_again_for_exactly_those(tmp_path: Path) -> None:
    with serving(faults={"500": 0.25}, fault_seed=7) as thread:
        loaded = load_sweep(_sweep(tmp_path, thread.base_url))
        cache_dir = tmp_path / "cache"
        runner.run(loaded, tmp_path / "one", quiet=True, cache=cache_dir)
        failed = _rows(tmp_path / "one").filter(pl.col("status") == "error")
        assert 0 < len(failed) < TRIALS
        sent = thread.stats()["requests"]
        runner.run(loaded, tmp_path / "two", quiet=True, cache=cache_dir)
        # one attempt each (max_attempts: 1) for the trials that failed, and nothing for the rest
        assert thread.stats()["requests"] - sent == len(failed)
        two = _rows(tmp_path / "two")
        asked_again = two.join(failed.select(CELL), on=CELL)
        assert asked_again["cache_hits"].to_list() == [0] * len(failed)
        assert two.filter(pl.col("cache_hits") == 1).height == TRIALS - len(failed)


def test_the_key_separates_trials_endpoints_and_catalogue_order() -> None:
    tools = (ToolSpec("a"), ToolSpec("b"))
    base = ChatRequest("m", (Message("user", "hi"),), tools, {"temperature": 0}, 5, None, 11)
    key = request_key("openai", "http://x/v1", base)
    assert key == request_key("openai", "http://x/v1", ChatRequest("m", (Message("user", "hi"),), tools,
                                                                   {"temperature": 0}, 5, None, 11))
    variants = [
        request_key("openai", "http://y/v1", base),
        request_key("anthropic", "http://x/v1", base),
        request_key("openai", "http://x/v1", ChatRequest("m", base.messages, tools[::-1], base.params, 5, None, 11)),
        request_key("openai", "http://x/v1", ChatRequest("m", base.messages, tools, base.params, 5, None, 12)),
        request_key("openai", "http://x/v1", ChatRequest("m", base.messages, tools, base.params, 6, None, 11)),
        request_key("openai", "http://x/v1", ChatRequest("n", base.messages, tools, base.params, 5, None, 11)),
    ]
    assert len({key, *variants}) == 1 + len(variants)


class _Flaky:
    name = "flaky"

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, request: ChatRequest) -> ChatResponse:
        self.calls += 1
        if self.calls == 1:
            raise ProviderError(ErrorKind.TRANSIENT, "boom")
        broken = ToolCall("lookup", '{"id": 3', None, "c1", "Expecting ',' delimiter at column 9")
        good = ToolCall("lookup", '{"id": 3}', {"id": 3}, "c2")
        return ChatResponse("text", (broken, good), Usage(7, 3), 0.25, "tool_calls", 1, ("drop temperature",))

    async def aclose(self) -> None:
        return None


def test_a_failed_call_is_not_stored_and_a_hit_round_trips(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c")
    inner = _Flaky()
    provider = CachedProvider(inner, cache, endpoint="flaky")
    request = ChatRequest("m", (Message("user", "q"),), seed=1, trial_seed=1)

    with pytest.raises(ProviderError):
        asyncio.run(provider.complete(request))
    assert len(cache) == 0
    live = asyncio.run(provider.complete(request))
    hit = asyncio.run(provider.complete(request))
    assert inner.calls == 2 and (cache.hits, cache.misses, cache.stored) == (1, 2, 1)
    assert hit.cached and hit.attempts == 0 and not live.cached
    assert (hit.text, hit.tool_calls, hit.usage, hit.latency_s, hit.finish_reason, hit.remedies) == \
        (live.text, live.tool_calls, live.usage, live.latency_s, live.finish_reason, live.remedies)
    # --strict-params never takes an answer a remedy shaped
    strict = CachedProvider(inner, cache, endpoint="flaky", strict_params=True)
    asyncio.run(strict.complete(request))
    assert inner.calls == 3
    cache.close()
