"""The ``trialgrid`` command: it parses arguments and calls the layers below; it decides nothing itself.

``err``, ``out``, ``fail`` and ``plain`` are public for the commands a plug-in adds (cluster mode).
"""

from runner.cli.app import main
from runner.cli.console import err, fail, out, plain

__all__ = ["err", "fail", "main", "out", "plain"]
