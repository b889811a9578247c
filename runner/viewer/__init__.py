"""``trialgrid view``: a local web viewer of outputs, from each rate of the report to the trials it counts.

``runner.viewer.data``'s ``Source`` reads one output: its current snapshot (``snapshot``), pages of trials
(``listing``), one trial's recorded calls (``trial``), the report's counts with the filter behind each
(``numbers``). ``runner.viewer.server`` serves it on loopback (aiohttp) with the page in ``static/`` (plain
HTML, one script, one stylesheet: no build step, no CDN). It sits beside ``runner.reporting``: it reads outputs
and the analysis, never writes into an output.
"""

from runner.viewer.data import Query, Source, ViewError
from runner.viewer.server import make_app, open_sources, run_viewer

__all__ = ["Query", "Source", "ViewError", "make_app", "open_sources", "run_viewer"]
