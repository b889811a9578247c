"""Fixtures of the viewer's tests: small outputs, the viewer served on loopback, headless Chromium by Playwright.

Playwright drives the system Chromium (``executable_path``): no browser is downloaded. The server runs in a
thread with its own event loop, so a test talks to it over real HTTP like a browser does.
"""

from __future__ import annotations

import asyncio
import threading
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import runner
from runner.config.sweep import load_sweep
from runner.core.errors import TrialgridWarning
from tests.conftest import chromium, missing
from tests.helpers.files import quickstart_sweep


@contextmanager
def served(paths: list[Path]) -> Iterator[str]:
    """``trialgrid view PATHS`` on 127.0.0.1 at a free port, for the block; yields its URL."""
    from aiohttp import web

    from runner.viewer.server import make_app, open_sources

    app = make_app(open_sources(paths))
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app, access_log=None)
    port: Future[int] = Future()

    def serve() -> None:  # all of the server's loop in its own thread (Playwright's sync API runs one here)
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, "127.0.0.1", 0)
            loop.run_until_complete(site.start())
            port.set_result(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
        except BaseException as exc:
            port.set_exception(exc)
            raise
        loop.run_forever()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port.result(timeout=30)}/"
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()


#: US dollars per million tokens (input, output), so a trial's cost is shown and checked
PRICES = {"sim-careful": {"input": 3.0, "output": 15.0}, "sim-typical": {"input": 0.5, "output": 1.5},
          "sim-reckless": {"input": 0.15, "output": 0.6}}


@pytest.fixture(scope="package")
def quick_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The quickstart (3 models, misselection) with 2 runs per cell, priced, finished."""
    tmp = tmp_path_factory.mktemp("viewer")
    def run() -> None:
        with warnings.catch_warnings():  # "runs=2 is fewer than 5 per cell": few on purpose, the tests count trials
            warnings.simplefilter("ignore", TrialgridWarning)
            runner.run(load_sweep(quickstart_sweep(tmp, runs=2, prices=PRICES)), tmp / "out", quiet=True)

    # in a thread of its own: Playwright's sync API keeps an event loop running in this one
    with ThreadPoolExecutor(1) as pool:
        pool.submit(run).result()
    return tmp / "out"


@pytest.fixture(scope="module")
def chromium_browser() -> Iterator[Any]:
    """One headless Chromium per test module (the system package's binary). Module scope, not package: this
    folder has no ``__init__``, so a "package" fixture would live to the session's end, and Playwright's sync API
    keeps an event loop running in this thread while it lives — every later ``asyncio.run`` in the worker would
    fail ("cannot be called from a running event loop")."""
    exe = chromium()
    if exe is None:
        missing("headless Chromium is not installed (apt-get install -y chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("playwright is not installed (pip install -e '.[test]')")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, headless=True,
                                     args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        yield browser
        browser.close()


class Page:
    """A browser tab that records every console error and page error, and waits for the viewer's renders."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.errors: list[str] = []
        page.on("console", lambda m: self.errors.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))

    def goto(self, url: str) -> None:
        self.page.goto(url)
        self.ready()

    def ready(self) -> None:
        """Wait until the view the hash names has rendered (app.js sets body[data-ready] to the hash)."""
        self.page.wait_for_function("document.body.dataset.ready === location.hash")

    def click(self, selector: str) -> None:
        self.page.click(selector)
        self.ready()

    def text(self, selector: str) -> str:
        return str(self.page.text_content(selector))

    def texts(self, selector: str) -> list[str]:
        return [str(t) for t in self.page.eval_on_selector_all(selector, "els => els.map(e => e.textContent)")]


@pytest.fixture
def tab(chromium_browser: Any) -> Iterator[Page]:
    # bypass_csp: Playwright evaluates its waits as strings, which the page's policy forbids; without the policy
    # the hostile tests also show that the page itself keeps data inert (the policy is a second wall)
    context = chromium_browser.new_context(bypass_csp=True)
    page = Page(context.new_page())
    yield page
    context.close()


@pytest.fixture(scope="package")
def serve() -> Callable[[list[Path]], Any]:
    """``served`` as a fixture (test modules here are not importable as a package)."""
    return served


@pytest.fixture(scope="module")
def url(quick_out: Path) -> Iterator[str]:
    """The quickstart output served, for a module's browser tests (a module serving another output overrides it)."""
    with served([quick_out]) as base:
        yield base


@pytest.fixture(scope="module")
def rows(quick_out: Path) -> list[dict[str, Any]]:
    """The quickstart output's rows, read by polars: what every expected figure is computed from."""
    from runner.output import Output

    return Output.open(quick_out).scan().collect().to_dicts()
