"""``trialgrid serve`` itself: the command, /stats, its own rate limit, options."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx
import pytest

from runner.sim.serve import ServeOptions, parse_fault, parse_rule
from tests.conftest import ROOT
from tests.helpers import error_line, invoke

BODY = {"model": "typical", "messages": [{"role": "user", "content": "Pull last month's invoices from Stripe."}], "seed": 3}


def test_serve_command_prints_its_address_and_answers() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "runner.cli.app", "serve", "--port", "0", "--latency-ms", "1",
                             "--reject", "drop:temperature@reckless*"], cwd=ROOT, env=os.environ.copy(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        base = line.split("serving the simulated agent on ", 1)[1].split()[0]
        assert base.startswith("http://127.0.0.1:")
        with httpx.Client(base_url=base, trust_env=False, timeout=10) as client:
            ok = client.post("/v1/chat/completions", json=BODY)
            assert ok.status_code == 200 and ok.json()["choices"][0]["message"]["role"] == "assistant"
            rejected = client.post("/v1/chat/completions", json={**BODY, "model": "reckless-x", "temperature": 1})
            assert rejected.status_code == 400 and rejected.json()["error"]["param"] == "temperature"
            assert client.post("/v1/chat/completions", json={**BODY, "temperature": 1}).status_code == 200
            stats = client.get("/stats").json()
        assert stats["requests"] == 3 and stats["by_status"] == {"200": 2, "400": 1}
        assert stats["rejections"] == {"drop:temperature@reckless*": {"reckless-x": {"temperature": 1}}}
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.parametrize("argv, words", [
    (["--host", "0.0.0.0"], "not a loopback address"),
    (["--reject", "nonsense"], "cannot read rule"),
    (["--fault", "teapot=0.1"], "unknown fault"),
    (["--key-env", "TG_SERVE_UNSET"], "is not set"),
])
def test_serve_refuses_bad_options(argv: list[str], words: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import runner.sim.serve

    monkeypatch.delenv("TG_SERVE_UNSET", raising=False)
    listened: list[ServeOptions] = []  # in-process, so options that were wrongly accepted must not start serving
    monkeypatch.setattr(runner.sim.serve, "serve_forever", lambda options, _say: listened.append(options))
    done = invoke("serve", "--port", "0", *argv)
    assert not listened, f"serve accepted {argv} and would have listened"
    assert done.exit_code == 2 and words in error_line(done.stderr)


def test_own_rate_limit_gives_real_429s_and_never_admits_more(serve) -> None:  # type: ignore[no-untyped-def]
    server = serve(rpm=5, rpm_window_s=1.0)
    with httpx.Client(base_url=server.url, trust_env=False, timeout=10, headers={"authorization": "Bearer k1"}) as c:
        codes = [c.post("/v1/chat/completions", json=BODY).status_code for _ in range(12)]
        limited = c.post("/v1/chat/completions", json=BODY)
    assert codes[:5] == [200] * 5 and set(codes[5:]) == {429}
    assert limited.headers["x-ratelimit-remaining-requests"] == "0" and int(limited.headers["retry-after"]) >= 1
    stats = server.stats(with_log=True)
    (key,) = stats["keys"]
    assert key.startswith("key-") and "k1" not in key  # keys are logged as a hash
    admitted = [t for t, s in zip(stats["log"]["t"], stats["log"]["status"], strict=True) if s == 200]
    assert all(sum(1 for u in admitted if t <= u < t + 1.0) <= 5 for t in admitted)


def test_options_parsing() -> None:
    assert parse_rule("rename:max_tokens:max_completion_tokens@gpt-5*").new_name == "max_completion_tokens"
    rule = parse_rule("require:reasoning_effort=none:tools")
    assert (rule.value, rule.when_tools, rule.model_glob) == ("none", True, "*")
    assert parse_rule("require:temperature=1").value == 1
    assert parse_fault("slow=0.05") == ("slow", 0.05)
    assert sum(ServeOptions.mixed_faults(0.2).values()) == pytest.approx(0.2)
    with pytest.raises(ValueError):
        ServeOptions(faults={"500": 0.7, "503": 0.5})
    sampler = ServeOptions(latency_ms=50, latency_dist="lognormal", latency_spread_ms=20).latency_sampler()
    draws = [sampler() for _ in range(4000)]
    assert 0.045 < sum(draws) / len(draws) < 0.055 and min(draws) > 0


@pytest.mark.parametrize("api, path", [("openai", "/v1/chat/completions"), ("anthropic", "/v1/messages")])
def test_bucket_mode_short_retry_after_and_headers_on_every_answer(serve, api: str, path: str) -> None:  # type: ignore[no-untyped-def]
    # 60 per minute: a bucket of one request, refilled every second
    server = serve(rpm=60, rpm_mode="bucket")
    body = {"model": BODY["model"], "messages": BODY["messages"], "max_tokens": 50} if api == "anthropic" else BODY
    headers = {"anthropic-version": "2023-06-01"} if api == "anthropic" else {}
    with httpx.Client(base_url=server.url, trust_env=False, timeout=10, headers=headers) as c:
        answers = [c.post(path, json=body) for _ in range(3)]
    codes = [a.status_code for a in answers]
    assert codes[0] == 200 and 429 in codes
    limit = "anthropic-ratelimit-requests-limit" if api == "anthropic" else "x-ratelimit-limit-requests"
    assert all(a.headers[limit] == "60" for a in answers)
    for a in answers:
        if a.status_code == 429:  # the wait for the next token: whole seconds, and the exact milliseconds
            assert a.headers["retry-after"] == "1" and 0 < int(a.headers["retry-after-ms"]) <= 1000


def test_bucket_mode_without_headers_admits_at_the_refill_rate(serve) -> None:  # type: ignore[no-untyped-def]
    server = serve(rpm=20, rpm_window_s=1.0, rpm_mode="bucket", rpm_burst=2, rate_headers=False)
    with httpx.Client(base_url=server.url, trust_env=False, timeout=10) as c:
        answers = [c.post("/v1/chat/completions", json=BODY) for _ in range(60)]
    assert not any(k.startswith("x-ratelimit") for a in answers for k in a.headers)
    assert {a.status_code for a in answers} == {200, 429}
    log = server.stats(with_log=True)["log"]
    admitted = [t for t, s in zip(log["t"], log["status"], strict=True) if s == 200]
    # a bucket of 2 refilled at 20/s: never more than 2 + 20·span admitted in any span
    assert all(sum(1 for u in admitted if t <= u <= t + 0.25) <= 2 + 20 * 0.25 for t in admitted)
    with pytest.raises(ValueError, match="rpm mode"):
        ServeOptions(rpm=5, rpm_mode="leaky")


def test_faults_are_lifted_and_set_again_through_the_public_admin_route(serve) -> None:  # type: ignore[no-untyped-def]
    server = serve(faults={"429": 1.0}, fault_seed=1)
    with httpx.Client(base_url=server.url, trust_env=False, timeout=10) as client:
        assert client.post("/v1/chat/completions", json=BODY).status_code == 429
        assert client.get("/admin/faults").json() == {"faults": {"429": 1.0}}
        assert client.put("/admin/faults", json={}).json() == {"faults": {}}  # the incident is over
        assert client.post("/v1/chat/completions", json=BODY).status_code == 200
        assert client.put("/admin/faults", json={"500": 1.0}).json() == {"faults": {"500": 1.0}}
        assert client.post("/v1/chat/completions", json=BODY).status_code == 500
        for bad, says in (({"bogus": 0.1}, "unknown fault 'bogus'"), ({"500": 2}, "must be a number in [0, 1]"),
                          ({"500": 0.6, "503": 0.6}, "add up to 1.2"), ([0.1], "must be a JSON object")):
            answer = client.put("/admin/faults", json=bad)
            assert answer.status_code == 400 and says in answer.json()["error"], answer.text
        assert client.get("/admin/faults").json() == {"faults": {"500": 1.0}}  # a refused change changes nothing
    # the same from the test's own thread, without HTTP
    assert server.set_faults({}) == {} and server.state.faults == {}
    with pytest.raises(ValueError, match="unknown fault 'bogus'"):
        server.set_faults({"bogus": 0.1})


def test_the_log_names_each_request_and_when_its_answer_went_out_whole(serve) -> None:  # type: ignore[no-untyped-def]
    """What benchmarks/kill_resend.py counts: one digest per request asked (a re-send repeats it, another seed
    does not), and a ``sent`` stamp only on an answer handed whole to the connection."""
    server = serve(faults={"500": 1.0})
    with httpx.Client(base_url=server.url, trust_env=False, timeout=10) as client:
        assert client.post("/v1/chat/completions", json=BODY).status_code == 500
        server.set_faults({})
        for body in (BODY, BODY, {**BODY, "seed": 4}):
            assert client.post("/v1/chat/completions", json=body).status_code == 200
    log = server.stats(with_log=True)["log"]
    assert log["status"] == [500, 200, 200, 200]
    first, again, other = log["digest"][1:]
    assert first == again == log["digest"][0] and other != first and len(first) == 16
    assert log["sent"][0] is None  # an error is no answer
    assert all(sent is not None and t <= sent for t, sent in zip(log["t"][1:], log["sent"][1:], strict=True))
