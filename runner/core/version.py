"""trialgrid's own version, as the installed package says it: one lookup for every place that records it."""

from __future__ import annotations

from importlib import metadata

__all__ = ["trialgrid_version"]


def trialgrid_version() -> str:
    """The installed distribution's version, or ``"unknown"`` when run from a tree that is not installed."""
    try:
        return metadata.version("trialgrid")
    except metadata.PackageNotFoundError:
        return "unknown"
