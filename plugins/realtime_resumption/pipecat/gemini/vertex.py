"""``GeminiLiveVertexLLMService``: the stock Vertex AI service's drop-in.

The stock service loads and refreshes its service-account credentials in ``__init__`` (a
network call). This one loads them there too, so missing or malformed credentials raise at
once with the stock exceptions, but turns them into a bearer token only when a connection is
dialled, through the transport's ``credential_provider``: construction never touches the
network, each dial gets a fresh token, and a connection is moved before its token expires. Pass
your own ``credential_provider`` to supply tokens another way (the emulator accepts any token).
"""

from __future__ import annotations

import asyncio
import datetime
import json
import os
from pathlib import Path
from typing import Any, Final

from google.genai import types
from loguru import logger
from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
from pipecat.services.google.gemini_live.llm import InputParams
from pipecat.services.google.gemini_live.vertex.llm import GeminiLiveVertexLLMSettings

from realtime_resumption.gemini import (
    DEFAULT_RESUME_WATCHDOG,
    DEFAULT_RETRY_BUDGET,
    Credential,
    CredentialProvider,
    OutboxLimits,
    RetryPolicy,
    StoreOptions,
)
from realtime_resumption.pipecat.gemini.service import GeminiLiveLLMService
from realtime_resumption.resumption import ResumptionOptions
from realtime_resumption.store import SessionStore

_SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
_DMI_PRODUCT: Final = Path("/sys/class/dmi/id/product_name")
"""Names the machine's maker: "Google" on Compute Engine (a local file, no network)."""
_CLOUD_ENVIRONMENT: Final = ("GCE_METADATA_HOST", "GCE_METADATA_IP", "K_SERVICE", "GAE_APPLICATION")
"""Variables set where Google Cloud's metadata server gives Application Default Credentials."""


def load_credentials(info: str | None, path: str | None) -> Any:
    """The stock service's credentials, loaded without its token refresh (no network): a
    service account's JSON (``info``) or file (``path``), parsed now, so malformed or missing
    credentials raise what the stock service raises (``json.JSONDecodeError``,
    ``google.auth.exceptions.MalformedError``, ``FileNotFoundError``). With neither, ``None``:
    Application Default Credentials, looked up at the first dial; ``ValueError("No valid
    credentials provided.")`` now when no source of them is on this machine."""
    from google.oauth2 import service_account

    if info:
        return service_account.Credentials.from_service_account_info(  # type: ignore[no-untyped-call]
            json.loads(info), scopes=_SCOPES
        )
    if path:
        return service_account.Credentials.from_service_account_file(  # type: ignore[no-untyped-call]
            path, scopes=_SCOPES
        )
    if not _default_credentials_available():
        raise ValueError("No valid credentials provided.")
    return None


def _default_credentials_available() -> bool:
    """Whether Application Default Credentials have a source here, judged without the network
    (the SDK's own lookup pings the metadata server): the variable naming a key file, gcloud's
    file, or a Google Cloud machine."""
    named = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
    if named:
        return Path(named).is_file()
    config = os.environ.get("CLOUDSDK_CONFIG")
    if config:
        gcloud = Path(config)
    elif os.name == "nt":
        gcloud = Path(os.environ.get("APPDATA", "")) / "gcloud"
    else:
        gcloud = Path.home() / ".config" / "gcloud"
    if (gcloud / "application_default_credentials.json").is_file():
        return True
    if any(os.environ.get(name) for name in _CLOUD_ENVIRONMENT):
        return True
    try:
        return _DMI_PRODUCT.read_text().strip().startswith("Google")
    except OSError:
        return False


class ServiceAccountTokens:
    """A ``CredentialProvider`` for Google credentials: a service account's JSON (``info``),
    its file (``path``), or Application Default Credentials (``load_credentials`` parses the
    first two, and checks the third has a source, at construction). Refreshed off the event
    loop, when a dial asks for a token."""

    def __init__(self, info: str | None = None, path: str | None = None) -> None:
        self._source = "json" if info else "file" if path else "default"
        self.credentials: Any = load_credentials(info, path)
        """The loaded ``google.auth`` credentials (``None`` for ADC until the first dial)."""

    def __repr__(self) -> str:
        return f"ServiceAccountTokens({self._source})"

    async def __call__(self) -> Credential:
        return await asyncio.to_thread(self._token)

    def _token(self) -> Credential:
        from google.auth.transport.requests import Request

        if self.credentials is None:
            from google.auth import default

            self.credentials, _ = default(scopes=_SCOPES)  # type: ignore[no-untyped-call]
        credentials = self.credentials
        if not credentials.valid:
            credentials.refresh(Request())
        expiry = credentials.expiry
        return Credential(
            token=credentials.token,
            expires_at=None if expiry is None else _utc_timestamp(expiry),
        )


def _utc_timestamp(expiry: datetime.datetime) -> float:
    # google-auth keeps a naive UTC datetime.
    return expiry.replace(tzinfo=datetime.UTC).timestamp()


class GeminiLiveVertexLLMService(GeminiLiveLLMService):
    """Gemini Live on Vertex AI, moving sessions across connection rotation.

    The stock ``GeminiLiveVertexLLMService`` 1.14 constructor, plus ``resumption``,
    ``input_buffer``, ``retry_budget``, ``resume_watchdog``, ``transparent`` (Vertex AI's
    transparent resumption: the transport then replays exactly what a handle lacks),
    ``credential_provider`` (instead of ``credentials``/``credentials_path``/ADC) and
    ``store``/``session_key``/``store_options`` (calls that survive the worker).
    """

    Settings = GeminiLiveVertexLLMSettings
    _settings: GeminiLiveVertexLLMSettings

    _DEFAULT_MODEL = "google/gemini-3.8-live"

    def __init__(
        self,
        *,
        credentials: str | None = None,
        credentials_path: str | None = None,
        location: str,
        project_id: str,
        model: str | None = None,
        voice_id: str = "Charon",
        start_audio_paused: bool = False,
        start_video_paused: bool = False,
        system_instruction: str | None = None,
        tools: list[dict[str, Any]] | ToolsSchema | None = None,
        params: InputParams | None = None,
        settings: GeminiLiveVertexLLMSettings | None = None,
        inference_on_context_initialization: bool = True,
        file_api_base_url: str = "https://generativelanguage.googleapis.com/v1beta/files",
        http_options: types.HttpOptions | None = None,
        resumption: ResumptionOptions | None = None,
        input_buffer: OutboxLimits | None = None,
        retry_budget: int | RetryPolicy = DEFAULT_RETRY_BUDGET,
        resume_watchdog: float | None = DEFAULT_RESUME_WATCHDOG,
        transparent: bool = False,
        credential_provider: CredentialProvider | None = None,
        store: SessionStore | None = None,
        session_key: str | None = None,
        store_options: StoreOptions | None = None,
        **kwargs: Any,
    ) -> None:
        if "api_key" in kwargs:
            logger.error(
                "GeminiLiveVertexLLMService does not accept 'api_key' parameter. "
                "Use 'credentials' or 'credentials_path' instead for Vertex AI authentication."
            )
            raise ValueError(
                "Invalid parameter 'api_key'. Use 'credentials' or 'credentials_path' for "
                "Vertex AI authentication."
            )
        self._project_id = project_id
        self._location = location
        self._transparent = transparent
        if credential_provider is None:
            tokens = ServiceAccountTokens(credentials, credentials_path)
            credential_provider = tokens
            self._credentials: Any = tokens.credentials
        else:
            self._credentials = None
        self._credential_provider: CredentialProvider = credential_provider
        super().__init__(
            api_key="",
            model=model,
            voice_id=voice_id,
            start_audio_paused=start_audio_paused,
            start_video_paused=start_video_paused,
            system_instruction=system_instruction,
            tools=tools,
            params=params,
            settings=settings,
            inference_on_context_initialization=inference_on_context_initialization,
            file_api_base_url=file_api_base_url,
            http_options=http_options,
            resumption=resumption,
            input_buffer=input_buffer,
            retry_budget=retry_budget,
            resume_watchdog=resume_watchdog,
            store=store,
            session_key=session_key,
            store_options=store_options,
            **kwargs,
        )

    def create_client(self) -> None:
        """Make no client up front: each dial makes its own with a fresh token from the
        credential provider. A subclass that sets ``self._client`` here (as the stock
        service's ``create_client`` does, from ``self._credentials``) has every dial use that
        client instead."""
        self._client = None

    def _transport_auth(self) -> dict[str, Any]:
        if self._client is not None:
            return {"client": self._client, "transparent": self._transparent}
        return {
            "http_options": self._http_options,
            "vertexai": True,
            "project": self._project_id,
            "location": self._location,
            "credential_provider": self._credential_provider,
            "transparent": self._transparent,
        }

    @property
    def _takes_initial_history(self) -> bool:
        # Vertex AI has no history_config.
        return False

    @property
    def _supports_non_blocking_tools(self) -> bool:
        # Vertex AI's endpoint breaks on NON_BLOCKING declarations and scheduling.
        return False

    @property
    def file_api(self) -> Any:
        """Not on Vertex AI (use Google Cloud Storage), as with the stock service."""
        raise NotImplementedError(
            "When using Vertex AI, the recommended approach is to use Google Cloud Storage "
            "for file handling. The Gemini File API is not directly supported in this context."
        )
