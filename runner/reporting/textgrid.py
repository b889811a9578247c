"""Console tables that never cut a value: full width in logs, split into parts on a narrow terminal.

Why this exists: rich fits a table to the console by shrinking columns and ending
what no longer fits with "…". Piped into a log or CI (not a terminal), the console
is 80 columns wide, so a report of wide sweeps lost hundreds of numbers
("5.2e…", "[-28…"). Every terminal table of ``trialgrid report`` goes through
``emit``, which follows two rules:

- no fixed width (not a terminal, no ``COLUMNS``, no ``Console(width=...)``):
  each table is drawn at its natural width, however wide — a log line may be long,
  a number is never cut;
- a fixed width (a terminal, or an explicit one): a table too wide for it is split
  into parts by columns, the key columns (model, condition...) repeated in each
  part; if even one column does not fit beside the keys, the rows are stacked as
  ``header: value`` lines.

Numbers never wrap (a column is as wide as its widest number); text columns may
wrap at spaces, and a long header is broken after ``._+-`` so condition names do
not widen a column of short numbers. Every column folds instead of using "…".
Cells are ``rich.text.Text``, never markup, so a model or condition name is
printed as it is.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from rich import box
from rich.cells import cell_len
from rich.console import Console, RenderableType
from rich.measure import Measurement
from rich.segment import Segments
from rich.table import Table
from rich.text import Text

from runner.core.safety import term_text

#: wide enough for any table a report draws; only used to measure a natural width
_UNBOUNDED = 100_000
#: a table's title and caption wrap at its width, but never narrower than this: rich wraps them to the table
#: itself, which folded "negative · leaderboard · test and cost" into three lines above a two-column table
PROSE_MIN = 72


def fit_width(console: Console) -> int | None:
    """The width tables must fit, or None to draw them at their natural width.

    A terminal, or a console given a width (``Console(width=...)`` or the ``COLUMNS``
    variable, which rich reads into ``_width``), has one; a pipe or a file has none.
    """
    if console.is_terminal or getattr(console, "_width", None) is not None:
        return console.width
    return None


@dataclass(frozen=True)
class Col:
    """One column: its header, alignment, and whether its text may wrap at spaces (numbers never do)."""

    header: str
    justify: Literal["left", "right"] = "right"
    wrap: bool = False


@dataclass
class Grid:
    """A table as data: title, columns, rows of cells, caption; the first ``keys`` columns identify a row."""

    title: str
    cols: list[Col]
    caption: str = ""
    keys: int = 1
    boxed: bool = False
    rows: list[tuple[list[Text], str | None]] = field(default_factory=list)

    def add_row(self, *cells: str | Text, style: str | None = None) -> None:
        """A row; plain strings are taken literally (never as markup); missing cells are empty."""
        texts = [c if isinstance(c, Text) else Text(term_text(c)) for c in cells]
        texts += [Text("")] * (len(self.cols) - len(texts))
        self.rows.append((texts, style))


def cell(value: str, interval: str | None = None, *, dim_second: bool = True) -> Text:
    """A value with an optional second line (an interval, a floor) in dim."""
    text = Text(term_text(value))
    if interval is not None:
        text.append(("\n" if value else "") + term_text(interval), style="dim" if dim_second else "")
    return text


def _lines(text: Text) -> list[str]:
    return text.plain.split("\n")


def _body_width(texts: Sequence[Text]) -> int:
    return max((cell_len(line) for t in texts for line in _lines(t)), default=0)


def _word_width(texts: Sequence[Text]) -> int:
    return max((cell_len(w) for t in texts for w in t.plain.split()), default=0)


def wrap_label(label: str, width: int) -> str:
    """``label`` broken into lines of at most ``width`` cells, after spaces or ``._+-`` (a part longer stays whole)."""
    if "\n" in label:
        return "\n".join(wrap_label(line, width) for line in label.split("\n"))
    if cell_len(label) <= width:
        return label
    parts = [p for p in re.split(r"(?<=[ ._+\-])", label) if p]
    lines, line = [], ""
    for p in parts:
        if line and cell_len(line + p.rstrip()) > width:
            lines.append(line.rstrip())
            line = p
        else:
            line += p
    lines.append(line.rstrip())
    return "\n".join(lines)


def _header(col: Col, cells: Sequence[Text]) -> str:
    if col.wrap:
        return col.header
    return wrap_label(col.header, max(_body_width(cells), 8))


def _table(grid: Grid, idx: Sequence[int]) -> Table:
    """The table's body; its title and caption are printed around it by ``_print`` (see ``PROSE_MIN``)."""
    # headers hold user labels: Text, so rich reads no markup in them, controls escaped
    table = Table(header_style="bold", box=box.HEAVY_HEAD if grid.boxed else box.SIMPLE_HEAD, pad_edge=grid.boxed)
    for i in idx:
        col = grid.cols[i]
        cells = [r[0][i] for r in grid.rows]
        header = _header(col, cells)
        if col.wrap:
            table.add_column(Text(term_text(header)), justify=col.justify, overflow="fold")
        else:
            width = max(_body_width(cells), cell_len(max(header.split("\n"), key=cell_len)))
            table.add_column(Text(term_text(header)), justify=col.justify, no_wrap=True, overflow="fold", min_width=width)
    for cells, style in grid.rows:
        table.add_row(*(cells[i] for i in idx), style=style)
    return table


def _minimum(console: Console, table: Table) -> int:
    return Measurement.get(console, console.options.update(max_width=_UNBOUNDED), table).minimum


def _natural(console: Console, table: Table) -> int:
    return Measurement.get(console, console.options.update(max_width=_UNBOUNDED), table).maximum


def print_at(console: Console, renderable: RenderableType, width: int) -> None:
    """Render at ``width`` even when it exceeds the console's, uncropped (rich would crop to its width)."""
    options = console.options.update(width=width)
    console.print(Segments(list(console.render(renderable, options))), crop=False)


def _print(console: Console, table: Table, title: str, caption: str | None, width: int | None) -> None:
    """Title, table, caption. Without a fixed width the table keeps its natural width (uncropped, see the module
    docstring); title and caption (user labels: Text, no markup, controls escaped) wrap at the table's width, at
    least ``PROSE_MIN`` columns, and never past a fixed width."""
    natural = _natural(console, table)
    prose = max(natural, PROSE_MIN) if width is None else min(max(natural, PROSE_MIN), width)
    print_at(console, Text(term_text(title), style="table.title"), prose)
    if width is None:
        print_at(console, table, natural)
    else:
        console.print(table)
    if caption:
        print_at(console, Text(term_text(caption), style="table.caption"), prose)


def _parts(console: Console, grid: Grid, width: int) -> list[list[int]] | None:
    keys = list(range(min(grid.keys, len(grid.cols))))
    rest = list(range(len(keys), len(grid.cols)))
    parts: list[list[int]] = []
    current: list[int] = []
    for i in rest:
        if _minimum(console, _table(grid, keys + current + [i])) <= width:
            current.append(i)
            continue
        if not current:
            return None  # one column does not fit beside the keys
        parts.append(current)
        current = [i]
        if _minimum(console, _table(grid, keys + current)) > width:
            return None
    if current or not parts:
        parts.append(current)
    return parts


def _print_stacked(console: Console, grid: Grid) -> None:
    """Each row as a block: its keys, then one ``header: value`` line per column."""
    console.print(Text(term_text(grid.title), style="bold"))
    for cells, _ in grid.rows:
        keys = " · ".join(c.plain for c in cells[:grid.keys] if c.plain)
        console.print(Text(keys, style="bold"))
        for col, c in zip(grid.cols[grid.keys:], cells[grid.keys:], strict=True):
            if c.plain:
                console.print(Text("  " + col.header.replace("\n", " ") + ": ") + Text(c.plain.replace("\n", " ")))
    if grid.caption:
        console.print(Text(term_text(grid.caption)))


def emit(console: Console, grid: Grid, width: int | None) -> None:
    """Print ``grid`` so that every value is whole: see the module docstring."""
    full = _table(grid, range(len(grid.cols)))
    if width is None or _minimum(console, full) <= width:
        _print(console, full, grid.title, grid.caption, width)
        return
    parts = _parts(console, grid, width)
    if parts is None:
        _print_stacked(console, grid)
        return
    keys = list(range(min(grid.keys, len(grid.cols))))
    for n, part in enumerate(parts, 1):
        _print(console, _table(grid, keys + part), f"{grid.title} (part {n} of {len(parts)})",
               grid.caption if n == len(parts) else None, width)


def say(console: Console, text: str | Text, width: int | None, style: str | None = None) -> None:
    """A line of prose: wrapped at a fixed width, one unbroken line otherwise (a log keeps it whole)."""
    t = text if isinstance(text, Text) else Text(term_text(text))
    if style:
        t.stylize(style)
    console.print(t, soft_wrap=width is None)


__all__ = ["Col", "Grid", "cell", "emit", "fit_width", "print_at", "say", "wrap_label"]
