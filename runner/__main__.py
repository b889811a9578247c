"""``python -m runner``: the ``trialgrid`` command, for environments where the script is not on PATH."""

from runner.cli import main

main()
