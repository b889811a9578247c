"""One line per outcome (a probe's rate column): what a hit means, as the HTML report's definitions say it.

Copied from the output-column tables of docs/probes.md (tests/reporting checks they agree), so
the page explains each rate in the words the reference uses without shipping the docs.
"""

from __future__ import annotations

_DEFINITIONS: dict[tuple[str, str], str] = {
    ("misselection", "decoy_called"): 'the decoy was among the tools called',
    ("misselection", "expected_called"): 'the tool that completes the request was called',
    ("misselection", "expected_grounded"): 'the tool that completes the request was called with every argument grounded (a referent filled in, a placeholder or the schema\'s description sent as a value is not the right call)',
    ("misselection", "all_args_grounded"): 'every argument of every call whose arguments parsed is grounded (null: no such call)',
    ("misselection", "asked"): 'no tool call, and the reply asks the user for something (the shared rule); false for an empty reply',
    ("misselection", "empty_reply"): 'no tool call and no text once whitespace and template tokens are removed',
    ("misselection", "unparsable_call"): "a call's arguments did not parse as a JSON object (see `tool_calls[].parse_error`)",
    ("misselection", "unknown_tool"): 'a call named a tool that is not in the catalogue shown',
    ("misselection", "calls_from_text"): "the calls were read from the reply's text by the model's `tool_call_parser`",
    ("negative", "passed"): "no reason to fail: the case's verdict for this trial",
    ("negative", "action_ok"): "the action is the case's `expect_action` (true when it sets none)",
    ("negative", "invented"): "strict: a `forbidden` token appeared in a tool call's arguments, or an argument value is ungrounded (not part of `passed`)",
    ("negative", "invented_forbidden"): "a `forbidden` token appeared in a tool call's arguments (the narrow reading of `invented`)",
    ("negative", "all_args_grounded"): 'every argument of every call whose arguments parsed is grounded (null: no such call)',
    ("negative", "inferred"): 'a `must_not_infer` field was given a concrete value',
    ("negative", "illegal_call"): 'a `must_not_call` tool was called',
    ("negative", "unparsable_call"): "a call's arguments did not parse (a failed call, not an abstention)",
    ("negative", "empty_reply"): 'no tool call and no text once whitespace and template tokens are removed',
    ("negative", "calls_from_text"): "the calls were read from the reply's text by the model's `tool_call_parser`",
    ("negative", "bfcl_passed"): "BFCL's own verdict, for cases imported from BFCL (null otherwise)",
    ("negative", "tripwire"): "the reply's text holds identifier-like strings the request did not (never part of `passed`)",
    ("phantom", "auditor_failed"): 'the auditor errored (parse or transport)',
    ("phantom", "baseline_exact"): "the baseline's set equals the gold set",
    ("propagation", "wrong_answer"): 'S3: not correct, and the interceptor did not abstain',
    ("propagation", "hallucinated"): 'a confident answer that is wrong or fabricated',
    ("propagation", "fabricated"): 'any fabrication rule fired',
    ("propagation", "tool_called"): 'at least one tool call',
    ("propagation", "abstained"): 'the interceptor stopped the trial',
    ("propagation", "reached_s1"): 'S1: the corrupted value entered a call or the trace',
    ("propagation", "reached_s2"): 'S2: it was executed and not rejected',
    ("propagation", "all_args_grounded"): 'every argument of every call whose arguments parsed is grounded (null: no such call)',
    ("judge", "verdict"): "the model's verdict: true = CORRECT (null: the reply had no `VERDICT:` line)",
    ("judge", "heuristic_verdict"): "the substring heuristic's verdict",
    ("judge", "parse_failed"): 'the reply had no verdict line',
}


def definition(kind: str, rate: str) -> str | None:
    """What a hit of ``rate`` means for probes of ``kind``, if known."""
    return _DEFINITIONS.get((kind, rate))
