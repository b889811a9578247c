"""The probe seam: what every experiment kind declares, builds and scores.

A probe owns its case files, its conditions and its outcome columns. The engine
only ever sees ``cells()`` (the (case, condition) pairs to run), ``run(spec, agent)``
(one trial → a dict of outcome columns) and ``outcome_fields`` (their names and types, ``runner.core.columns``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

from runner.core.columns import Column
from runner.core.errors import UserError
from runner.core.types import Message, TrialSpec
from runner.providers.base import Agent

if TYPE_CHECKING:
    import polars as pl

    from runner.core.manifest import Manifest
    from runner.core.views import ProbeView


class ReadableOutput(Protocol):
    """What a probe's views read of a run: ``runner.output.Output`` (opened once by the command, a layer above
    probes, so the views name only this shape). Views read; they never write into ``path``."""

    @property
    def path(self) -> Path: ...

    @property
    def manifest(self) -> Manifest: ...

    def scan(self) -> pl.LazyFrame:
        """Every trial of the run once, its newest row."""
        ...


class ProbeConfig(BaseModel):
    """Keys every probe entry of a sweep accepts; each probe adds its own."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str
    name: str | None = Field(default=None, description="label in the output; defaults to kind")
    runs: int = Field(default=5, ge=1, le=1_000_000, description="trials per (model, case, condition) cell")
    conditions: list[str] | None = Field(default=None, description="subset of the probe's conditions; default all")

    #: the conditions this probe kind knows: its probe's ``all_conditions``, copied here when the probe class is
    #: defined (``Probe.__init_subclass__``), so a kind declares its conditions once
    known_conditions: ClassVar[tuple[str, ...]] = ()
    #: how an error names the valid conditions, when listing them all would not help
    conditions_hint: ClassVar[str | None] = None

    @field_validator("conditions")
    @classmethod
    def _known_conditions(cls, value: list[str] | None) -> list[str] | None:
        if value is not None:
            if not value:
                raise ValueError("conditions must not be empty (omit the key for all of them)")
            bad = [c for c in value if c not in cls.known_conditions]
            if bad:
                expected = cls.conditions_hint or f"some of {', '.join(cls.known_conditions)}"
                raise ValueError(f"unknown condition {bad[0]!r}: expected {expected}")
        return value


class Contrast(BaseModel):
    """Two arms of conditions a probe compares (arm A minus arm B) on one outcome."""

    model_config = ConfigDict(frozen=True)
    label: str
    outcome: str
    arm_a: tuple[str, ...]
    arm_b: tuple[str, ...]


@dataclass(frozen=True)
class AnswerKey:
    """A request a probe will make, and the probe's record of the case whose key says what passes it.

    The oracle persona (``runner/sim/oracle.py``) answers from these, so it reads a probe through the seam, never
    its internals. ``case`` is the probe's own case type (a negative case, a misselection triple, a phantom trace,
    a propagation task); the oracle knows each. ``opening`` marks a multi-step probe's key: the messages open a
    conversation that later requests extend (with the agent's calls and their results).
    """

    messages: tuple[Message, ...]
    tool_names: frozenset[str]
    case: object
    opening: bool = False


class Probe(ABC):
    #: the config's ``kind`` literal, set when the class is defined (never declared twice)
    kind: ClassVar[str]
    config_model: ClassVar[type[ProbeConfig]]
    all_conditions: ClassVar[tuple[str, ...]]
    #: outcome columns this probe writes, beside the common ones
    outcome_fields: ClassVar[tuple[Column, ...]]
    #: boolean outcome columns the report shows as rates; the first is the headline
    rates: ClassVar[tuple[str, ...]]
    #: rates whose ``true`` is the behaviour wanted (called the right tool, asked for what was missing, passed):
    #: the viewer colours each flag by what it means, not by its value
    good_rates: ClassVar[tuple[str, ...]] = ()
    #: the comparisons the report tests, cluster by cluster
    contrasts: ClassVar[tuple[Contrast, ...]] = ()
    #: rates about what the model sent (empty replies, broken calls, calls read from text, the grounding of its
    #: values): reported like any rate, but another harness's data may lack them, so ``import trials`` leaves them
    #: null when unmapped
    reply_rates: ClassVar[tuple[str, ...]] = ()
    #: a starter case file, written by ``trialgrid template KIND``
    template: ClassVar[str] = ""
    #: asks the model exactly once per trial, so one batch-API answer is the whole trial (batch mode runs only these)
    single_turn: ClassVar[bool] = False

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        config = cls.__dict__.get("config_model")
        if config is None:
            return
        # the kind is declared once, as the config's `kind: Literal["NAME"]` (the sweep's tag for this entry)
        (kind,) = get_args(config.model_fields["kind"].annotation)
        cls.kind = kind
        # the conditions are declared once, on the probe; its config validates `conditions:` against them
        if "all_conditions" in cls.__dict__:
            config.known_conditions = tuple(cls.all_conditions)

    def __init__(self, config: ProbeConfig, base_dir: Path, locate: Callable[[str, str], UserError] | None = None) -> None:
        self.config = config
        self.name = config.name or self.kind
        self.base_dir = base_dir
        self.warnings: list[str] = []
        self.conditions: tuple[str, ...] = tuple(config.conditions) if config.conditions else self.all_conditions
        self._cells: list[tuple[str, str]] = []

    @property
    def runs(self) -> int:
        return self.config.runs

    def cells(self) -> Iterator[tuple[str, str]]:
        """(case id, condition) pairs, in a stable order: the ``_cells`` a probe built when it loaded."""
        return iter(self._cells)

    @property
    def n_cells(self) -> int:
        return len(self._cells)

    @abstractmethod
    def identity(self) -> dict[str, Any]:
        """What, beyond the config, makes this probe's trials what they are (file hashes)."""

    @abstractmethod
    async def run(self, spec: TrialSpec, agent: Agent) -> dict[str, Any]:
        """Run one trial and return its outcome columns."""

    def answer_keys(self) -> Iterator[AnswerKey]:
        """Every request this probe makes, with its case's key (``AnswerKey``); none for a probe whose cases have no
        answer an oracle could give. Requests that differ only in the order tools are offered are one key."""
        return iter(())

    @classmethod
    def views(cls, output: ReadableOutput, probe_name: str, *, seed: int) -> list[ProbeView]:
        """What the generic rates table cannot show, as data (``output.scan()``: the run's trials, lazily).

        Called once per run by ``runner.analysis.leaderboard.summarize``; every report format
        draws the views it returns (``runner.core.views``). ``seed`` is the run's
        seed, for intervals that follow it. Most probes need nothing more.
        """
        return []
