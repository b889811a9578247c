"""A usage field no vendor sends costs no answer: every trial written, the count null where it is no count."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from runner.core.types import MAX_TOKENS, Usage, token_count
from tests.helpers.cli import invoke
from tests.helpers.hostile import HostileServer, chat_answer
from tests.helpers.rows import written_rows
from tests.providers.conftest import http_sweep, write


@pytest.mark.parametrize("value, count", [
    (None, 0), (0, 0), (5, 5), (5.0, 5), (MAX_TOKENS, MAX_TOKENS),
    (2**64, None), (MAX_TOKENS + 1, None), (1e300, None), (-5, None), (5.5, None), ("5", None),
    (math.nan, None), (math.inf, None), ([5], None), ({"n": 5}, None), (True, None),
])
def test_a_token_count_is_a_non_negative_int64_or_none(value: Any, count: int | None) -> None:
    assert token_count(value) == count


def test_a_usage_that_is_no_object_counts_nothing() -> None:
    assert Usage.from_wire([1, 2], "prompt_tokens", "completion_tokens") == Usage(0, 0)
    assert Usage.from_wire(None, "prompt_tokens", "completion_tokens") == Usage(0, 0)


@pytest.mark.parametrize("completion", [2**64, 1e300, -5, 5.5, "5", None, [1, 2]])
def test_every_trial_is_written_whatever_the_usage_says(tmp_path: Path, completion: Any) -> None:
    usage = {"prompt_tokens": 12, "completion_tokens": completion}
    with HostileServer(lambda n, body: (200, {}, chat_answer(usage=usage))) as server:
        data = http_sweep(server.base_url, "openai", runs=1, retry={"max_attempts": 1})
        data["models"] = data["models"][:1]
        result = invoke("run", str(write(tmp_path, data)), "--out", str(tmp_path / "out"), "-q", "--strict-params")
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    rows = written_rows(tmp_path / "out")
    assert rows.height == 39 and (rows["status"] == "ok").all()
    assert rows["response_text"].str.contains("Which account").all()  # every answer kept
    expected = token_count(completion)
    assert rows["output_tokens"].to_list() == [expected] * 39
    assert (rows["input_tokens"] == 12).all()
    if expected is None:
        assert result.stderr.count("is not a token count") == 1  # once, not once per trial
