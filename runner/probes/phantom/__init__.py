"""The ``phantom`` probe and the audit of traces: which tool-call arguments did no part of the context ground?

``probe.py`` holds the probe (traces, an auditor model's list, its scoring against gold); ``scores.py`` the
containment baseline and the scores of each field; ``audit.py`` ``trialgrid audit``'s streaming path over
imported traces; ``report.py`` the views that need no gold; ``calibration.py`` the labelling sheet,
people's labels and the findings. Reading the vendors' trace formats is ``runner.importers.traces``'s job.
"""

from runner.probes.phantom.probe import (
    CONDITIONS,
    AuditorParseError,
    PhantomConfig,
    PhantomProbe,
    Trace,
    baseline_fields,
    conversation_of,
    load_traces,
    parse_auditor_reply,
)

__all__ = ["CONDITIONS", "AuditorParseError", "PhantomConfig", "PhantomProbe", "Trace", "baseline_fields", "conversation_of", "load_traces", "parse_auditor_reply"]
