"""The sweep file: what a user writes to describe a grid of trials.

``load_sweep`` reads the YAML, validates it with pydantic (unknown keys are errors),
loads every probe's case files, and returns a ``LoadedSweep`` whose ``sweep_id`` is
a hash of everything that decides *what* is measured — models, probes, seed and the
content of case files — but not *where* or *how fast* (output, engine options), so
the same sweep written to two directories has the same trial ids.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import shlex
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)

import runner.sim  # noqa: F401  (registers the built-in "sim" provider)
from runner.config.cost import Budget, ModelPrice, with_list_prices
from runner.config.lint import lint_probes
from runner.core.columns import Column
from runner.core.errors import UserError, warn
from runner.core.gates import parse_gate
from runner.core.messages import note
from runner.core.redact import remember_env
from runner.core.safety import check_regular_file, check_target_path, printable_label
from runner.core.sources import Source, load_source, register_union_tags, validate
from runner.core.types import ChatRequest
from runner.probes import PROBES, Probe, ProbeConfig
from runner.providers import CONFIGURED, check_model
from runner.providers.callable_provider import load_function, source_digest
from runner.providers.estimate import estimate_usage
from runner.providers.secrets import unsendable_key
from runner.providers.settings import (
    BATCH_PROVIDERS,
    DEFAULT_KEY_ENV,
    Connection,
    Limits,
    RetryPolicy,
    check_base_url,
    check_headers,
    check_json_numbers,
    is_loopback,
    redact_url,
)
from runner.providers.textcalls import ToolCallParser

register_union_tags(PROBES)
if TYPE_CHECKING:  # to a type checker an entry is its base class; pydantic validates the union of the registered probes
    ProbeEntry = ProbeConfig
else:
    ProbeEntry = Annotated[Union[tuple(p.config_model for p in PROBES.values())], Field(discriminator="kind")]  # noqa: UP007 (a runtime union)


class ModelConfig(BaseModel):
    """One model under test."""

    # allow_inf_nan: a timeout of .inf overflows every deadline, a NaN compares false with everything
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    name: str = Field(min_length=1, description="label in the output (unique within the sweep)")
    provider: str = Field(description="sim (built-in simulated agent), openai, openai-responses, anthropic, "
                          "azure-openai, gemini, vertex, bedrock or callable")
    model: str | None = Field(default=None, description="model id sent to the provider; defaults to name")
    params: dict[str, Any] = Field(default_factory=dict, description="request parameters (temperature, max_tokens, ...)")
    concurrency: int = Field(default=16, ge=1, le=100_000, description="max trials of this model in flight")
    mode: Literal["live", "batch"] = Field(default="live", description="live: one request per trial as it runs; "
                                           "batch: the vendor's batch API (openai, openai-responses, anthropic, gemini; see runner/execution/backends/batch)")
    # -- real providers (openai, anthropic, callable); see runner/providers/settings.py
    base_url: str | None = Field(default=None, description="endpoint; default the vendor's public API")
    api_key_env: str | None = Field(default=None, description="environment variable holding the API key "
                                    "(default OPENAI_API_KEY / ANTHROPIC_API_KEY; null: send no key)")
    headers: dict[str, str] = Field(default_factory=dict, description="extra request headers (never credentials)")
    api_version: str | None = Field(default=None, min_length=1, description="azure-openai: the api-version of the "
                                    "deployments API (/openai/deployments/MODEL/...?api-version=...); unset: Azure's "
                                    "v1 API (/openai/v1/...)")
    function: str | None = Field(default=None, description="provider callable: module:function (the sweep file's "
                                "folder is on the import path)")
    version: str | None = Field(default=None, min_length=1, description="provider callable: the version of your "
                                "agent's code, part of the sweep's identity (default: the sha256 of the function's "
                                "module file; set it when the agent spans several files)")
    timeout_s: float = Field(default=60.0, gt=0, le=86_400, description="per-request timeout")
    limits: Limits = Field(default_factory=Limits, description="per provider key: max_concurrent, rpm, tpm")
    retry: RetryPolicy = Field(default_factory=RetryPolicy, description="max_attempts, backoff_base_s, backoff_max_s")
    sim_seed: bool | None = Field(
        default=None, description="send the trial seed where `trialgrid serve` reads it (the x-trialgrid-seed header; "
                                  "in a batch, metadata): default only to a loopback base_url; true for a trialgrid "
                                  "serve on another host, false never (see docs/providers.md)")
    _function_path: str | None = PrivateAttr(default=None)
    tool_call_parser: ToolCallParser | None = Field(
        default=None, description="read tool calls the model writes in its text: json, hermes or functions-prefix "
                                  "(off: only native tool calls count; see docs/local-models.md)")

    @property
    def model_id(self) -> str:
        return self.model or self.name

    @property
    def connection(self) -> Connection:
        return Connection(self.provider, self.base_url, self.api_key_env, tuple(sorted(self.headers.items())),
                          self.timeout_s, self.function, self.sim_seed, self._function_path, self.api_version)

    @model_validator(mode="before")
    @classmethod
    def _default_key_env(cls, data: Any) -> Any:
        # a missing api_key_env means the vendor's usual variable; an explicit null means none
        if (isinstance(data, dict) and "api_key_env" not in data and isinstance(data.get("provider"), str)
                and data["provider"] in DEFAULT_KEY_ENV):
            data = {**data, "api_key_env": DEFAULT_KEY_ENV[data["provider"]]}
        return data

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if not value.startswith(("http://", "https://")):
            raise ValueError("base_url must start with http:// or https://")
        check_base_url(value)  # no control character, no credential (user:password@, ?api_key=)
        parts = urlsplit(value)
        shown = redact_url(value)
        try:
            port = parts.port
        except ValueError:
            raise ValueError(f"base_url {shown!r} has an invalid port (expected 1-65535)") from None
        if not parts.hostname:
            raise ValueError(f"base_url {shown!r} names no host")
        if port == 0 or (port is None and parts.netloc.endswith(":")):
            raise ValueError(f"base_url {shown!r} has an empty or zero port; write the port, or drop the ':' for "
                             "the scheme's default")
        return value

    @field_validator("name")
    @classmethod
    def _printable_name(cls, value: str) -> str:
        return printable_label(value, "model name")

    @field_validator("api_key_env")
    @classmethod
    def _key_is_set(cls, value: str | None) -> str | None:
        if value is not None:
            if not value.replace("_", "").isalnum():
                raise ValueError("api_key_env is the *name* of an environment variable (letters, digits, _), "
                                 "never the key itself")
            if not os.environ.get(value, "").strip():
                raise ValueError(f"environment variable {value} is not set; export it with the API key, "
                                 "or set api_key_env: null for an endpoint that needs no key")
            problem = unsendable_key(value)
            if problem is not None:
                raise ValueError(problem)
        return value

    @field_validator("headers")
    @classmethod
    def _no_credentials(cls, value: dict[str, str]) -> dict[str, str]:
        check_headers(value)  # sendable names and values, none the client owns, no credential
        return value

    @field_validator("params")
    @classmethod
    def _json_params(cls, value: dict[str, Any]) -> dict[str, Any]:
        check_json_numbers(value)  # NaN or .inf would fail every request, found only by sending
        return value

    @field_validator("function")
    @classmethod
    def _importable(cls, value: str | None, info: ValidationInfo) -> str | None:
        # the sweep file's folder (load_sweep's validation context) goes on the import path first
        if value is not None:
            load_function(value, (info.context or {}).get("folder"))  # a ValueError saying why not
        return value

    @model_validator(mode="after")
    def _function_folder(self, info: ValidationInfo) -> ModelConfig:
        # ...and goes with the model to whoever builds its provider (a Ray worker too)
        self._function_path = (info.context or {}).get("folder")
        return self

    @model_validator(mode="after")
    def _provider_knows_model(self) -> ModelConfig:
        check_model(self.provider, self.model_id)
        if self.provider == "callable" and self.function is None:
            raise ValueError("provider callable needs function: module:function")
        if self.provider != "callable" and self.function is not None:
            raise ValueError(f"function is only used by provider callable, not {self.provider}")
        if self.api_version is not None and self.provider != "azure-openai":
            raise ValueError(f"api_version is only used by provider azure-openai, not {self.provider}")
        if self.provider == "azure-openai" and not self.base_url:
            raise ValueError("provider azure-openai needs base_url: your resource's endpoint, "
                             "e.g. https://my-resource.openai.azure.com")
        if self.mode == "batch" and self.provider not in BATCH_PROVIDERS:
            raise ValueError(f"mode: batch needs provider {', '.join(BATCH_PROVIDERS)} (their batch APIs), "
                             f"not {self.provider}")
        tpm = self.limits.tpm
        if tpm is not None:
            # every request is charged at least its output cap (max_tokens, or the default estimate): a tpm below
            # that admits no request in any window, and the run would wait for ever
            _, output = estimate_usage(ChatRequest(self.model_id, (), params=self.params))
            if tpm < output:
                raise ValueError(f"limits.tpm {tpm} is below the {output} tokens every request of this model is "
                                 "charged (its output cap: params.max_tokens, or 256 when unset), so no request could "
                                 "ever be sent; raise tpm or lower max_tokens")
        if self.provider not in CONFIGURED:
            used: list[str] = [k for k in ("base_url", "headers", "limits", "retry", "timeout_s", "sim_seed")
                               if k in self.model_fields_set]
            if used or self.api_key_env is not None:
                raise ValueError(f"{(used or ['api_key_env'])[0]} is not used by provider {self.provider} "
                                 "(it applies to openai, anthropic and callable)")
        return self


class EngineConfig(BaseModel):
    """How the run executes; not part of the sweep's identity."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    concurrency: int = Field(default=256, ge=1, le=100_000, description="max trials in flight overall")
    timeout_s: float = Field(default=120.0, gt=0, description="per-trial deadline (all calls of the trial)")
    batch_rows: int = Field(default=4096, ge=1, description="rows per Arrow record batch")
    flush_seconds: float = Field(default=2.0, gt=0, description="flush a partial batch after this long")
    write_ahead: bool = Field(default=True, description="journal each finished trial before its batch is written, "
                              "so a crash loses at most the answers of one event-loop turn (runner.output.journal)")
    batch_poll_s: float = Field(default=30.0, gt=0, description="batch mode: seconds between polls of open batches")
    batch_max_requests: int = Field(default=10_000, ge=1, le=50_000, description="batch mode: requests per batch")


def _gate_form(text: str) -> str:
    """A sweep's gate must parse (runner.core.gates); each is located by its index, ``gates[1]``."""
    try:
        parse_gate(text)
    except UserError as exc:
        raise ValueError(f"{exc.message}; {exc.hint}" if exc.hint else exc.message) from None
    return text


class Sweep(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    seed: int = Field(default=0, ge=0, le=2**63 - 1)
    output: str = Field(default="out", description="output directory, relative to the current directory")
    models: list[ModelConfig] = Field(min_length=1)
    probes: list[ProbeEntry] = Field(min_length=1)
    engine: EngineConfig = Field(default_factory=EngineConfig)
    # what trials cost and what the sweep may spend; like engine, not part of the sweep's identity
    prices: dict[str, ModelPrice] = Field(default_factory=dict, description="per model label: USD per million tokens, "
                                          "or `list`: the vendor's list price (the prices extra)")
    budget: Budget | None = Field(default=None, description="stop scheduling new trials once reached")
    # where answers are kept for a rerun; like output, not part of the sweep's identity
    cache: str | None = Field(default=None, description="response cache directory (relative to the current "
                              "directory); a rerun asks the cache before the model")
    # checked by `trialgrid run` once the run finishes (runner.analysis.gates); like engine, not part of the identity
    gates: list[Annotated[str, AfterValidator(_gate_form)]] = Field(default_factory=list, description='gates on interval bounds, e.g. '
                             '"upper(decoy_called | ungroundable) <= 0.20"; run exits 1 when one fails')

    @field_validator("output", "cache")
    @classmethod
    def _writable_path(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None:
            try:  # a NUL or a control character, or a place in /proc, /sys or /dev: refused where it is written
                check_target_path(value, what="output directory" if info.field_name == "output" else "cache directory")
            except UserError as exc:
                raise ValueError(exc.message + (f" ({exc.hint})" if exc.hint else "")) from None
        return value

    @field_validator("prices", mode="before")
    @classmethod
    def _list_prices(cls, value: Any, info: ValidationInfo) -> Any:
        models = info.data.get("models") or ()  # validated before prices (field order); absent if they failed
        return with_list_prices(value, {m.name: (m.provider, m.model_id) for m in models})

    @model_validator(mode="after")
    def _prices_name_models(self) -> Sweep:
        names = [m.name for m in self.models]
        unknown = [k for k in self.prices if k not in names]
        if unknown:
            raise ValueError(f"prices names model {unknown[0]!r}, which is not a model of this sweep "
                             f"(models: {', '.join(names)})")
        if self.budget is not None and self.budget.usd is not None:
            unpriced = [n for n in names if n not in self.prices]
            if unpriced:
                raise ValueError(f"budget.usd needs a price for every model; no price for {', '.join(unpriced)}")
        return self

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
        for n in names:
            printable_label(n, "probe name")
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup:
            raise ValueError(f"probe name {dup!r} is used twice; give each probe entry a distinct 'name'")
        return probes


#: longest model or probe label; labels become table rows and (hashed when unsafe) file names
@dataclass(frozen=True)
class Narrowing:
    """A try of a sweep before the whole of it: only these models (by name), this many runs per cell. A narrowed
    sweep is another sweep (its own sweep id), so it never mixes into the whole sweep's output."""

    models: tuple[str, ...] = ()
    runs: int | None = None

    def __post_init__(self) -> None:
        if self.runs is not None and self.runs < 1:
            raise UserError(f"--runs {self.runs}: at least 1 run per cell")

    def __bool__(self) -> bool:
        return bool(self.models) or self.runs is not None

    def describe(self) -> str:
        parts = [f"--model {m}" for m in self.models] + ([f"--runs {self.runs}"] if self.runs is not None else [])
        return " ".join(parts)

    def apply(self, data: dict[str, Any], path: Path) -> dict[str, Any]:
        """The sweep file's data with the narrowing applied (a copy); ``UserError`` for a model it does not have."""
        data = dict(data)
        if self.models:
            found = data.get("models")
            entries: list[Any] = found if isinstance(found, list) else []
            names = [m.get("name") for m in entries if isinstance(m, dict)]
            for name in self.models:
                if name not in names:
                    close = difflib.get_close_matches(name, [str(n) for n in names], n=1)
                    raise UserError(f"--model {name!r}: the sweep has no model of that name"
                                    + (f" (did you mean {close[0]!r}?)" if close else ""), file=path,
                                    hint=f"its models: {', '.join(str(n) for n in names)}")
            data["models"] = [m for m in entries if isinstance(m, dict) and m.get("name") in self.models]
        if self.runs is not None:
            given = data.get("probes")
            probes: list[Any] = given if isinstance(given, list) else []
            data["probes"] = [{**p, "runs": self.runs} if isinstance(p, dict) else p for p in probes]
        return data


@dataclass
class LoadedSweep:
    """A validated sweep with its probes' case files loaded."""

    sweep: Sweep
    path: Path
    probes: list[Probe]
    sweep_id: str
    sweep_sha256: str
    warnings: list[str] = field(default_factory=list)
    #: probe entries not loaded because they name an MCP server and servers were not to be started
    unstarted: list[str] = field(default_factory=list)
    #: per callable model: its code's identity (``version``, or its module file's sha256), part of ``sweep_id``
    function_sources: dict[str, str] = field(default_factory=dict)
    #: how the sweep file was narrowed for a try (``--model``, ``--runs``), or None: the whole sweep
    narrowing: Narrowing | None = None

    @property
    def schema_fields(self) -> list[Column]:
        """Outcome columns of all probes (one table for the whole sweep)."""
        seen: dict[str, Column] = {}
        for probe in self.probes:
            for f in probe.outcome_fields:
                if f.name in seen and seen[f.name].type != f.type:
                    raise UserError(f"probes disagree on the type of outcome column {f.name!r}")
                seen.setdefault(f.name, f)
        return list(seen.values())


def function_sources(sweep: Sweep) -> dict[str, str]:
    """Per callable model: what its code is — the ``version`` the user set, else the sha256 of its module file."""
    out: dict[str, str] = {}
    for m in sweep.models:
        if m.function is not None:
            source = m.version or source_digest(m.function)
            if source is not None:
                out[m.name] = source
    return out


def _sweep_identity(sweep: Sweep, probes: list[Probe], sources: dict[str, str]) -> str:
    what = sweep.model_dump(mode="json", exclude={"output", "engine", "prices", "budget", "cache", "gates"})
    for m in what["models"]:
        m.pop("concurrency", None)  # how fast, not what
        m.pop("mode", None)  # how the requests travel, not what they ask: batch and live share trial ids
        for key in ("api_key_env", "timeout_s", "limits", "retry", "sim_seed"):  # which account, how fast, by what channel; not what
            m.pop(key, None)
        for key in ("base_url", "headers", "function", "tool_call_parser", "version", "api_version"):  # unset: leave the identity of older sweeps as it was
            if not m.get(key):
                m.pop(key, None)
        if m["name"] in sources and not m.get("version"):  # the agent's code is what is measured: an edit is a new run
            m["function_source"] = sources[m["name"]]
    for p in what["probes"]:
        if p.get("mcp_server") is None:  # a file catalogue: leave the identity of older sweeps as it was
            p.pop("mcp_server", None)
        else:  # the served catalogue's sha256 is in probe_files; how long to wait for it is not what
            p["mcp_server"].pop("timeout_s", None)
    what["probe_files"] = [p.identity() for p in probes]
    blob = json.dumps(what, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def local_server_warnings(sweep: Sweep, except_models: Collection[str] = ()) -> list[str]:
    """A model on a local server with several requests in flight or retries: they queue behind each other. Said
    when a run starts (``runner.run``), not when the sweep loads: the preflight's answer tells ``trialgrid serve``,
    which answers many at once, from a server that runs one request at a time, and it knows the wire formats no
    such server speaks (``except_models``: both)."""
    out = []
    for m in sweep.models:
        if m.name in except_models or not is_loopback(m.base_url) or (m.concurrency == 1 and m.retry.max_attempts == 1):
            continue
        out.append(f"model {m.name!r} is served on this machine ({redact_url(m.base_url or '')}) with concurrency {m.concurrency} and "
                   f"retry.max_attempts {m.retry.max_attempts}: a server that runs one request at a time (llama.cpp, "
                   "Ollama) queues the rest, trials time out while they wait and retries re-send to a busy server; "
                   "set concurrency: 1 and retry: {max_attempts: 1} unless it batches (see docs/local-models.md)")
    return out


def _check_shared_limits(sweep: Sweep, source: Source) -> None:
    """Limits belong to a provider key, so models on one key must not disagree about them."""
    first: dict[tuple[str, str, str], int] = {}
    for j, m in enumerate(sweep.models):
        if m.provider not in CONFIGURED:
            continue
        i = first.setdefault(m.connection.limiter_key, j)
        if i != j and m.limits != sweep.models[i].limits:
            loc = ("models", j, "limits")
            raise UserError(f"models {sweep.models[i].name!r} and {m.name!r} share one provider key "
                            f"({m.provider}, {m.api_key_env or 'no key'}) but set different limits; limits are per key",
                            file=source.path, line=source.line_of(loc), key_path=loc,
                            hint="give both the same limits, or set them on one and copy them to the other")


def _server_command(entry: Any) -> str | None:
    """The shell-quoted command line of a probe entry's MCP server, or None."""
    server = getattr(entry, "mcp_server", None)
    if server is None:
        return None
    return " ".join(shlex.quote(a) for a in [server.command, *server.args])


def load_sweep(path: Path | str, *, start_servers: bool = True, narrow: Narrowing | None = None) -> LoadedSweep:
    """Read and check a sweep file and everything it names. Raises ``UserError``.

    A sweep file that names an MCP server is code: loading it starts that command. With
    ``start_servers=False`` such probe entries are checked as configuration only and
    listed in ``unstarted``; every command is a note (``runner.core.messages``) before it starts.
    """
    path = Path(path)
    source: Source = load_source(path, what="sweep file")
    if not isinstance(source.data, dict):
        raise UserError("a sweep file must be a mapping with keys name, models, probes", file=path, line=1)
    data = narrow.apply(source.data, path) if narrow else source.data
    sweep: Sweep = validate(Sweep, data, source, context={"folder": str(path.parent.resolve())})
    remember_env(m.api_key_env for m in sweep.models)  # every key of the sweep scrubbed from all it writes
    _check_shared_limits(sweep, source)
    base = path.parent
    probes: list[Probe] = []
    unstarted: list[str] = []
    for i, entry in enumerate(sweep.probes):
        def locate(key: str, message: str, _i: int = i) -> UserError:
            loc = ("probes", _i, key)
            return UserError(message, file=path, line=source.line_of(loc), key_path=loc)

        for key in ("cases", "catalogue"):
            value = getattr(entry, key, None)
            if value is not None:
                try:
                    check_regular_file(base / value, what=f"{key} file")
                except UserError as exc:
                    raise locate(key, f"{value}: {exc.message} (resolved to {base / value})") from None
        command = _server_command(entry)
        if command is not None:
            if not start_servers:
                unstarted.append(f"probes[{i}] ({entry.name or entry.kind}) names the MCP server `{command}`; "
                                 "not started, so its catalogue and cases are unchecked "
                                 "(--start-servers runs it: a sweep file that names a server is code)")
                continue
            note(f"starting the MCP server of probes[{i}] ({entry.name or entry.kind}): {command}")
        probes.append(PROBES[entry.kind](entry, base, locate))
    lint_warnings = lint_probes(probes)  # case files against their catalogues: unpassable cases are errors
    warnings = [w for p in probes for w in p.warnings] + lint_warnings
    sources = function_sources(sweep)
    loaded = LoadedSweep(sweep, path, probes, _sweep_identity(sweep, probes, sources), source.sha256, warnings,
                         unstarted, sources, narrow or None)
    loaded.schema_fields  # noqa: B018 — surface column type conflicts at load time
    for line in warnings + unstarted:  # whoever loads the sweep hears them: a notebook as the CLI does
        warn(line)
    return loaded
