"""Azure OpenAI: Chat Completions on a resource of your own, its key sent as ``api-key``.

Azure serves the Chat Completions wire format (``openai_wire``: same bodies, same answers, same error bodies)
at its own paths and with its own key header:

- without ``api_version``, Azure's v1 API: ``{base_url}/openai/v1/chat/completions``, the deployment named by
  the body's ``model``;
- with ``api_version``, the deployments API: ``{base_url}/openai/deployments/{model}/chat/completions
  ?api-version={api_version}`` (the body keeps ``model`` too, as the ``openai.AzureOpenAI`` client sends it).

``base_url`` is the resource's endpoint (``https://RESOURCE.openai.azure.com``); the key comes from
``api_key_env`` (default ``AZURE_OPENAI_API_KEY``) and goes out as ``api-key``. With ``api_key_env: null`` the
requests sign in with Microsoft Entra ID instead, as ``openai.AzureOpenAI`` does: a bearer token from
``AZURE_OPENAI_AD_TOKEN`` when it is set (a token you fetched, e.g. with ``az account get-access-token``), else
from ``azure-identity``'s ``DefaultAzureCredential`` (an optional extra, ``pip install 'trialgrid[azure]'``:
a service principal's environment variables, a managed identity, or ``az login``), fetched again before it
expires, so an overnight sweep outlives any one token. A prompt Azure's content filter
refuses (400, code ``content_filter``) and an answer it cuts (``finish_reason: content_filter``) are error rows
of kind ``content_filter`` (``classify``), never a model answer. Its 429s carry ``retry-after`` and the
``x-ratelimit-*`` headers the pacing already reads.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from runner.core.errors import ErrorKind, ProviderError, UserError
from runner.core.redact import remember_env
from runner.core.types import ChatRequest
from runner.providers.openai_wire import OpenAIProvider
from runner.providers.secrets import Secret
from runner.providers.settings import Connection

__all__ = ["AzureOpenAIProvider"]


class AzureOpenAIProvider(OpenAIProvider):
    """Chat Completions on Azure OpenAI; one request per ``complete``."""

    name = "azure-openai"
    #: a deployment's name is not a model the models route knows: the preflight judges the answer, not a 404
    knows_models = False
    local_model_servers = False  # a cloud's API

    def __init__(self, connection: Connection, **kw: object) -> None:
        self._token = entra_token_source() if connection.api_key_env is None else None
        super().__init__(connection, **kw)  # type: ignore[arg-type]
        self.resource = (connection.base_url or "").rstrip("/")
        self._urls: dict[str, str] = {}

    @classmethod
    def check_offline(cls, connection: Connection) -> str | None:
        if connection.api_key_env is not None:
            return None
        try:
            entra_token_source()
        except UserError as exc:
            return str(exc)
        return None

    def sign(self, url: str, payload: bytes) -> dict[str, str]:
        if self._token is None:
            return {}
        return {"authorization": f"Bearer {self._token()}"}

    @classmethod
    def api_base(cls, base_url: str | None) -> str:
        """The v1 API's root under the resource's endpoint (a ``base_url`` that already ends in ``/openai/v1``
        is taken as it is)."""
        if not base_url:
            raise ValueError("provider azure-openai needs base_url: the resource's endpoint")
        root = base_url.rstrip("/")
        return root if root.endswith("/openai/v1") else root + "/openai/v1"

    @staticmethod
    def auth_headers(secret: Secret | None) -> dict[str, str]:
        return {"api-key": secret.reveal()} if secret is not None else {}

    def url_for(self, request: ChatRequest) -> str:
        version = self.connection.api_version
        if version is None:
            return self.url
        url = self._urls.get(request.model)
        if url is None:
            root = self.resource.removesuffix("/openai/v1")
            url = self._urls[request.model] = (f"{root}/openai/deployments/{quote(request.model, safe='')}"
                                               f"/chat/completions?api-version={quote(version, safe='')}")
        return url


#: the scope of an Entra ID token for Azure OpenAI (Azure AI services)
ENTRA_SCOPE = "https://cognitiveservices.azure.com/.default"
#: the variable ``openai.AzureOpenAI`` reads a ready token from
TOKEN_ENV = "AZURE_OPENAI_AD_TOKEN"
#: a token is fetched again when it has less than this left
_REFRESH_BEFORE_S = 300.0


def entra_token_source() -> Callable[[], str]:
    """A function giving a valid Entra ID bearer token: ``AZURE_OPENAI_AD_TOKEN``'s, or ``DefaultAzureCredential``'s
    (cached, fetched again five minutes before it expires). ``UserError`` saying what to do when neither can be."""
    fixed = os.environ.get(TOKEN_ENV, "").strip()
    if fixed:
        remember_env([TOKEN_ENV])  # scrubbed from everything a run writes, as keys are
        return lambda: fixed
    try:
        from azure.identity import DefaultAzureCredential
    except ImportError:
        raise UserError("provider azure-openai with api_key_env: null signs in with Microsoft Entra ID, but there "
                        f"is no token in {TOKEN_ENV} and azure-identity is not installed",
                        hint=f"pip install 'trialgrid[azure]' (then `az login`, a managed identity or a service "
                             f"principal's AZURE_CLIENT_ID / AZURE_TENANT_ID / AZURE_CLIENT_SECRET), or export "
                             f"{TOKEN_ENV}=$(az account get-access-token --resource https://cognitiveservices.azure.com "
                             f"--query accessToken -o tsv), or set api_key_env to a key's variable") from None
    credential = DefaultAzureCredential()
    lock = threading.Lock()
    held: list[Any] = []

    def token() -> str:
        # a fetch is one blocking call about once an hour; every other request reads the cached token
        with lock:
            if not held or held[0].expires_on - time.time() < _REFRESH_BEFORE_S:
                try:
                    held[:] = [credential.get_token(ENTRA_SCOPE)]
                except Exception as exc:  # azure-identity's CredentialUnavailableError, ClientAuthenticationError
                    raise ProviderError(ErrorKind.FATAL, "no Microsoft Entra ID token for Azure OpenAI: "
                                        f"{str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__} "
                                        f"(run `az login`, or set {TOKEN_ENV})") from None
            return str(held[0].token)

    return token
