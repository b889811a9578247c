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
