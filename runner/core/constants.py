"""The inference settings every table shares: interval method, bootstrap resamples, confidence, the views' seed.

Defined once so the leaderboard, the probe views (kappas, hop rates, field scores)
and the reports that quote them ("tilted Korn–Graubard", "4,000 resamples, 95%") can
never drift apart. Imports nothing, so a probe's report module can use it without
pulling in the analysis.
"""

from __future__ import annotations

from typing import Final

#: the ``stats.cluster_rate_ci`` method of every cluster interval of a rate (and, by MOVER, of a difference)
#: a report shows: analytic, so those intervals draw no resamples
INTERVAL_METHOD: Final = "korn-graubard-tilted"
#: resamples of every percentile bootstrap a report shows (paired differences, kappas)
N_RESAMPLES = 4000
#: two-sided confidence of every interval a report shows
CONFIDENCE = 0.95
#: the fixed seed of probe views whose intervals do not follow the sweep seed (kappas, hop rates)
VIEW_SEED = 2026
#: rates where a hit is the good result (a pass/fail probe): there, a prompt fires on a failure (and the viewer
#: lists a trial's false value as what fired); ``runner.analysis.cells`` re-exports it
SUCCESS_RATES: Final = frozenset({"passed"})
