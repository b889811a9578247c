"""A loopback server speaking the OpenAI and Anthropic wire formats, answered by the simulated agent.

It exists so the HTTP path — wire formats, retries, rate limits, remedies, resume
after a crash — can be exercised end to end with real sockets and real failures
and no key, no network and no cost: ``trialgrid serve`` for people, ``ServerThread``
for tests and benchmarks.
"""

from runner.sim.serve.app import SimServer, start_server
from runner.sim.serve.options import FAULTS, Rule, ServeOptions, parse_fault, parse_rule
from runner.sim.serve.thread import ServerThread, serve_forever

__all__ = ["FAULTS", "Rule", "ServeOptions", "ServerThread", "SimServer", "parse_fault", "parse_rule",
           "serve_forever", "start_server"]
