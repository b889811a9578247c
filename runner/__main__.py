"""``python -m runner``: the ``trialgrid`` command, for environments where the script is not on PATH."""

try:
    from runner.cli import main
except KeyboardInterrupt:  # Ctrl-C while the command line is still importing
    raise SystemExit(130) from None

main()
