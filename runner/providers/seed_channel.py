"""Where the trial seed travels for ``trialgrid serve``, and the rule that keeps it off real vendors.

The simulated server (``runner.sim.serve``) answers a trial the same way every time
because it reads the trial's seed from the request. A vendor API has no such field
(OpenAI Chat's own ``seed`` aside), so the seed rides in channels only the simulator
reads: a request header; in a batch, which has no per-request headers, the request's
``metadata`` (OpenAI Responses; a Gemini batch item's metadata beside its key) or ``metadata.user_id``
(Anthropic).

Those channels are plumbing of the simulator: ``metadata.user_id`` is the field a
vendor uses to tell end users apart for abuse handling, and no vendor needs a
trialgrid header. So they are sent only where ``trialgrid serve`` may listen:
to a loopback ``base_url``, or when the model entry asks (``sim_seed: true``,
``Connection.sends_seed``). The names are defined here, once, for both sides.
"""

from __future__ import annotations

#: the request header that carries the trial seed (live requests)
SEED_HEADER = "x-trialgrid-seed"
#: an OpenAI Responses batch request's (and a Gemini batch item's) ``metadata`` key for the trial seed
SEED_METADATA_KEY = "trialgrid_seed"
#: an Anthropic batch request's ``metadata.user_id``: this prefix, then the trial seed
SEED_USER_PREFIX = "trialgrid-seed-"
