"""``OUT/manifest.json`` as a typed record: what was run, by what, when, and how it ended.

Every output directory (a run, a rescore, an import) has one manifest. It used to be
a plain dict built in several places and read through ``.get()`` chains; this module
is its one definition, so writers and readers agree on every key and a damaged file
fails in one place with one located line.

The record is the bottom layer: it imports nothing of ``runner`` but ``runner.core``.
Creating a manifest from a loaded sweep is ``runner.output.manifest``'s job (it may
know the config); analysis, probes and reporting only read it, through this module.

``format_version`` is the version of the whole output: 2 is what trialgrid 0.2.0
writes (its trial rows carry every model call: the ``calls`` and ``call_blobs``
columns, ``runner.core.calls``). An output of another version is refused in one
line: one from before 0.2.0 was never released, and a newer one needs a newer
trialgrid. Rewriting a manifest keeps its keys; two rules keep it so:

* a key a writer never set is not written: an optional field left at its ``None``
  default is omitted, while one set to ``None`` (``"finished_at": null`` of a running
  session) is written as null — as the dicts did;
* unknown keys are ignored on read (a newer trialgrid's additions do not crash an
  older reader), except in the three records that copy another layer's open data
  verbatim — the sweep snapshot, its models, and a probe's identity — which keep them.

A change of shape bumps ``FORMAT_VERSION``; ``_check_version`` says which versions
read.

A plug-in's records are not the core's: each session has an ``extensions`` slot, one
JSON object per plug-in name, kept verbatim here and validated by the plug-in that wrote
it (cluster mode: ``cluster.records``).
"""

from __future__ import annotations

import errno
import json
import os
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
)

from runner.core.errors import UserError
from runner.core.redact import scrub_value
from runner.core.safety import printable_label, read_capped
from runner.core.sources import Source, load_source, validate

MANIFEST = "manifest.json"
#: the on-disk shape this version writes and reads (no other is read)
FORMAT_VERSION = 2

_HINT = "restore it, or start the sweep in an empty --out directory"


class ManifestRecord(BaseModel):
    """Base of every part of the manifest: mutable (a run updates it), checked on assignment."""

    model_config = ConfigDict(extra="ignore", validate_assignment=True)

    @model_serializer(mode="wrap")
    def _omit_unset_nulls(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # today's files leave a key out until it is known; a default None must not become a written null
        data: dict[str, Any] = handler(self)
        for name in type(self).model_fields:
            if name not in self.model_fields_set and name in data and data[name] is None:
                del data[name]
        return data

    def as_json(self) -> dict[str, Any]:
        """Plain JSON data, as the manifest file holds it."""
        return self.model_dump(mode="json")


class _OpenRecord(ManifestRecord):
    """A record copied verbatim from another layer: keys it does not model are kept, not dropped."""

    model_config = ConfigDict(extra="allow", validate_assignment=True)


class ModelSnapshot(_OpenRecord):
    """One model of the sweep, as ``runner.config`` validated it (keys beyond these are kept as written)."""

    name: str = Field(description="the model's label in the output's rows (unique within the sweep)")
    provider: str = Field(description="provider name (sim, openai, anthropic, callable; an import's source name)")
    model: str | None = Field(default=None, description="model id sent to the provider; None means the label")

    @field_validator("name")
    @classmethod
    def _label(cls, value: str) -> str:
        # read back from a directory anyone may have written: it becomes terminal text and file names
        return printable_label(value, "model name")

    @property
    def model_id(self) -> str:
        """The model id the provider was asked for (what remedies are keyed on)."""
        return self.model or self.name


class BudgetSnapshot(ManifestRecord):
    """The spending caps in force during the last session."""

    usd: float | None = Field(default=None, description="dollar cap, from token counts and the sweep's prices")
    tokens: int | None = Field(default=None, description="cap on input + output tokens over all models")


class SweepSnapshot(_OpenRecord):
    """The validated sweep (``Sweep.model_dump(mode="json")``); an import writes only ``name`` and ``models``.

    ``runner.config`` owns this shape: keys it adds later are kept verbatim.
    """

    name: str | None = Field(default=None, description="the sweep's name")
    seed: int | None = Field(default=None, description="the sweep's base seed")
    output: str | None = Field(default=None, description="the sweep's default output directory")
    models: list[ModelSnapshot] = Field(default_factory=list, description="the models under test, in sweep order")
    probes: list[dict[str, Any]] | None = Field(default=None, description="the probes' configurations, as written")
    engine: dict[str, Any] | None = Field(default=None, description="engine settings (concurrency, timeouts, ...)")
    prices: dict[str, dict[str, float | str | None]] | None = Field(
        default=None, description="per model label: USD per million input/output tokens (last session's), and the "
                                  "source of a list price (the table and its version)")
    budget: BudgetSnapshot | None = Field(default=None, description="spending caps (last session's); null for none")
    cache: str | None = Field(default=None, description="the response cache directory the sweep names")


class McpCatalogueRecord(ManifestRecord):
    """The tool catalogue an MCP server listed, so the output says what the agents were shown."""

    command: list[str] = Field(description="the server's command line")
    server: dict[str, str | None] = Field(default_factory=dict, description="serverInfo: name and version")
    protocol_version: str | None = Field(default=None, description="the MCP protocol version the server answered")
    pages: int = Field(default=1, description="how many tools/list pages the catalogue took")
    sha256: str = Field(description="sha256 of the catalogue's canonical JSON")
    tools: list[dict[str, Any]] = Field(default_factory=list,
                                        description="the tools in plain catalogue form (name, description, parameters)")


class ProbeRecord(_OpenRecord):
    """One probe of the run: its kind and what, beyond the config, made its trials (``Probe.identity()``).

    A probe kind may add identity keys; those not modelled here are kept verbatim.
    """

    kind: str = Field(description="the probe kind (misselection, negative, phantom, propagation, judge, ...)")
    cases_sha256: str | None = Field(default=None, description="sha256 of the case file")
    catalogue_sha256: str | None = Field(default=None, description="sha256 of the tool catalogue")
    traces_sha256: str | None = Field(default=None, description="sha256 of the trace file (phantom, judge)")
    tasks_sha256: dict[str, str] | None = Field(default=None, description="per domain: sha256 of its task file")
    human_labels: list[str] | None = Field(
        default=None, description="human label files (judge); relative paths are relative to the output")
    ensemble: list[str] | None = Field(default=None, description="the judge ensemble's model labels")
    mcp_catalogue: McpCatalogueRecord | None = Field(default=None, description="the catalogue an MCP server served")
    source_sha256: str | None = Field(default=None, description="sha256 of the imported trials file")
    rates: list[str] | None = Field(default=None, description="an imported probe's outcome rates (unknown kind)")
    conditions: list[str] | None = Field(default=None, description="an imported probe's conditions, in order")
    contrasts: list[dict[str, Any]] | None = Field(
        default=None, description="an imported probe's contrasts (runner.probes.base.Contrast as JSON)")


class RemedyRecord(ManifestRecord):
    """A request-parameter change learned from a server's rejection (``Learned.as_json``)."""

    provider: str = Field(description="provider the rejection came from")
    endpoint: str = Field(description="the provider endpoint (base URL)")
    model_id: str = Field(description="model id the remedy applies to")
    action: str = Field(description="drop, rename or set")
    param: str = Field(description="the request parameter changed")
    remedy: str = Field(description="the change in words, e.g. 'drop temperature'")
    server_message: str = Field(description="what the server said")
    learned_at: str = Field(description="when it was learned (ISO 8601, UTC)")
    new_name: str | None = Field(default=None, description="rename: the parameter's new name")
    value: Any = Field(default=None, description="set: the value the parameter is set to")


class CacheStats(ManifestRecord):
    """What the response cache did during one session."""

    dir: str = Field(description="the cache directory")
    hits: int = Field(description="requests answered from the cache")
    misses: int = Field(description="requests sent to the model")
    stored: int = Field(description="answers stored for a rerun")


class RunStatus(StrEnum):
    """How a session (and so the output, as of its last session) stands; written as the bare string.

    A ``StrEnum``: each member *is* its string, so the manifest keeps writing ``"complete"``
    and every output written before the enum reads unchanged (the fields stay ``str``).
    """

    RUNNING = "running"
    COMPLETE = "complete"
    #: a rescore that found no stored row for some cells of the new sweep
    PARTIAL = "partial"
    #: ended by an exception or a signal once trials had started: rerun to resume
    INTERRUPTED = "interrupted"
    #: the budget stopped it (``SessionRecord.stopped`` says how); raise ``budget`` and rerun
    STOPPED_BUDGET = "stopped_budget"
    #: failed before any trial started (a provider or cache that could not be set up)
    FAILED = "failed"
    #: a session a kill left ``running``, as the next session found it
    CRASHED = "crashed"


class SessionRecord(ManifestRecord):
    """One process's pass over the output: a run, or a resume of it."""

    started_at: str = Field(description="when the session started (ISO 8601, UTC)")
    finished_at: str | None = Field(default=None, description="when it ended; null while running or after a crash")
    pid: int = Field(description="process id")
    host: str = Field(description="host name")
    status: str = Field(description="running, complete, partial, interrupted, stopped_budget, failed, or crashed "
                                    "(a session a kill left running, as the next session found it)")
    trials_run: int = Field(default=0, description="trial rows this session wrote")
    stopped: str | None = Field(default=None, description="why the session stopped before the grid was done "
                                                          "(a budget reached, a batch refused or cut to fit)")
    retry_errors: list[str] | None = Field(default=None, description="--retry-errors: the error kinds re-attempted")
    picks: list[str] | None = Field(default=None, description="a try's --case and --limit flags: it ran a part of "
                                                              "the grid")
    elapsed_s: float | None = Field(default=None, description="wall-clock seconds, once finished")
    cache: CacheStats | None = Field(default=None, description="response cache counts, when a cache was used")
    extensions: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="per plug-in (e.g. 'ray'): its own record of the session, kept verbatim "
                                          "here and validated by the plug-in that wrote it")

    @field_validator("extensions")
    @classmethod
    def _extension_names(cls, value: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for name in value:  # read back from a directory anyone may have written: each name becomes terminal text
            printable_label(name, "extension name")
        return value

    @model_serializer(mode="wrap")
    def _omit_empty_extensions(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # a session no plug-in wrote into keeps the shape it had before the slot existed
        data: dict[str, Any] = self._omit_unset_nulls(handler)
        if not data.get("extensions"):
            data.pop("extensions", None)
        return data


class ImportRecord(ManifestRecord):
    """Where an imported run's rows came from (``trialgrid import``)."""

    source: str = Field(description="the source's name (a benchmark, or the file as given)")
    path: str = Field(description="the source's absolute path")
    files: dict[str, str] | None = Field(default=None, description="per source file: its sha256")
    sha256: str | None = Field(default=None, description="the source file's sha256 (single-file imports)")
    mapping: dict[str, Any] | None = Field(default=None, description="how the file's columns became trial fields")
    caveat: str | None = Field(default=None, description="what the source does not say, carried to the reader")


class RescoredFrom(ManifestRecord):
    """The output a rescore took its stored answers from, and what rescoring changed."""

    out: str = Field(description="the source output directory")
    sweep_id: str | None = Field(default=None, description="the source's sweep id")
    sweep_sha256: str | None = Field(default=None, description="the source's sweep file hash")
    sweep_file: str | None = Field(default=None, description="the source's sweep file")
    probes: dict[str, ProbeRecord] | None = Field(default=None, description="the source's probes")
    rows: int = Field(description="rows written")
    changed: int = Field(description="ok rows whose outcome changed")
    errors_kept: int = Field(description="error rows carried over as they were")
    dropped: int = Field(description="source rows with no cell in the new sweep")
    missing: int = Field(description="cells of the new sweep with no stored row")


class BatchRecord(ManifestRecord):
    """One provider batch of a batch-mode run (the ledger keeps its trial list)."""

    label: str = Field(description="trialgrid's label of the batch")
    model: str = Field(description="the model label it ran")
    provider: str = Field(description="the provider it was sent to")
    id: str | None = Field(default=None, description="the provider's batch id, once submitted")
    state: str = Field(description="trialgrid's state of the batch (submitted, collected, ...)")
    vendor_status: str | None = Field(default=None, description="the provider's last reported status")
    requests: int = Field(description="requests in the batch")


class Manifest(ManifestRecord):
    """The manifest of one output directory."""

    format_version: int = Field(description="the shape of this file (see FORMAT_VERSION)")
    sweep_name: str = Field(description="the sweep's name (an import's own name)")
    sweep_id: str = Field(description="the sweep's identity hash: a resume must match it")
    sweep_sha256: str | None = Field(default=None, description="sha256 of the sweep file; null for an import")
    sweep_file: str | None = Field(default=None, description="the sweep file's path; null for an import")
    sweep: SweepSnapshot = Field(default_factory=SweepSnapshot, description="the validated sweep")
    probes: dict[str, ProbeRecord] = Field(description="per probe name: its kind and identity")
    seed: int = Field(default=0, description="the sweep's base seed (analysis seeds its resampling from it)")
    trials_total: int = Field(default=0, description="trials in the sweep's grid")
    versions: dict[str, str] = Field(default_factory=dict,
                                     description="python and package versions of the last session")
    remedies: list[RemedyRecord] = Field(default_factory=list, description="parameter remedies learned, in order")
    imported: ImportRecord | None = Field(default=None, description="for an import: where the rows came from")
    rescored_from: RescoredFrom | None = Field(default=None, description="for a rescore: the source output")
    created_at: str | None = Field(default=None, description="when the output was created (ISO 8601, UTC)")
    sessions: list[SessionRecord] = Field(default_factory=list, description="every session, oldest first")
    counts: dict[str, int] = Field(default_factory=dict, description="rows by status, as of the last session")
    status: str = Field(description="the last session's status (see SessionRecord.status)")
    finished_at: str | None = Field(default=None, description="when the last session ended")
    strict_params: bool | None = Field(default=None, description="whether remedies were off in the last session")
    cache_hits: int | None = Field(default=None, description="requests answered from a response cache, all sessions")
    batch_models: list[str] | None = Field(default=None, description="batch mode: the models sent as batches")
    batches: list[BatchRecord] | None = Field(default=None, description="batch mode: the provider batches")

    @field_validator("probes")
    @classmethod
    def _probe_labels(cls, value: dict[str, ProbeRecord]) -> dict[str, ProbeRecord]:
        # read back from a directory anyone may have written: each name becomes terminal text and file names
        for name in value:
            printable_label(name, "probe name")
        return value

    def remedies_of(self, model: ModelSnapshot) -> list[RemedyRecord]:
        """The remedies that apply to one model of the sweep (matched on provider and model id)."""
        return [r for r in self.remedies if r.provider == model.provider and r.model_id == model.model_id]

    def sweep_path(self, output_dir: Path) -> Path | None:
        """The sweep file this output was run from, found from wherever the reader runs (None for an import).

        Runs write the absolute path; an output written with a path relative to where the run was started is
        looked for there (the current folder), then in each folder above the output: a reader started
        elsewhere (the viewer, ``report --findings``, ``rescore``) still finds the case files beside it."""
        if self.sweep_file is None:
            return None
        given = Path(self.sweep_file)
        if given.is_absolute() or given.is_file():
            return given
        for folder in Path(output_dir).resolve().parents:
            if (folder / given).is_file():
                return folder / given
        return given


def _check_version(data: Any, path: Path) -> None:
    """Refuse a manifest of another ``format_version`` than ``FORMAT_VERSION``, in one line."""
    if not isinstance(data, dict):
        return  # the model's validation says what is wrong
    version = data.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version == FORMAT_VERSION:
        return
    if version > FORMAT_VERSION:
        raise UserError(f"manifest format {version} is newer than this trialgrid reads ({FORMAT_VERSION})",
                        file=path, key_path=("format_version",), hint="upgrade trialgrid to read this output")
    raise UserError(f"manifest format {version} was written before trialgrid 0.2.0, which reads format "
                    f"{FORMAT_VERSION} only", file=path, key_path=("format_version",),
                    hint="run the sweep again into a new output directory")


def read_manifest_file(path: Path) -> Manifest:
    """Read and check one manifest file; anything wrong is a one-line ``UserError`` naming the file and key."""
    # a regular file within the input cap, never a device or a FIFO (/dev/zero reads for ever, a FIFO blocks)
    raw = read_capped(path, what="run manifest")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"cannot read the run manifest: {exc}", file=path, hint=_HINT) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"the run manifest is not valid JSON: {exc.msg}", file=path, line=exc.lineno,
                        hint=_HINT) from None
    except RecursionError:
        raise UserError("the run manifest nests too deep to be one", file=path, hint=_HINT) from None
    _check_version(data, path)
    try:
        return Manifest.model_validate(data)
    except ValidationError:
        pass
    # a damaged file only: parse it again for the line of every key, and let ``validate`` locate the error
    try:
        lines = load_source(path, what="run manifest").lines
    except UserError:
        lines = {}
    try:
        validate(Manifest, data, Source(path=path, data=data, lines=lines))
    except UserError as exc:
        exc.message = f"damaged run manifest: {exc.message}"
        exc.hint = _HINT
        raise
    raise AssertionError("a manifest that failed validation passed it the second time")  # pragma: no cover


def read_manifest(out: Path) -> Manifest | None:
    """The manifest of output directory ``out``; None when it has none. Raises ``UserError`` for a damaged one."""
    path = out / MANIFEST
    if not path.exists():
        return None
    return read_manifest_file(path)


def require_manifest(out: Path) -> Manifest:
    """The manifest of the run at ``out``, for a reader (report, diff, ``--fail-on``, rescore); when ``out`` is not
    a run's output, a one-line ``UserError`` saying what it is instead — missing, a file, a folder of runs."""
    manifest = read_manifest(out)
    if manifest is not None:
        return manifest
    hint = "give the directory a `trialgrid run` wrote: the sweep's `output`, or its --out"
    if not out.exists():
        raise UserError("no such directory: not a trialgrid output directory", file=out, hint=hint)
    if not out.is_dir():
        raise UserError("a file, not a trialgrid output directory", file=out, hint=hint)
    try:
        runs = sorted(p.name for p in out.iterdir() if (p / MANIFEST).is_file())
    except OSError:
        runs = []
    if runs:
        shown = ", ".join(runs[:5]) + (f" and {len(runs) - 5} more" if len(runs) > 5 else "")
        raise UserError(f"a folder of trialgrid output directories ({shown}), not one itself", file=out,
                        hint=f"name the runs inside it, e.g. {out / runs[0]}")
    raise UserError(f"no {MANIFEST}: not a trialgrid output directory", file=out, hint=hint)


def write_manifest(out: Path, manifest: Manifest) -> None:
    """Write ``out/manifest.json`` atomically (temp file + rename): a crash never leaves half a manifest."""
    path = out / MANIFEST
    tmp = path.with_suffix(".json.tmp")
    try:
        # every key of the run scrubbed (runner/core/redact.py): a sweep's settings or a message may hold one
        tmp.write_text(json.dumps(scrub_value(manifest.as_json()), indent=2, sort_keys=False) + "\n")
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)  # a full disk leaves the old manifest, never a 0-byte temp beside it
        if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
            raise UserError("no space left on the device to write the run manifest", file=path,
                            hint="free some space and rerun the same command: written trials are kept") from None
        raise
