"""A Retry-After no server should send cannot stall a run: every trial ends as a row within the run's bounds."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.providers.classify import retry_after_s
from tests.helpers.cli import trialgrid
from tests.helpers.hostile import HostileServer, chat_answer
from tests.helpers.rows import written_rows
from tests.providers.conftest import http_sweep, write

HOSTILE = ["999999999", "-30", "NaN", "1e400", "Thu, 01 Jan 1970 00:00:00 GMT", "Fri, 01 Jan 2100 00:00:00 GMT"]


@pytest.mark.parametrize("value, seconds", [("999999999", 999999999.0), ("-30", 0.0), ("NaN", None),
                                            ("1e400", float("inf")), ("Thu, 01 Jan 1970 00:00:00 GMT", 0.0),
                                            ("soon", None)])
def test_a_retry_after_is_never_negative_nor_nan(value: str, seconds: float | None) -> None:
    assert retry_after_s({"retry-after": value}, now=1.8e9) == seconds
    assert retry_after_s({"retry-after-ms": "nan"}) is None


@pytest.mark.slow
@pytest.mark.parametrize("value", HOSTILE)
def test_a_hostile_retry_after_ends_as_rows_not_a_hang(tmp_path: Path, value: str) -> None:
    def answer(n: int, body: object) -> tuple[int, dict[str, str], object]:
        if n < 3:  # the first answers are 429s asking for that wait, the rest answer
            return 429, {"Retry-After": value}, {"error": {"type": "rate_limit_error", "message": "slow down"}}
        return 200, {}, chat_answer(usage={"prompt_tokens": 10, "completion_tokens": 3})

    with HostileServer(answer) as server:
        data = http_sweep(server.base_url, "openai", runs=1, timeout_s=5, retry={"max_wait_s": 2})
        data["models"] = data["models"][:1]
        data["engine"] = {"timeout_s": 10}
        done = trialgrid("run", str(write(tmp_path, data)), "--out", str(tmp_path / "out"), "-q", "--strict-params",
                         timeout=120)  # a hang fails here
    assert done.returncode in (0, 3), done.stderr
    assert "Traceback" not in done.stderr
    rows = written_rows(tmp_path / "out")
    assert rows.height == 39 and rows["trial_id"].n_unique() == 39
    assert set(rows.filter(rows["status"] == "error")["error_kind"].to_list()) <= {"rate_limited"}
    assert (rows["status"] == "ok").sum() >= 36
