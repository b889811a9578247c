"""The sweep file: what a user writes to describe a grid of trials.

``load_sweep`` reads the YAML, validates it with pydantic (unknown keys are errors),
loads every probe's case files, and returns a ``LoadedSweep`` whose ``sweep_id`` is
a hash of everything that decides *what* is measured — models, probes, seed and the
content of case files — but not *where* or *how fast* (output, engine options), so
the same sweep written to two directories has the same trial ids.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from runner.errors import UserError
from runner.probes import PROBES, Probe
from runner.providers import check_model
from runner.sources import Source, load_source, register_union_tags, validate

register_union_tags(PROBES)
ProbeEntry = Annotated[Union[tuple(p.config_model for p in PROBES.values())], Field(discriminator="kind")]  # type: ignore[valid-type]


class ModelConfig(BaseModel):
    """One model under test."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, description="label in the output (unique within the sweep)")
    provider: str = Field(description="sim (built-in simulated agent)")
    model: str | None = Field(default=None, description="model id sent to the provider; defaults to name")
    params: dict[str, Any] = Field(default_factory=dict, description="request parameters (temperature, max_tokens, ...)")
    concurrency: int = Field(default=16, ge=1, le=100_000, description="max trials of this model in flight")

    @property
    def model_id(self) -> str:
        return self.model or self.name

    @model_validator(mode="after")
    def _provider_knows_model(self) -> "ModelConfig":
        check_model(self.provider, self.model_id)
        return self


class EngineConfig(BaseModel):
    """How the run executes; not part of the sweep's identity."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    concurrency: int = Field(default=256, ge=1, le=100_000, description="max trials in flight overall")
    timeout_s: float = Field(default=120.0, gt=0, description="per-trial deadline (all calls of the trial)")
    batch_rows: int = Field(default=4096, ge=1, description="rows per Arrow record batch")
    flush_seconds: float = Field(default=2.0, gt=0, description="flush a partial batch after this long")


class Sweep(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    seed: int = Field(default=0, ge=0, le=2**63 - 1)
    output: str = Field(default="out", description="output directory, relative to the current directory")
    models: list[ModelConfig] = Field(min_length=1)
    probes: list[ProbeEntry] = Field(min_length=1)  # type: ignore[valid-type]
    engine: EngineConfig = Field(default_factory=EngineConfig)

    @field_validator("models")
    @classmethod
    def _unique_models(cls, models: list[ModelConfig], info: ValidationInfo) -> list[ModelConfig]:
        names = [m.name for m in models]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup:
            raise ValueError(f"model name {dup!r} is used twice; names label rows and must be unique")
        return models

    @field_validator("probes")
    @classmethod
    def _unique_probes(cls, probes: list[Any]) -> list[Any]:
        names = [p.name or p.kind for p in probes]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup:
            raise ValueError(f"probe name {dup!r} is used twice; give each probe entry a distinct 'name'")
        return probes


@dataclass
class LoadedSweep:
    """A validated sweep with its probes' case files loaded."""

    sweep: Sweep
    path: Path
    probes: list[Probe]
    sweep_id: str
    sweep_sha256: str
    warnings: list[str] = field(default_factory=list)

    @property
    def schema_fields(self) -> list:
        """Outcome fields of all probes (one table for the whole sweep)."""
        seen: dict[str, Any] = {}
        for probe in self.probes:
            for f in probe.outcome_fields:
                if f.name in seen and not seen[f.name].type.equals(f.type):
                    raise UserError(f"probes disagree on the type of outcome column {f.name!r}")
                seen.setdefault(f.name, f)
        return list(seen.values())


def _sweep_identity(sweep: Sweep, probes: list[Probe]) -> str:
    what = sweep.model_dump(mode="json", exclude={"output", "engine"})
    for m in what["models"]:
        m.pop("concurrency", None)  # how fast, not what
    what["probe_files"] = [p.identity() for p in probes]
    blob = json.dumps(what, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def load_sweep(path: Path | str) -> LoadedSweep:
    """Read and check a sweep file and everything it names. Raises ``UserError``."""
    path = Path(path)
    source: Source = load_source(path, what="sweep file")
    if not isinstance(source.data, dict):
        raise UserError("a sweep file must be a mapping with keys name, models, probes", file=path, line=1)
    sweep: Sweep = validate(Sweep, source.data, source)
    base = path.parent
    probes: list[Probe] = []
    for i, entry in enumerate(sweep.probes):
        def locate(key: str, message: str, _i: int = i) -> UserError:
            loc = ("probes", _i, key)
            return UserError(message, file=path, line=source.line_of(loc), key_path=loc)

        for key in ("cases", "catalogue"):
            value = getattr(entry, key, None)
            if value is not None and not (base / value).is_file():
                raise locate(key, f"file not found: {value} (resolved to {base / value})")
        probes.append(PROBES[entry.kind](entry, base, locate))
    warnings = [w for p in probes for w in p.warnings]
    loaded = LoadedSweep(sweep, path, probes, _sweep_identity(sweep, probes), source.sha256, warnings)
    loaded.schema_fields  # noqa: B018 — surface column type conflicts at load time
    return loaded
