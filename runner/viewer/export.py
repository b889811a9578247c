"""``trialgrid view OUT --export DIR``: the viewer as one static page that works from ``file://``.

For a CI artifact or an email: ``DIR/index.html`` holds the page's own script and stylesheet inline and every
trial as JSON (a ``<script type="application/json">`` block, never executed), and ``app.js`` answers the page's
questions from it instead of the server (filters, search, sort, paging and previous/next in the browser). The
page's policy allows only its own inline script and style (by hash): nothing is fetched from anywhere.

An export embeds every trial with its exchange, so it is for small outputs (``EXPORT_MAX`` trials); a larger
one is viewed with the server.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from runner.core.errors import UserError
from runner.viewer.data import Source, ViewError
from runner.viewer.server import static_text

__all__ = ["EXPORT_MAX", "export_page", "write_export"]

EXPORT_MAX = 20_000


def _sha(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def _embedded(data: Any) -> str:
    """JSON that stays inside its ``<script>`` block whatever the data holds (no ``</script``, no ``<!--``)."""
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026") \
               .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def export_page(sources: Sequence[Source], limit: int = EXPORT_MAX) -> str:
    """The static page over ``sources``: ``UserError`` when they hold more than ``limit`` trials in all."""
    runs = []
    for i, s in enumerate(sources):
        try:
            rows, details = s.everything(limit)
        except ViewError as exc:
            raise UserError(str(exc), hint="view it with `trialgrid view OUT` instead (the server pages through "
                                           "any size)") from None
        info = {**s.run_info(), "live": False, "index": i}
        runs.append({"info": info, "columns": s.columns(), "rows": rows, "details": details, "rates": s.rates()})
    script, style = static_text("app.js"), static_text("app.css")
    csp = (f"default-src 'none'; script-src {_sha(script)}; style-src {_sha(style)}; img-src data:; "
           "base-uri 'none'; form-action 'none'")
    page = static_text("index.html")
    page = page.replace('<meta charset="utf-8">',
                        f'<meta charset="utf-8">\n<meta http-equiv="Content-Security-Policy" content="{csp}">')
    page = page.replace('<link rel="stylesheet" href="static/app.css">', f"<style>{style}</style>")
    data = f'<script type="application/json" id="trialgrid-data">{_embedded({"runs": runs})}</script>'
    return page.replace('<script src="static/app.js"></script>', f"{data}\n<script>{script}</script>")


def write_export(sources: Sequence[Source], dest: Path) -> Path:
    """Write ``dest/index.html`` (``dest`` made if missing); never inside an output, never over a file."""
    dest = Path(dest)
    for s in sources:
        if dest.resolve().is_relative_to(s.path.resolve()):
            raise UserError(f"--export {dest} is inside the output {s.path}; the viewer never writes into an output",
                            hint="export somewhere else")
    target = dest / "index.html"
    if target.exists():
        raise UserError("file exists; not overwriting", file=target, hint="remove it, or export into another folder")
    for s in sources:
        s.verify()  # every batch's checksum, before any value is embedded (a damaged part: UserError)
    page = export_page(sources)
    dest.mkdir(parents=True, exist_ok=True)
    target.write_text(page, encoding="utf-8")
    return target
