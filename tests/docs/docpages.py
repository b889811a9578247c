"""Reading the documentation the way the doc tests need: pages, sections, tables, links."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"


def pages() -> list[Path]:
    """README.md and every docs/*.md page."""
    return [README, *sorted(DOCS.glob("*.md"))]


def page(name: str) -> str:
    """The text of ``docs/NAME`` (or of README.md for ``README.md``)."""
    return (README if name == "README.md" else DOCS / name).read_text()


def section(text: str, heading: str) -> str:
    """From ``heading`` (a whole line, e.g. ``## Scorecard``) to the next heading of the same or a higher level."""
    level = len(heading) - len(heading.lstrip("#"))
    lines = text.splitlines()
    start = lines.index(heading)
    end = next((i for i in range(start + 1, len(lines))
                if re.match(rf"#{{1,{level}}} ", lines[i]) and not _in_fence(lines, i)), len(lines))
    return "\n".join(lines[start:end])


def _in_fence(lines: list[str], index: int) -> bool:
    return sum(1 for line in lines[:index] if line.startswith("```")) % 2 == 1


def table_after(text: str, marker: str) -> list[list[str]]:
    """Rows of the first markdown table at or after ``marker`` (header and separator dropped)."""
    rest = marker + text.split(marker, 1)[1]
    rows: list[list[str]] = []
    for line in rest.splitlines():
        if line.startswith("|"):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif rows:
            break
    return rows[2:]


def prose(text: str) -> str:
    """The text with fenced code blocks removed (links and paths inside them are examples)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


LINK_RE = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")


def links(text: str) -> list[str]:
    """Targets of every markdown link and image outside code blocks."""
    return [a or b for a, b in LINK_RE.findall(prose(text))]


def anchors(text: str) -> set[str]:
    """GitHub's heading anchors of a page."""
    out: set[str] = set()
    seen: dict[str, int] = {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"#{1,6} (.*)", line)
        if not m or _in_fence(lines, i):
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out
