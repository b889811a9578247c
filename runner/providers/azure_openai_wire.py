"""Azure OpenAI: Chat Completions on a resource of your own, its key sent as ``api-key``.

Azure serves the Chat Completions wire format (``openai_wire``: same bodies, same answers, same error bodies)
at its own paths and with its own key header:

- without ``api_version``, Azure's v1 API: ``{base_url}/openai/v1/chat/completions``, the deployment named by
  the body's ``model``;
- with ``api_version``, the deployments API: ``{base_url}/openai/deployments/{model}/chat/completions
  ?api-version={api_version}`` (the body keeps ``model`` too, as the ``openai.AzureOpenAI`` client sends it).

``base_url`` is the resource's endpoint (``https://RESOURCE.openai.azure.com``); the key comes from
``api_key_env`` (default ``AZURE_OPENAI_API_KEY``) and goes out as ``api-key``. A prompt Azure's content filter
refuses (400, code ``content_filter``) and an answer it cuts (``finish_reason: content_filter``) are error rows
of kind ``content_filter`` (``classify``), never a model answer. Its 429s carry ``retry-after`` and the
``x-ratelimit-*`` headers the pacing already reads.
"""

from __future__ import annotations

from urllib.parse import quote

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

    def __init__(self, connection: Connection, **kw: object) -> None:
        super().__init__(connection, **kw)  # type: ignore[arg-type]
        self.resource = (connection.base_url or "").rstrip("/")
        self._urls: dict[str, str] = {}

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
