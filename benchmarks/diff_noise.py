"""`trialgrid diff` on noise and on a real change: how often it cries wolf, and whether it finds a real change.

Usage: python benchmarks/diff_noise.py [--pairs 5] [--sweeps quickstart,negatives,phantom,propagation]

1. **noise**: for each bundled sweep and each of ``--pairs`` seed pairs, two runs that differ only in
   ``seed:`` (the same agents, only the sampling changed), then ``trialgrid diff OLD NEW``. Goal: at
   most 1 of the 20 diffs exits 1 (the rule's family-wise rate is 5%).
2. **power**: the same sweep with the persona behind two model labels swapped (typical → reckless,
   careful → typical) on quickstart and negatives. Goal: REGRESSION and exit 1 on both.

Prints one line per diff (exit code, regressions, fixed, cells to watch, run-level tests, the smallest
run-level p) and the totals; exits 1 when a goal is missed. A benchmark, not a test: it runs the
full bundled sweeps (quickstart 2,340 trials each side).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

import runner
from runner.analysis.diff import diff_runs
from runner.cli.app import app

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
SWAP = {"typical": "reckless", "careful": "typical"}


def _sweep(name: str, folder: Path, tag: str, seed: int | None = None, swap: bool = False) -> Path:
    data: dict[str, Any] = yaml.safe_load((CONFIGS / f"{name}.yaml").read_text())
    for probe in data["probes"]:
        for key in ("cases", "catalogue", "traces", "tasks"):
            if isinstance(probe.get(key), str):
                probe[key] = str(CONFIGS / probe[key])
            elif isinstance(probe.get(key), list):
                probe[key] = [str(CONFIGS / t) for t in probe[key]]
    if seed is not None:
        data["seed"] = seed
    if swap:
        for m in data["models"]:
            m["model"] = SWAP.get(m["model"], m["model"])
    path = folder / f"{name}-{tag}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _diff(old: Path, new: Path) -> tuple[int, str]:
    result = diff_runs(old, new)
    code = CliRunner().invoke(app, ["diff", str(old), str(new)]).exit_code
    p_min = min((r.contrast.p for r in result.runs), default=float("nan"))
    return code, (f"exit {code}  regressions {len(result.regressions)}  fixed {len(result.fixed)}  "
                  f"watch {len(result.watch)}  run-level tests {len(result.runs)}  min paired p {p_min:.2g}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--sweeps", default="quickstart,negatives,phantom,propagation")
    args = ap.parse_args()
    sweeps = args.sweeps.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        noisy = total = 0
        for name in sweeps:
            for i in range(args.pairs):
                seeds = (1000 + 2 * i, 1001 + 2 * i)
                outs = []
                for s in seeds:
                    out = folder / f"{name}-{s}"
                    runner.run(_sweep(name, folder, str(s), seed=s), out, quiet=True)
                    outs.append(out)
                code, line = _diff(*outs)
                noisy += code == 1
                total += 1
                print(f"noise  {name:12s} seeds {seeds[0]} vs {seeds[1]}: {line}", flush=True)
        print(f"noise: {noisy} of {total} diffs exit 1 (goal ≤ 1 of 20)")
        missed = 0
        for name in ("quickstart", "negatives"):
            if name not in sweeps:
                continue
            old, new = folder / f"{name}-base", folder / f"{name}-swapped"
            runner.run(_sweep(name, folder, "base"), old, quiet=True)
            runner.run(_sweep(name, folder, "swapped", swap=True), new, quiet=True)
            code, line = _diff(old, new)
            missed += code != 1
            print(f"power  {name:12s} typical→reckless, careful→typical: {line}", flush=True)
            for r in diff_runs(old, new).runs:
                print(f"         {r.line()}")
    return 1 if noisy > max(1, total // 20) or missed else 0


if __name__ == "__main__":
    sys.exit(main())
