"""``trialgrid view``'s HTTP server: the page, its three static files, and a JSON API over the outputs given.

aiohttp, as ``trialgrid serve`` uses: no new dependency. The server binds loopback only. It serves files from a
fixed list of names shipped in the package (``runner/viewer/static``) and data only through the API, where an
output is named by its position in the command line, never by a path: no request can reach a file outside the
outputs given (anything else is 404). It never writes: every handler reads (``runner.viewer.data``).

Each query runs in a worker thread (polars releases the GIL), so a slow filter never stalls the page's polls.
The workers are daemon threads: Ctrl-C or SIGTERM stops the server at once, without waiting for a query or the
background warm-up (seconds at a million trials) to finish; none of them writes anything that could be left
half done.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import signal
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from functools import partial
from importlib import resources
from pathlib import Path
from typing import Any

from aiohttp import web

from runner.core.errors import UserError
from runner.core.safety import binds_loopback
from runner.output.reader import Output
from runner.viewer.data import Query, Source, ViewError, labels_for

__all__ = ["STATIC_FILES", "make_app", "open_sources", "run_viewer"]

#: every file the server sends (name → content type); nothing else is ever read from disk for a request
STATIC_FILES = {"index.html": "text/html", "app.js": "text/javascript", "app.css": "text/css"}
#: no script, style, image or connection from anywhere but this server; no framing, no plug-ins
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


_WARMING = web.AppKey("warming", asyncio.Future)
#: seconds after start when the warm-up begins even if no page of trials was asked for
WARM_AFTER_S = 3.0
#: seconds a stopping server gives the requests in flight
_SHUTDOWN_S = 0.5


class _DaemonWorkers(Executor):
    """A fixed set of daemon worker threads: unlike ``ThreadPoolExecutor``'s, the process does not wait for them
    at exit (a viewer stopped during a warm-up of a 1M-trial output took 4–13 s to exit)."""

    def __init__(self, workers: int = 4) -> None:
        self._jobs: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]] = queue.SimpleQueue()
        for i in range(workers):
            threading.Thread(target=self._work, name=f"trialgrid-view-{i}", daemon=True).start()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        self._jobs.put((future, partial(fn, **kwargs) if kwargs else fn, args))
        return future

    def _work(self) -> None:
        while True:
            future, fn, args = self._jobs.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # handed to the awaiting handler, as a pool's worker does
                future.set_exception(exc)


def static_text(name: str) -> str:
    return resources.files("runner.viewer").joinpath("static", name).read_text(encoding="utf-8")


def open_sources(paths: Sequence[Path]) -> list[Source]:
    """Each output opened once (``UserError`` for a missing manifest, a foreign part or one that does not read;
    a part failing its checksums is refused once ``Source.verify`` has run), labelled as the report labels runs."""
    if not paths:
        raise UserError("no output directory given", hint="trialgrid view OUT [OUT…]")
    # the footers only: each batch's checksum is checked in the background once the first page is answered
    # (``Source.verify``; at 1M trials it took 0.5 CPU s of the first second), and a damaged part is refused then
    outputs = [Output.open(p, verify=False) for p in paths]
    return [Source(Path(p), label, o) for p, label, o in zip(paths, labels_for(paths, outputs), outputs, strict=True)]


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(data, ensure_ascii=False, allow_nan=False), status=status,
                        content_type="application/json")


@web.middleware
async def _headers(request: web.Request, handler: Callable[[web.Request], Any]) -> web.StreamResponse:
    try:
        response = await handler(request)
    except ViewError as exc:
        response = _json({"error": str(exc)}, 400)
    except UserError as exc:  # the output changed under us into something a reader refuses (a damaged part)
        response = _json({"error": str(exc)}, 409)
    except web.HTTPException as exc:
        response = _json({"error": exc.reason}, exc.status)
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["Cache-Control"] = "no-store"
    return response


def make_app(sources: Sequence[Source], warm_up: bool = True) -> web.Application:
    """The viewer's application over ``sources`` (index i in the API is the i-th output given). In the background,
    once it listens, each output's parts are checked (``Source.verify``) and (``warm_up``) its index, blobs and
    analysis computed."""
    app = web.Application(middlewares=[_headers])
    workers = _DaemonWorkers()

    async def in_thread(fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(workers, partial(fn, *args))

    def source(request: web.Request) -> Source:
        text = request.match_info["run"]
        # ASCII digits only: "²".isdigit() is true and int() refuses it; "٣" is a digit int() reads as 3
        if not (text.isascii() and text.isdigit()) or int(text) >= len(sources):
            raise web.HTTPNotFound(reason="no such run")
        return sources[int(text)]

    async def page(request: web.Request) -> web.Response:
        return web.Response(text=static_text("index.html"), content_type="text/html")

    async def static(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in STATIC_FILES:
            raise web.HTTPNotFound(reason="not found")
        return web.Response(text=static_text(name), content_type=STATIC_FILES[name])

    async def runs(request: web.Request) -> web.Response:
        infos = [await in_thread(s.run_info) for s in sources]
        return _json({"runs": [{"index": i, **info} for i, info in enumerate(infos)]})

    async def run(request: web.Request) -> web.Response:
        s = source(request)
        info, columns = await in_thread(s.run_info), await in_thread(s.columns)
        return _json({"index": sources.index(s), **info, "columns": columns})

    async def trials(request: web.Request) -> web.Response:
        s = source(request)
        try:
            return _json(await in_thread(s.page, Query.parse(request.query), request.query.get("count") != "0"))
        finally:
            first_page.set()

    async def count(request: web.Request) -> web.Response:
        s = source(request)
        return _json({"total": await in_thread(s.count, Query.parse(request.query))})

    async def trial(request: web.Request) -> web.Response:
        s = source(request)
        trial_id = request.match_info["trial"]
        detail = await in_thread(s.trial, trial_id)
        if detail is None:
            raise web.HTTPNotFound(reason="no such trial")
        pos_text = request.query.get("pos", "")
        pos = int(pos_text) if pos_text.isascii() and pos_text.isdigit() else None
        detail["around"] = await in_thread(s.neighbours, Query.parse(request.query), trial_id, pos)
        return _json(detail)

    async def rates(request: web.Request) -> web.Response:
        return _json(await in_thread(source(request).rates))

    async def compare(request: web.Request) -> web.Response:
        q = request.query
        if not all(q.get(k) for k in ("probe", "case_id", "condition")):
            raise ViewError("compare needs probe, case_id and condition")
        here = source(request)
        if len(sources) == 1:
            return _json(await in_thread(here.compare, q["probe"], q["case_id"], q["condition"]))
        # several outputs given: the same case and condition in each run, this run's first
        order = [here] + [s for s in sources if s is not here]
        models: list[dict[str, Any]] = []
        outcomes: list[str] = []
        for s in order:
            found = await in_thread(s.compare, q["probe"], q["case_id"], q["condition"])
            outcomes += [o for o in found["outcomes"] if o not in outcomes]
            models += [{**m, "model": f"{s.label} · {m['model']}", "run": sources.index(s)} for m in found["models"]]
        return _json({"outcomes": outcomes, "models": models})

    first_page = asyncio.Event()

    async def warm(app: web.Application) -> None:
        """In the background, once the first page of trials is answered (or ``WARM_AFTER_S`` pass): the first
        page never shares the machine with it (on a 1M-trial output, sharing made the first page 2.8 s)."""
        def each() -> None:
            for s in sources:
                try:
                    s.warm() if warm_up else s.verify()
                except Exception:
                    pass  # the request that needs it computes it again and reports the error (a damaged part: 409)

        async def later() -> None:
            try:
                await asyncio.wait_for(first_page.wait(), WARM_AFTER_S)
            except TimeoutError:
                pass
            await asyncio.get_running_loop().run_in_executor(workers, each)

        app[_WARMING] = asyncio.ensure_future(later())

    async def stop_warming(app: web.Application) -> None:
        task = app.get(_WARMING)
        if task is not None and not task.done():
            task.cancel()  # still waiting for the first page: nothing to warm any more

    app.on_startup.append(warm)  # without ``warm_up``, only the parts' checksums are checked
    app.on_cleanup.append(stop_warming)
    app.router.add_get("/", page)
    app.router.add_get("/static/{name}", static)
    app.router.add_get("/api/runs", runs)
    app.router.add_get("/api/runs/{run}", run)
    app.router.add_get("/api/runs/{run}/trials", trials)
    app.router.add_get("/api/runs/{run}/count", count)
    app.router.add_get("/api/runs/{run}/trials/{trial}", trial)
    app.router.add_get("/api/runs/{run}/rates", rates)
    app.router.add_get("/api/runs/{run}/compare", compare)
    return app


def check_loopback(host: str) -> None:
    if not binds_loopback(host):
        raise UserError(f"--host {host} is not a loopback address; trialgrid view only listens on this machine")


async def _serve(app: web.Application, host: str, port: int, started: Callable[[str], None]) -> None:
    # a request still waiting on a worker when the server stops is not waited for (its answer has no reader)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=_SHUTDOWN_S)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    server = site._server
    sockets = getattr(server, "sockets", None) or []
    bound = sockets[0].getsockname()[1] if sockets else port
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):  # a clean exit: a live run's spilled batches removed
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not on Windows, nor off main
            loop.add_signal_handler(signum, stop.set)
    started(f"http://{host}:{bound}/")  # once a stop is handled: a signal right after this line exits cleanly
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def run_viewer(sources: Sequence[Source], port: int, started: Callable[[str], None], host: str = "127.0.0.1") -> None:
    """Serve until Ctrl-C or SIGTERM, then return; ``started`` gets the URL once the socket listens (``port`` 0:
    any free one)."""
    check_loopback(host)
    asyncio.run(_serve(make_app(sources), host, port, started))
