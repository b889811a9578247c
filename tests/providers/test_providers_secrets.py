"""The API key comes only from the environment and never lands in output, manifest or terminal."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from runner.config.sweep import load_sweep
from runner.core.errors import UserError
from runner.providers.secrets import Secret, secret_from_env
from tests.helpers import invoke
from tests.providers.conftest import http_sweep, trials, write

KEY = "sk-tg-7c1f9a0b4e2d83f6a5b9c0d1e2f3a4b5"


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_failing_run_never_writes_or_prints_the_key(serve, tmp_path: Path, api: str, monkeypatch,  # type: ignore[no-untyped-def]
                                                     capfd: pytest.CaptureFixture[str]) -> None:
    # the server rejects the key and echoes it back in full in its 401 body
    server = serve(keys=("some-other-key",))
    data = http_sweep(server.base_url, api, runs=1, api_key_env="TG_SECRET_TEST_KEY",
                      retry={"max_attempts": 2, "backoff_base_s": 0.001, "backoff_max_s": 0.002})
    path = write(tmp_path, data)
    out = tmp_path / "out"
    monkeypatch.setenv("TG_SECRET_TEST_KEY", KEY)
    # in-process: the CLI's own streams, and (capfd) anything written to file descriptors 1 and 2 around them,
    # such as a logging handler or a warning that holds the real stderr
    done = invoke("run", str(path), "--out", str(out), "--no-preflight")  # the run's own failures, not the check's
    leaked = capfd.readouterr()
    assert done.exit_code == 3, done.stderr  # finished, every row an error: exit 3, with the first error printed
    assert "all 39 trials failed fatally" in done.stderr
    df = trials(out)
    assert (df["status"] == "error").all() and (df["error_kind"] == "fatal").all()
    assert df["error"].str.contains("[redacted]", literal=True).all()
    fragments = {KEY, KEY[:12], KEY[-12:]}
    for text in (done.stdout, done.stderr, leaked.out, leaked.err):
        assert not any(f in text for f in fragments)
    for file in out.rglob("*"):
        if file.is_file():
            blob = file.read_bytes()
            assert not any(f.encode() in blob for f in fragments), file


def test_key_variable_must_be_set_and_is_located(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("TG_UNSET_KEY", raising=False)
    data = http_sweep("http://127.0.0.1:9/v1", "openai", api_key_env="TG_UNSET_KEY")
    path = write(tmp_path, data)
    with pytest.raises(UserError) as info:
        load_sweep(path)
    text = str(info.value)
    assert "models[0].api_key_env" in text and "TG_UNSET_KEY is not set" in text and str(path) in text


def test_default_key_variable_is_the_vendors(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    data = http_sweep("http://127.0.0.1:9/v1", "anthropic")
    for m in data["models"]:
        del m["api_key_env"]
    loaded = load_sweep(write(tmp_path, data))
    assert {m.api_key_env for m in loaded.sweep.models} == {"ANTHROPIC_API_KEY"}
    assert KEY not in loaded.sweep.model_dump_json()


@pytest.mark.parametrize("bad, words", [
    ({"headers": {"Authorization": "Bearer x"}}, "looks like a credential"),
    ({"headers": {"x-api-key": "x"}}, "looks like a credential"),
    ({"api_key_env": "sk-abc-123"}, "never the key itself"),
    ({"base_url": "127.0.0.1:8000"}, "must start with http"),
    ({"limits": {"rpm": 0}}, "limits.rpm"),
])
def test_provider_fields_are_validated_with_their_location(tmp_path: Path, bad: dict, words: str) -> None:
    data = http_sweep("http://127.0.0.1:9/v1", "openai")
    data["models"][1].update(bad)
    with pytest.raises(UserError) as info:
        load_sweep(write(tmp_path, data))
    assert words in str(info.value) and "models[1]" in str(info.value)


def test_models_on_one_key_must_agree_on_limits(tmp_path: Path) -> None:
    data = http_sweep("http://127.0.0.1:9/v1", "openai")
    data["models"][0]["limits"] = data["models"][1]["limits"] = {"rpm": 100}
    data["models"][2]["limits"] = {"rpm": 200}
    with pytest.raises(UserError) as info:
        load_sweep(write(tmp_path, data))
    assert "models[2].limits" in str(info.value) and "limits are per key" in str(info.value)


def test_secret_never_prints_or_pickles_its_value(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("TG_PICKLE_KEY", KEY)
    secret = secret_from_env("TG_PICKLE_KEY")
    assert KEY not in repr(secret) and KEY not in str(secret) and KEY not in f"{secret!r} {[secret]}"
    assert KEY.encode() not in pickle.dumps(secret)
    assert pickle.loads(pickle.dumps(secret)).reveal() == KEY  # re-read from the receiving side's environment
    scrubbed = Secret(KEY, "$X").scrub(f"bad key {KEY} (masked: sk-tg-7c1f9a***f3a4b5)")
    assert scrubbed.startswith("bad key [redacted] (masked: [redacted]") and scrubbed.endswith("***[redacted])")
