"""The ``trialgrid`` command: it parses arguments and calls the layers below; it decides nothing itself.
"""

from runner.cli.app import main

__all__ = ["main"]
