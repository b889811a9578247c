"""A key a server echoes in another form (upper case, lower case, base64, percent-encoded) is scrubbed like the
key itself; a key with a control character is refused at load in one line."""

from __future__ import annotations

import base64
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.helpers.cli import invoke
from tests.helpers.hostile import HostileServer, chat_answer
from tests.providers.conftest import http_sweep, write

KEY = "sk-proj-Q7w8E9r0T1y2U3i4O5p6A7s8"


def _echoes(key: str) -> list[str]:
    return [key.upper(), key.lower(), base64.b64encode(key.encode()).decode(),
            base64.b64encode(f"user:{key}".encode()).decode(), base64.urlsafe_b64encode(f"ab{key}".encode()).decode(),
            quote(key, safe="")]


def test_an_echoed_key_in_any_form_reaches_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TG_ECHO_KEY", KEY)
    text = "Your credentials: " + " | ".join(_echoes(KEY))
    with HostileServer(lambda n, body: (200, {}, chat_answer(text, {"prompt_tokens": 1, "completion_tokens": 1}))) \
            as server:
        data = http_sweep(server.base_url, "openai", runs=1, api_key_env="TG_ECHO_KEY")
        data["models"] = data["models"][:1]
        result = invoke("run", str(write(tmp_path, data)), "--out", str(tmp_path / "out"), "-q", "--strict-params")
    assert result.exit_code == 0, result.output
    written = b"".join(p.read_bytes() for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert b"[redacted]" in written
    for form in [KEY, *_echoes(KEY)]:
        for i in range(0, len(form) - 12):  # no 12-character piece of any form
            assert form[i:i + 12].encode() not in written, (form, i)


@pytest.mark.parametrize("key", ["sk-proj-abc\r\ndef12345", "sk-proj-abc\tdef12345"])
def test_a_key_with_a_control_character_is_refused_at_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            key: str) -> None:
    monkeypatch.setenv("TG_BAD_KEY", key)
    data = http_sweep("http://127.0.0.1:9/v1", "openai", runs=1, api_key_env="TG_BAD_KEY")
    result = invoke("validate", str(write(tmp_path, data)))
    assert result.exit_code == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors and "TG_BAD_KEY holds a control character" in errors[0]
    assert "def12345" not in result.stderr
