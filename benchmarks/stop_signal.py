"""A stop that stops: SIGTERM into a run throttled by the server, N tries.

Usage: python benchmarks/stop_signal.py [--tries 5] [--runs 20] [--at 25] [--rpm 120] [--concurrency 64]

Per try: ``trialgrid serve`` (in a thread of this process) admits ``--rpm`` requests a
minute per key as a token bucket; ``trialgrid run`` (a real process) runs the quickstart
(117 trials per run: 2,340 at ``--runs 20``) against it with no ``limits:`` at
``--concurrency``; ``--at`` seconds after the server's first answer, it gets SIGTERM. Printed per try: the seconds from
the signal to the exit, the exit status (143 expected), whether stderr holds a traceback or
"Task was destroyed" / "Event loop is closed", the rows written and how many are
``internal``. Then the server's limit is lifted, the same command resumes the run, and the
outcome columns are compared with an uninterrupted in-process run of the same sweep
(``provider: sim``: every outcome column is equal by construction).

A benchmark, not a test: it takes ``tries × (at + resume)``; quote it with the load average.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import runner  # noqa: E402
from runner.config.sweep import load_sweep  # noqa: E402
from runner.sim.serve import ServeOptions, ServerThread  # noqa: E402

QUICKSTART = ROOT / "configs" / "quickstart.yaml"
OUTCOMES = ["model", "case_id", "condition", "run", "status", "decoy_called", "expected_called", "asked",
            "tools_called", "n_tool_calls", "tool_calls", "response_text"]
NOISE = ("Traceback", "Task was destroyed", "Event loop is closed", "Task exception was never retrieved")


def sweep(base_url: str | None, runs: int, concurrency: int) -> dict:
    data = yaml.safe_load(QUICKSTART.read_text())
    for probe in data["probes"]:
        probe["runs"] = runs
        for key in ("cases", "catalogue"):
            probe[key] = str(QUICKSTART.parent / probe[key])
    if base_url is not None:
        for m in data["models"]:
            m.update(provider="openai", base_url=base_url, api_key_env=None, concurrency=concurrency)
        data["engine"] = {"concurrency": concurrency}
    return data


def one_try(folder: Path, args: argparse.Namespace, expected: pl.DataFrame) -> dict:
    server = ServerThread(ServeOptions(host="127.0.0.1", port=0, rpm=args.rpm, rpm_mode="bucket")).start()
    try:
        path = folder / "sweep.yaml"
        path.write_text(yaml.safe_dump(sweep(server.base_url, args.runs, args.concurrency), sort_keys=False))
        out = folder / "out"
        cmd = [sys.executable, "-m", "runner.cli.app", "run", str(path), "--out", str(out), "--quiet"]
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=os.environ.copy())
        # the clock starts at the server's first answer: a loaded machine can take many seconds to import
        while proc.poll() is None and not server.stats()["by_status"].get("200"):
            time.sleep(0.1)
        time.sleep(args.at)
        alive = proc.poll() is None
        signalled = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        to_exit = time.monotonic() - signalled
        stderr = proc.stderr.read() if proc.stderr else ""
        parts = list((out / "trials").glob("*.arrow")) if (out / "trials").is_dir() else []
        if not parts:
            print(f"  no rows written by the signal (exit {code}); stderr: {stderr[-2000:]}", flush=True)
        rows = pl.concat([pl.read_ipc(p) for p in parts], how="diagonal") if parts else pl.DataFrame()
        internal = rows.filter(pl.col("error_kind") == "internal").height if parts else 0
        server.call(lambda state: setattr(state.options, "rpm", None))
        resumed = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        df = runner.load(out).collect()
        equal = (resumed.returncode == 0 and df.height == df["trial_id"].n_unique() == expected.height
                 and df.select(OUTCOMES).sort(OUTCOMES[:4]).equals(expected))
        return {"alive_at_signal": alive, "exit": code, "to_exit_s": round(to_exit, 2), "rows": rows.height,
                "internal": internal, "noise": [n for n in NOISE if n in stderr], "resume_exit": resumed.returncode,
                "equals_uninterrupted": equal}
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tries", type=int, default=5)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--at", type=float, default=25.0, help="seconds into the run the SIGTERM is sent")
    parser.add_argument("--rpm", type=int, default=120)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ref = Path(tmp) / "reference.yaml"
        ref.write_text(yaml.safe_dump(sweep(None, args.runs, args.concurrency), sort_keys=False))
        runner.run(load_sweep(ref), Path(tmp) / "reference", quiet=True)
        expected = runner.load(Path(tmp) / "reference").collect().select(OUTCOMES).sort(OUTCOMES[:4])
        good = 0
        for i in range(args.tries):
            folder = Path(tmp) / f"try{i}"
            folder.mkdir()
            result = one_try(folder, args, expected)
            ok = (result["exit"] == 143 and result["to_exit_s"] <= 5 and not result["internal"]
                  and not result["noise"] and result["equals_uninterrupted"])
            good += ok
            print(f"try {i + 1}: {result}", flush=True)
        print(f"{good} of {args.tries} tries: exit 143 within 5 s, no internal rows, no noise, resume equal "
              f"(load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
