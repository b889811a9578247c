"""``trialgrid view OUT…``: serve outputs to a browser on loopback (``runner.viewer``).

A module of its own, registered from ``runner/cli/app.py``, so the command's options live beside it.
"""

from __future__ import annotations

import webbrowser
from pathlib import Path

import typer
from rich.text import Text

from runner.cli.console import err, fail
from runner.core.errors import UserError
from runner.core.safety import one_line


def view(
    out_dirs: list[Path] = typer.Argument(..., help="One or more run output directories (finished or still running)."),
    port: int = typer.Option(8765, "--port", "-p", help="Port on 127.0.0.1 (0: any free port, printed at start)."),
    open_browser: bool = typer.Option(False, "--open", help="Open the viewer in a web browser."),
    export_dir: Path | None = typer.Option(None, "--export", metavar="DIR",
                                           help="Write a static, self-contained copy to DIR/index.html (it opens "
                                                "from file://, filters work offline) instead of serving."),
) -> None:
    """A local web viewer of outputs: runs, every trial (filters, text search, the recorded calls) and the
    report's rates, each leading to its trials. Binds 127.0.0.1 only; never writes into an output."""
    from runner.viewer.server import open_sources, run_viewer

    try:
        sources = open_sources(out_dirs)
        if export_dir is not None:
            from runner.viewer.export import write_export

            target = write_export(sources, export_dir)
            err.print(Text(one_line(f"wrote {target}")), soft_wrap=True)
            return
    except UserError as exc:
        raise fail(exc) from None

    def started(url: str) -> None:
        err.print(Text(one_line(f"trialgrid view: {url} (Ctrl-C stops)")), soft_wrap=True)
        if open_browser:
            webbrowser.open(url)

    try:
        run_viewer(sources, port, started)
    except KeyboardInterrupt:  # Ctrl-C before the server took over the signal: stopping is what it asked
        pass
    except OSError as exc:
        raise fail(UserError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}",
                              hint="choose another --port, or --port 0 for any free one")) from None
    err.print("trialgrid view: stopped", soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.command("view")(view)
