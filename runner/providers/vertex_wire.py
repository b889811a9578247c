"""Provider ``vertex``: Gemini models on Google Cloud's Vertex AI, the same ``generateContent`` body.

The request and answer are the Gemini API's (``gemini_wire``); what differs is where it goes and who signs it:

- the URL names the project and location:
  ``{base_url}/projects/{project}/locations/{location}/publishers/google/models/{model}:generateContent``, with
  ``base_url`` by default ``https://{location}-aiplatform.googleapis.com/v1`` (``https://aiplatform.googleapis.com
  /v1`` for the ``global`` location);
- the project and location come from ``GOOGLE_CLOUD_PROJECT`` and ``GOOGLE_CLOUD_LOCATION`` (as Google's own
  client reads them; the location defaults to ``us-central1``), the project else from the credentials;
- each request carries an OAuth access token from application default credentials (``google-auth``, an
  optional extra: ``pip install 'trialgrid[vertex]'``; ``gcloud auth application-default login``, a service
  account's key file in ``GOOGLE_APPLICATION_CREDENTIALS``, or the metadata server), refreshed before it
  expires. With ``api_key_env`` (a Vertex AI API key, express mode) the key goes out as ``x-goog-api-key`` and
  no token is fetched.
"""

from __future__ import annotations

import os
import threading
from typing import Any
from urllib.parse import quote

from runner.core.errors import UserError
from runner.core.types import ChatRequest
from runner.providers.gemini_wire import GeminiProvider
from runner.providers.settings import Connection

__all__ = ["VertexProvider"]

_SCOPE = "https://www.googleapis.com/auth/cloud-platform"


class VertexProvider(GeminiProvider):
    """``generateContent`` on Vertex AI; one request per ``complete``."""

    name = "vertex"
    #: no route the preflight may ask for free under a project's model path: it checks the token can be had
    knows_models = False
    has_models_route = False

    def __init__(self, connection: Connection, **kw: Any) -> None:
        self._token: Any = None
        project: str | None = os.environ.get("GOOGLE_CLOUD_PROJECT") or None
        self.location = _location()
        if connection.api_key_env is None:
            self._token, found = _token_source()
            project = project or found
        if not project:
            raise UserError("provider vertex: no Google Cloud project (GOOGLE_CLOUD_PROJECT, or credentials that "
                            "name one)", hint="export GOOGLE_CLOUD_PROJECT=your-project")
        self.project = project
        super().__init__(connection, **kw)

    @classmethod
    def api_base(cls, base_url: str | None) -> str:
        if base_url:
            return base_url.rstrip("/")
        location = _location()
        host = "aiplatform.googleapis.com" if location == "global" else f"{location}-aiplatform.googleapis.com"
        return f"https://{host}/v1"

    @classmethod
    def check_offline(cls, connection: Connection) -> str | None:
        if connection.api_key_env is not None:
            return None
        try:
            _, project = _token_source()
        except UserError as exc:
            return str(exc)
        if not (os.environ.get("GOOGLE_CLOUD_PROJECT") or project):
            return "no Google Cloud project (GOOGLE_CLOUD_PROJECT, or credentials that name one)"
        return None

    def url_for(self, request: ChatRequest) -> str:
        return (f"{self.base}/projects/{quote(self.project, safe='')}/locations/{quote(self.location, safe='')}"
                f"/publishers/google/models/{quote(request.model, safe='')}:generateContent")

    def sign(self, url: str, payload: bytes) -> dict[str, str]:
        if self._token is None:
            return {}
        return {"authorization": f"Bearer {self._token()}"}


def _location() -> str:
    """The Vertex AI location, as Google's own client reads it: ``GOOGLE_CLOUD_LOCATION``, else us-central1."""
    return os.environ.get("GOOGLE_CLOUD_LOCATION") or "us-central1"


def _token_source() -> tuple[Any, str | None]:
    """A function giving a valid access token (refreshed when near expiry), and the credentials' project."""
    try:
        import google.auth
        from google.auth.exceptions import DefaultCredentialsError
        from google.auth.transport.requests import Request
    except ImportError:
        raise UserError("provider vertex gets its access token with google-auth, which is not installed",
                        hint="pip install 'trialgrid[vertex]' (or set api_key_env to a Vertex AI API key)") from None
    try:
        credentials, project = google.auth.default(scopes=[_SCOPE])
    except DefaultCredentialsError as exc:
        raise UserError(f"provider vertex: no Google Cloud credentials found ({str(exc).splitlines()[0][:200]})",
                        hint="run `gcloud auth application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS to "
                             "a service account's key file") from None
    lock = threading.Lock()

    def token() -> str:
        # a refresh is one blocking HTTPS call about once an hour; every other request reads the cached token
        with lock:
            if not credentials.valid:
                credentials.refresh(Request())
            return str(credentials.token)

    return token, project
