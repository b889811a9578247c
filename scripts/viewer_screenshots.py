"""Take the screenshots of docs/viewer.md: the quickstart (2 runs a cell), served by ``trialgrid view``, in the
system's headless Chromium (Playwright, ``executable_path``; no browser download).

Usage: python scripts/viewer_screenshots.py [--out docs]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import runner  # noqa: E402
from runner.config.sweep import load_sweep  # noqa: E402
from runner.core.errors import TrialgridWarning  # noqa: E402
from tests.helpers.files import quickstart_sweep  # noqa: E402
from tests.viewer.conftest import PRICES, served  # noqa: E402

SHOTS = (  # (file, route, what to wait for)
    ("viewer-rates.png", "#/run/0/rates", "table.scorecard"),
    ("viewer-trials.png", "#/run/0?f.decoy_called=true&f.condition=ungroundable", "tr.trial"),
    ("viewer-trial.png", None, ".why"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs")
    args = parser.parse_args()
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        raise SystemExit("no chromium on PATH (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        def run() -> None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", TrialgridWarning)
                runner.run(load_sweep(quickstart_sweep(Path(tmp), runs=2, prices=PRICES)), Path(tmp) / "out", quiet=True)

        with ThreadPoolExecutor(1) as pool:
            pool.submit(run).result()
        with served([Path(tmp) / "out"]) as base, sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=exe, headless=True, args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1200, "height": 820})
            for name, route, selector in SHOTS:
                if route is None:  # the first trial of the list before
                    page.click("tr.trial")
                else:
                    page.goto(base + route)
                page.wait_for_selector(selector)
                page.wait_for_function("document.body.dataset.ready === location.hash")
                page.evaluate("window.scrollTo(0, 0)")
                page.screenshot(path=str(args.out / name))
                print(f"wrote {args.out / name}")
            browser.close()


if __name__ == "__main__":
    main()
