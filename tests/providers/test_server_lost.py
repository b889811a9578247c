"""A server that is gone is not retried by every trial of the grid: once every attempt on its endpoint has failed
to connect for ``DOWN_AFTER_S``, its calls end at once as transient rows, one probe at a time finding it back."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

import runner
import runner.providers.managed as managed
from runner.core.errors import CONNECTION_FAILED
from tests.helpers.rows import written_rows
from tests.providers.conftest import http_sweep, write


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_calls_to_a_dead_endpoint_end_at_once_after_it_has_been_down_a_while(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(managed, "DOWN_AFTER_S", 0.3)
    monkeypatch.setattr(managed, "PROBE_EVERY_S", 60.0)
    data = http_sweep(f"http://127.0.0.1:{_closed_port()}/v1", "openai", runs=2, concurrency=2,
                      retry={"max_attempts": 4, "backoff_base_s": 0.2, "backoff_max_s": 0.2})
    data["models"] = data["models"][:1]
    result = runner.run(write(tmp_path, data), tmp_path / "out", quiet=True, preflight=False)
    assert result.exit_code == 3 and result.counts == {"error": 78}
    rows = written_rows(tmp_path / "out")
    assert rows["error"].str.starts_with(CONNECTION_FAILED).all()  # the report's "server lost" reads them so
    refused = rows.filter(rows["error"].str.contains("so not sent"))
    assert refused.height >= 70  # all but the first few, which met the outage before it was one
    assert (refused["error_kind"] == "transient").all()


def test_an_endpoint_that_answers_again_is_used_again() -> None:
    from runner.core.errors import ErrorKind, ProviderError

    clock = [0.0]
    provider = managed.ManagedProvider.__new__(managed.ManagedProvider)
    provider.endpoint, provider._clock = "http://127.0.0.1:1/v1", lambda: clock[0]
    provider._failing_since, provider._last_probe = None, 0.0
    lost = ProviderError(ErrorKind.TRANSIENT, f"{CONNECTION_FAILED} from x: refused")
    provider._note_connection(lost)
    clock[0] = managed.DOWN_AFTER_S + 1
    provider._refuse_if_down(0)  # the probe goes out
    with pytest.raises(ProviderError, match="so not sent"):
        provider._refuse_if_down(0)
    provider._note_connection(None)  # the probe was answered
    provider._refuse_if_down(0)
    assert provider._failing_since is None
