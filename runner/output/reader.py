"""One output directory, opened for reading: the manifest and the part footers read once, shared by every reader.

A command used to let each reader find the output on its own: one ``trialgrid run … --fail-on negative`` read
every part's footer 6 times and the manifest 7 times, and the resume's spend globbed the parts itself (so it
counted a ``--retry-errors`` trial twice). ``Output.open`` is the one place that reads an output's manifest and
checks its parts (``runner.output.parts``: own parts only, readable parts only); ``Output.scan`` applies the
third rule (each trial once, its newest row). The command line opens an output once and hands the object to
the report, the analysis, the probe views, the verdicts, the ``--fail-on`` gate and diff.

Readers never write: an ``Output`` has no method that touches the directory, so a report on a read-only output
(an archived or shared run) works. Listings a report can produce (e.g. the phantom disagreements) are written
where the user asks (``trialgrid report --listings DIR``).

Reader errors are ``UserError`` raised here: a missing or damaged manifest, a damaged or foreign part (on
``open``), an output without a finished part (on ``scan``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from runner.config.cost import ModelPrice, prices_from, usage_by_model
from runner.core.calls import Blobs
from runner.core.errors import UserError
from runner.core.manifest import Manifest, require_manifest
from runner.output.parts import (
    DAMAGED_DIR,
    FOREIGN_DIR,
    PartIssue,
    PartRecord,
    damaged_parts,
    recorded_unique,
    refuse_issues,
    scan_latest,
    survey_parts,
)
from runner.output.sink import TRIALS_DIR
from runner.output.tally import Tally, tally_parts, tally_scan

if TYPE_CHECKING:  # polars loads when rows are read: opening an output reads footers only
    import polars as pl

__all__ = ["Output", "Spend", "as_output", "spent_in"]


@dataclass(frozen=True)
class Spend:
    """What an output's trials cost: dollars (unpriced models count 0) and tokens (input + output)."""

    usd: float
    tokens: int


@dataclass(frozen=True, eq=False)
class Output:
    """A run's output directory as readers see it: its manifest, the parts that count (oldest first), and the
    parts that do not (``issues``: damaged or foreign; empty unless opened with ``strict=False``), and what the
    writer recorded in each counted part (``records``, in the order of ``parts``; None: no record)."""

    path: Path
    manifest: Manifest
    parts: tuple[Path, ...]
    issues: tuple[PartIssue, ...] = ()
    records: tuple[PartRecord | None, ...] = ()

    @classmethod
    def open(cls, path: str | Path, *, manifest: Manifest | None = None, strict: bool = True,
             verify: bool = True) -> Output:
        """Read ``path``'s manifest (unless a writer passes the one it holds) and its part footers, once.

        ``strict`` (every reader): a damaged or foreign part is a one-line ``UserError``. A writer that holds
        the output's lock counts with ``strict=False``: those parts are left out and listed in ``issues``.
        ``verify`` False reads only the footers, not each batch's checksum (about 0.5 CPU s per million trials):
        the caller checks them with ``verify()`` before it trusts a value (``trialgrid view`` shows its first
        page meanwhile, then refuses a damaged part as every reader does).
        """
        path = Path(path)
        if manifest is None:
            manifest = require_manifest(path)
        trials_dir = path / TRIALS_DIR
        survey = survey_parts(trials_dir, manifest.sweep_id, verify)
        if strict:
            refuse_issues(trials_dir, survey.issues)
        return cls(path, manifest, tuple(survey.parts), tuple(survey.issues), tuple(survey.records))

    def verify(self) -> None:
        """Check every counted part's checksums (what ``open`` skips with ``verify=False``): a damaged part is the
        one-line ``UserError`` a strict ``open`` raises."""
        refuse_issues(self.trials_dir, damaged_parts(self.parts))

    @property
    def trials_dir(self) -> Path:
        return self.path / TRIALS_DIR

    def set_aside(self) -> dict[str, int]:
        """How many files a rerun moved out of the trials, by why: ``damaged`` parts (their verified batches were
        kept as a new part, the rest re-run) and ``foreign`` ones (another sweep's). Nothing here is read."""
        found: dict[str, int] = {}
        for why in (DAMAGED_DIR, FOREIGN_DIR):
            folder = self.trials_dir / why
            if folder.is_dir():
                with os.scandir(folder) as entries:
                    count = sum(1 for e in entries if e.is_file(follow_symlinks=False))
                if count:
                    found[why] = count
        return found

    @property
    def prices(self) -> dict[str, ModelPrice]:
        """The prices in force when the run last ran (the manifest's sweep snapshot)."""
        return prices_from(self.manifest.sweep.prices)

    def scan(self) -> pl.LazyFrame:
        """Every trial once, its newest row, lazily; ``UserError`` when the output has no finished part yet."""
        if not self.parts:
            raise UserError(f"no finished trial files in {self.trials_dir}",
                            hint="run a sweep into this directory first; a crashed run is repaired by rerunning it")
        return self._latest

    @property
    def unique(self) -> bool | None:
        """Whether the parts' records prove each trial is one row (True), say a retry superseded rows (False),
        or prove nothing (None: a part without a record; then the rows are counted). ``runner.output.parts``."""
        return recorded_unique(self.records, self.manifest) if len(self.records) == len(self.parts) else None

    @cached_property
    def _latest(self) -> pl.LazyFrame:
        # the lazy plan, built once; without a record that proves uniqueness, deciding it reads every trial id
        return scan_latest(list(self.parts), self.unique, self.records)

    def blobs(self) -> Blobs:
        """The content the rows' recorded calls name by id (``call_blobs``), from *every* row of every part: a
        batch's first row naming a blob may be one a newer row of its trial supersedes. Empty for trials imported without calls."""
        import polars as pl

        blobs = Blobs()
        for part in self.parts:
            frame = pl.scan_ipc(str(part), glob=False)  # literal path: OUT may hold [ or *
            if "call_blobs" not in frame.collect_schema().names():
                continue  # imported trials record no calls
            found = (frame.select(pl.col("call_blobs").explode()).drop_nulls().unnest("call_blobs")
                     .unique("id", keep="first").collect())
            blobs.add(found.iter_rows(named=True))
        return blobs

    def counts(self) -> dict[str, int]:
        """Rows by status, each trial once (empty for an output without parts)."""
        return self.tally.by_status() if self.parts else {}

    @cached_property
    def tally(self) -> Tally:
        """Each trial's ending counted once (``runner.output.tally``): read from the parts with Arrow when their
        records prove each trial one row, else from ``scan``; read once, shared by ``counts`` and the verdict."""
        return tally_parts(self.parts) if self.unique else tally_scan(self.scan())

    def usage(self, prices: Mapping[str, ModelPrice] | None = None, by: tuple[str, ...] = ("model",),
              frame: pl.LazyFrame | None = None) -> pl.DataFrame:
        """Trials, errors, tokens and cost per model (``runner.config.cost.usage_by_model``), each trial once;
        ``prices`` default to the manifest's; ``frame``: a filtered ``scan()`` (e.g. one probe's trials)."""
        return usage_by_model(self.scan() if frame is None else frame, self.prices if prices is None else prices, by)

    def spend(self, prices: Mapping[str, ModelPrice] | None = None) -> Spend:
        """Dollars and tokens of every trial once (its newest row: a retried error is paid once, by its retry)."""
        if not self.parts:
            return Spend(0.0, 0)
        usage = self.usage(prices)
        return Spend(float(usage["cost_usd"].fill_null(0.0).sum()),
                     int(usage["input_tokens"].sum()) + int(usage["output_tokens"].sum()))


def as_output(output: Output | str | Path) -> Output:
    """An ``Output`` as is; a path opened (for notebooks and tests: the command line opens once and passes it)."""
    return output if isinstance(output, Output) else Output.open(output)


def spent_in(trials_dir: Path, prices: Mapping[str, ModelPrice], manifest: Manifest | None = None) -> tuple[float, int]:
    """(USD, tokens) already spent in an output (for a resume's budget), by the readers' rules: own readable
    parts, each trial once. ``trials_dir`` is the output's ``trials/``; ``manifest``: the one the writer holds."""
    spend = Output.open(Path(trials_dir).parent, manifest=manifest, strict=False).spend(prices)
    return spend.usd, spend.tokens
