"""Running the simulated server beside other code: in a background thread, or in the foreground.

Tests and benchmarks start it in a thread on 127.0.0.1 port 0 (``ServerThread``),
read ``/stats`` through ``stats()``, and stop it; ``trialgrid serve`` runs it in the
foreground until interrupted (``serve_forever``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

from runner.sim.serve.app import SimServer, start_server
from runner.sim.serve.options import ServeOptions


class ServerThread:
    """``with ServerThread(options) as server: ... server.base_url ...``"""

    def __init__(self, options: ServeOptions) -> None:
        self.options = options
        self.port = 0
        self.state: SimServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="trialgrid-serve", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.options.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """What a sweep's ``base_url`` should be (both APIs live under ``/v1``)."""
        return self.url + "/v1"

    def start(self) -> ServerThread:
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise self._error
        return self

    def _main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            self._runner, self.state, self.port = loop.run_until_complete(start_server(self.options))
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        loop.run_forever()
        loop.run_until_complete(self._runner.cleanup())
        loop.close()

    def call(self, fn: Callable[[SimServer], Any]) -> Any:
        """Run ``fn(state)`` on the server's loop (its state is only touched there)."""
        assert self._loop is not None and self.state is not None
        future = asyncio.run_coroutine_threadsafe(_apply(fn, self.state), self._loop)
        return future.result(30)

    def stats(self, with_log: bool = False) -> dict[str, Any]:
        return self.call(lambda s: s.stats.snapshot(with_log))

    def set_faults(self, faults: Mapping[str, float]) -> dict[str, float]:
        """Replace the fault rates in force, e.g. ``set_faults({})`` when a test's incident is over (the
        ``PUT /admin/faults`` of a server in another process); returns them."""
        rates: dict[str, float] = self.call(lambda s: s.set_faults(faults))
        return rates

    def stop(self) -> None:
        if self._loop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(30)

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


async def _apply(fn: Callable[[SimServer], Any], state: SimServer) -> Any:
    result = fn(state)
    # copy lists so the caller's thread never reads them while the loop appends
    if isinstance(result, dict) and "log" in result:
        result = {**result, "log": {k: list(v) for k, v in result["log"].items()}}
    return result


def serve_forever(options: ServeOptions, announce: Callable[[str], None]) -> None:
    """Serve in the foreground until interrupted (Ctrl-C / SIGTERM)."""
    import signal

    async def main() -> None:
        runner, _state, port = await start_server(options)
        base = f"http://{options.host}:{port}"
        announce(f"serving the simulated agent on {base} — OpenAI: {base}/v1/chat/completions and {base}/v1/responses, "
                 f"Anthropic: {base}/v1/messages, stats: {base}/stats (base_url for a sweep: {base}/v1)")
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, stop.set)
            except (NotImplementedError, RuntimeError):  # pragma: no cover — not the main thread
                pass
        try:
            await stop.wait()
        finally:
            await runner.cleanup()

    asyncio.run(main())
