"""``trialgrid serve``: the simulated agent on loopback, over the vendors' wire formats, with faults and limits.

Why a module of its own: its twenty-odd flags map onto ``runner.sim.serve.ServeOptions``; the server is the
simulator's, this module only reads the command line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import typer

from runner.cli.console import fail, print_line
from runner.cli.flags import command
from runner.core.errors import UserError

__all__ = ["ServeFlags", "register", "serve"]


@dataclass(frozen=True)
class ServeFlags:
    """``trialgrid serve``'s flags: where it listens, how it answers, the faults and limits it imposes."""

    port: int = typer.Option(8000, "--port", "-p", help="Port on 127.0.0.1 (0: any free port, printed at start).")
    host: str = typer.Option("127.0.0.1", "--host", help="Loopback address to bind (127.x.x.x, localhost or ::1 only).")
    latency_ms: float = typer.Option(0.0, "--latency-ms", min=0, help="Mean response latency.")
    latency_dist: str = typer.Option("fixed", "--latency-dist", help="fixed, uniform, exponential or lognormal.")
    latency_spread_ms: float = typer.Option(0.0, "--latency-spread-ms", min=0,
                                            help="uniform: half-width; lognormal: standard deviation.")
    faults: float = typer.Option(0.0, "--faults", min=0, max=1,
                                 help="Fault every response with this probability, all kinds mixed evenly.")
    fault: list[str] = typer.Option([], "--fault", help="KIND=RATE, repeatable; kinds: 429 500 503 529 slow reset malformed truncated disconnect stall bad_chunk drip.")
    fault_seed: int = typer.Option(0, "--fault-seed", help="Seed of the fault and latency draws.")
    retry_after_s: float = typer.Option(1.0, "--retry-after", min=0, help="Retry-After of an injected 429 (s).")
    slow_s: float = typer.Option(30.0, "--slow-s", min=0, help="How long a 'slow' fault holds its answer (s).")
    reject: list[str] = typer.Option([], "--reject", help="Parameter rule, repeatable: drop:P, rename:OLD:NEW, "
                                     "require:P=V[:tools], each optionally @MODEL_GLOB.")
    rpm: int | None = typer.Option(None, "--rpm", min=1, help="The server's own limit per API key, with real 429s.")
    rpm_window_s: float = typer.Option(60.0, "--rpm-window-s", min=0.001, help="Window of --rpm (s).")
    rpm_mode: str = typer.Option("window", "--rpm-mode", help="How --rpm is enforced: window (a sliding window, one "
                                 "long Retry-After when full) or bucket (a token bucket with short Retry-Afters, "
                                 "as the vendors enforce).")
    rpm_burst: int | None = typer.Option(None, "--rpm-burst", min=1, help="--rpm-mode bucket: the bucket's size "
                                         "(default: one second's worth of --rpm).")
    rate_headers: bool = typer.Option(True, "--rate-headers/--no-rate-headers", help="Send the vendor's rate-limit "
                                      "headers on every answer while --rpm is set (off: 429s carry only Retry-After).")
    key_env: list[str] = typer.Option([], "--key-env", help="Accept only the API key held by this environment "
                                      "variable (repeatable); default: any key.")
    batch_delay_s: float = typer.Option(0.0, "--batch-delay-s", min=0, help="Batch APIs: seconds until a batch ends.")
    batch_error_rate: float = typer.Option(0.0, "--batch-error-rate", min=0, max=1,
                                           help="Batch APIs: share of requests answered with a 500 error result.")
    batch_expire_rate: float = typer.Option(0.0, "--batch-expire-rate", min=0, max=1,
                                            help="Batch APIs: share of requests left unprocessed, as expired.")
    echo_key: bool = typer.Option(False, "--echo-key", help="Fault: repeat the request's API key in every answer's "
                                  "text and every error message (a client must never write it).")
    keys_of: Path | None = typer.Option(None, "--keys", metavar="SWEEP", help="Answer model `oracle` from this sweep's "
                                     "case keys (the oracle persona), so a sweep whose HTTP model is `oracle` proves "
                                     "its cases passable over the wire.")


@command(ServeFlags)
def serve(flags: ServeFlags) -> None:
    """Serve the simulated agent over the OpenAI and Anthropic wire formats on loopback, with faults and limits."""
    import os

    from runner.core.safety import binds_loopback
    from runner.sim.serve import ServeOptions, parse_fault, parse_rule, serve_forever

    try:
        if not binds_loopback(flags.host):
            raise ValueError(f"--host {flags.host} is not a loopback address; trialgrid serve only listens on this machine")
        mix = ServeOptions.mixed_faults(flags.faults) if flags.faults else {}
        for spec in flags.fault:
            kind, rate = parse_fault(spec)
            mix[kind] = rate
        keys = []
        for name in flags.key_env:
            if not os.environ.get(name, "").strip():
                raise ValueError(f"--key-env {name}: environment variable {name} is not set")
            keys.append(os.environ[name].strip())
        options = ServeOptions(host=flags.host, port=flags.port, latency_ms=flags.latency_ms, latency_dist=flags.latency_dist,
                               latency_spread_ms=flags.latency_spread_ms, faults=mix, fault_seed=flags.fault_seed,
                               fault_retry_after_s=flags.retry_after_s, slow_s=flags.slow_s,
                               rules=[parse_rule(r) for r in flags.reject], rpm=flags.rpm, rpm_window_s=flags.rpm_window_s,
                               rpm_mode=flags.rpm_mode, rpm_burst=flags.rpm_burst, rate_headers=flags.rate_headers,
                               keys=tuple(keys), batch_delay_s=flags.batch_delay_s, batch_error_rate=flags.batch_error_rate,
                               batch_expire_rate=flags.batch_expire_rate,
                               echo_key=flags.echo_key)
    except ValueError as exc:
        raise fail(UserError(str(exc))) from None
    if flags.keys_of is not None:
        from runner.config.sweep import load_sweep
        from runner.sim.oracle import learn

        try:
            learn(load_sweep(flags.keys_of).probes)
        except UserError as exc:
            raise fail(exc) from None
    try:
        serve_forever(options, print_line)
    except OSError as exc:
        raise fail(UserError(f"cannot listen on {flags.host}:{flags.port}: {exc.strerror or exc}",
                              hint="choose another --port, or --port 0 for any free one")) from None


def register(app: typer.Typer) -> None:
    app.command(name="serve")(serve)
