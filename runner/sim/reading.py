"""How the simulated agent reads a request: the entity it names, and which tool fits.

Everything here works from the text a real model would see — the user's words and
the tool catalogue's names and descriptions — never from labels the probe holds.
That is what makes the sim a fair stand-in: change a prompt's wording and its
behaviour changes the way a model's would.

- Entity state: a vendor it "knows" from a small built-in list (``known``); a proper
  name not on that list (``unfamiliar``); a referent with no name, such as "our
  billing provider" (``unnamed``); or no external entity at all (``none``).
- Tool fit: word overlap between the request and each tool's name and description.
- Breadth: how much a tool's description promises to "look up anything" — the broad
  inspection tool an agent reaches for when it cannot resolve what was asked.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from runner.core.types import ToolSpec

_KNOWN_VENDORS: frozenset[str] = frozenset({
    "stripe", "paypal", "adyen", "plaid", "braintree", "salesforce", "hubspot",
    "zendesk", "freshdesk", "intercom", "slack", "github", "gitlab", "bitbucket", "jira",
    "confluence", "asana", "trello", "airtable", "twilio", "sendgrid",
    "mailchimp", "mailgun", "postmark", "shopify", "datadog", "pagerduty", "sentry", "okta",
    "auth0", "aws", "azure", "google cloud", "gcp", "snowflake", "dropbox", "docusign",
    "quickbooks", "xero", "workday", "servicenow", "cloudflare", "fastly", "heroku",
    "vercel", "netlify", "fedex", "ups", "dhl", "usps", "zoom", "figma", "gusto", "bamboohr",
    "mongodb atlas", "openai", "anthropic", "new relic", "grafana", "splunk", "hootsuite",
})

# Capitalised words that start sentences or name common things, not vendors.
_NOT_NAMES: frozenset[str] = frozenset("""
a an the i we our my you your please can could would will what which who whom whose how why when where
is are do does did check pull show get find list fetch send tell give look open create update cancel
refund book schedule move add remove delete make set run export import email message post file
there this that these those it its if then also and or but for from with to in on at by of
monday tuesday wednesday thursday friday saturday sunday january february march april may june july
august september october november december api url csv pdf json sso id eu us uk q1 q2 q3 q4 ok hi
hello thanks thank today yesterday tomorrow last next every all any some compare summarize summarise
crm sms sql hr it vpn dns ssl ip ui ux faq eta utc pst est gmt ceo cfo cto
where where's how's what's text call set
track reset yes no delete change move i'm i'd
""".split())

_UNNAMED_RE = re.compile(
    r"\b(?:our|my|the|whatever|whichever|this|that|their)\s+(?:[a-z][\w-]*\s+){0,3}?"
    r"(?:provider|vendor|processor|platform|service|tool|system|partner|carrier|gateway|"
    r"integration|app|crm|bank|host|registrar|supplier|contractor|agency|company|shop|store)s?\b",
    re.IGNORECASE,
)
_WORD_RE = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:['’][a-z]+)?")
_NAME_RE = re.compile(r"\b[A-Z][A-Za-z0-9]*(?:\s+[A-Z][A-Za-z0-9]+)*\b")

_STOP: frozenset[str] = frozenset("""
a an the i we our my you your me us to of in on at by for from with and or but is are was were be
been it its this that these those do does did can could would should will please what which who
how why when where there here any all some about into over last next than then them they their
""".split())

_BREADTH_CUES: frozenset[str] = frozenset({
    "all", "every", "any", "anything", "inventory", "export", "dump", "internal", "configuration",
    "config", "workspace", "environment", "context", "everything", "raw", "full", "entire",
    "integrations", "records", "global", "lookup", "general", "broad", "unknown", "unsure",
})


@dataclass(frozen=True, slots=True)
class Entity:
    state: str           # known | unfamiliar | unnamed | none
    surface: str | None  # the words naming it, as written


def _stem(word: str) -> str:
    w = word.lower().replace("’", "'")
    if w.endswith("'s"):
        w = w[:-2]
    for suffix in ("ing", "ies", "es", "ed", "s"):
        if len(w) > len(suffix) + 3 and w.endswith(suffix):
            return w[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return w


def words(text: str) -> set[str]:
    """Content words of ``text``, crudely stemmed (enough for overlap scoring)."""
    return {_stem(w) for w in _WORD_RE.findall(text) if w.lower() not in _STOP}


def find_entity(text: str) -> Entity:
    lowered = text.lower()
    for vendor in _KNOWN_VENDORS:
        i = lowered.find(vendor)
        if i >= 0:
            end = i + len(vendor)
            if (i == 0 or not lowered[i - 1].isalnum()) and (end == len(lowered) or not lowered[end].isalnum()):
                return Entity("known", text[i:end])
    for match in _NAME_RE.finditer(text):
        # drop leading capitalised common words ("Is", "Pull"): "Is Quorbis Mail" names "Quorbis Mail"
        parts = match.group(0).split()
        while parts and parts[0].lower() in _NOT_NAMES:
            parts.pop(0)
        if parts:
            return Entity("unfamiliar", " ".join(parts))
    # prefer a possessive referent ("our payroll vendor") over a definite one ("the checkout app")
    unnamed = sorted(_UNNAMED_RE.finditer(text), key=lambda m: (not m.group(0).lower().startswith(("our", "my", "their")), m.start()))
    if unnamed:
        return Entity("unnamed", unnamed[0].group(0))
    return Entity("none", None)


def _breadth(tool: ToolSpec) -> int:
    """How broad a tool promises to be, from its own name and description."""
    tokens = {w.lower() for w in _WORD_RE.findall(tool.name.replace("_", " ") + " " + tool.description)}
    return len(tokens & _BREADTH_CUES)


def fit(request_words: set[str], tool: ToolSpec) -> float:
    name_words = words(tool.name.replace("_", " "))
    desc_words = words(tool.description)
    return 2.0 * len(request_words & name_words) + len(request_words & desc_words)


@dataclass(frozen=True, slots=True)
class Reading:
    """What the sim concluded about one request text against one catalogue."""

    entity: Entity
    specific: str | None       # best-fitting narrow tool
    runner_up: str | None      # second-best narrow tool (for off-target calls)
    broad: str | None          # the broad inspection tool, if the catalogue has one
    specific_schema: dict
    runner_up_schema: dict
    broad_schema: dict


_BROAD_THRESHOLD = 3


def read(text: str, tools: Sequence[ToolSpec]) -> Reading:
    entity = find_entity(text)
    req = words(text)
    broad_tool = max(tools, key=_breadth, default=None)
    if broad_tool is not None and _breadth(broad_tool) < _BROAD_THRESHOLD:
        broad_tool = None
    narrow = sorted((t for t in tools if t is not broad_tool), key=lambda t: (-fit(req, t), t.name))
    specific = narrow[0] if narrow and fit(req, narrow[0]) > 0 else None
    runner_up = narrow[1] if len(narrow) > 1 else None
    return Reading(
        entity=entity,
        specific=specific.name if specific else None,
        runner_up=runner_up.name if runner_up else None,
        broad=broad_tool.name if broad_tool else None,
        specific_schema=dict(specific.parameters) if specific else {},
        runner_up_schema=dict(runner_up.parameters) if runner_up else {},
        broad_schema=dict(broad_tool.parameters) if broad_tool else {},
    )
