"""Where the repository is, and the sweep files tests write (the bundled quickstart, cut down)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs"


def quickstart_dict() -> dict[str, Any]:
    """``configs/quickstart.yaml`` as data, its case and catalogue paths made absolute (so it runs from anywhere)."""
    data = yaml.safe_load((CONFIGS / "quickstart.yaml").read_text())
    for probe in data["probes"]:
        for key in ("cases", "catalogue"):
            probe[key] = str(CONFIGS / probe[key])
    return data


def bundled_sweep(folder: Path, name: str, runs: int) -> Path:
    """A bundled sweep (``configs/NAME``) with its case files named absolutely and ``runs`` per cell, written to
    ``folder``."""
    data = yaml.safe_load((CONFIGS / name).read_text())
    for probe in data["probes"]:
        probe["runs"] = runs
        for key in ("cases", "catalogue", "traces", "tasks"):
            if isinstance(probe.get(key), str):
                probe[key] = str(CONFIGS / probe[key])
            elif isinstance(probe.get(key), list):
                probe[key] = [str(CONFIGS / t) for t in probe[key]]
    return write_yaml(folder / name, data)


def write_yaml(path: Path, data: Any) -> Path:
    """``data`` written to ``path``: text as it is, anything else as YAML in its own key order."""
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return path


def quickstart_sweep(folder: Path, *, runs: int = 2, name: str = "sweep.yaml", **top: Any) -> Path:
    """The quickstart with ``runs`` runs per cell (and ``top`` keys set, e.g. ``engine=``), written to ``folder``."""
    data = quickstart_dict()
    for probe in data["probes"]:
        probe["runs"] = runs
    data.update(top)
    return write_yaml(folder / name, data)
