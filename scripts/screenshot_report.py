"""Render `trialgrid report OUT… --html` in headless Chromium and save a PNG (the README's picture).

    python scripts/screenshot_report.py out/quickstart [out/other ...] --png docs/report.png

Runs nothing but the report and the browser; the output directories must exist
(`trialgrid run configs/quickstart.yaml` first).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from runner.analysis.leaderboard import summarize
from runner.reporting.html import write_html

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outs", nargs="+", type=Path)
    ap.add_argument("--png", type=Path, default=Path("docs/report.png"))
    ap.add_argument("--html", type=Path, default=None, help="also keep the HTML here")
    ap.add_argument("--size", default="1200,1800", help="window width,height in pixels")
    args = ap.parse_args()
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        print("chromium not found: apt-get install -y chromium", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        page = args.html or Path(tmp) / "report.html"
        write_html(summarize(args.outs), page)
        args.png.parent.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run([exe, *FLAGS, f"--user-data-dir={tmp}/profile", f"--window-size={args.size}",
                               f"--screenshot={args.png.resolve()}", page.resolve().as_uri()],
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 0 or not args.png.exists():
            print(proc.stderr[-2000:], file=sys.stderr)
            return 1
    print(f"wrote {args.png} ({args.png.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
