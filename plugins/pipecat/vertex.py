"""``GeminiLiveVertexLLMService``: the stock Vertex AI service's drop-in.

The stock service loads and refreshes its service-account credentials in ``__init__`` (a
network call). This one turns them into a bearer token only when a connection is dialled,
through the transport's ``credential_provider``: construction never touches the network, each
dial gets a fresh token, and a connection is moved before its token expires. Pass your own
``credential_provider`` to supply tokens another way (the emulator accepts any token).
"""

from __future__ import annotations

import asyncio
import datetime
import json
from typing import Any

from google.genai import types
from loguru import logger
from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
from pipecat.services.google.gemini_live.llm import InputParams
from pipecat.services.google.gemini_live.vertex.llm import GeminiLiveVertexLLMSettings

from realtime_resumption.gemini import Credential, CredentialProvider
from realtime_resumption.gemini.failures import RetryPolicy
from realtime_resumption.gemini.outbox import OutboxLimits
from realtime_resumption.gemini.rotation import DEFAULT_RETRY_BUDGET
from realtime_resumption.gemini.watchdog import DEFAULT_RESUME_WATCHDOG
from realtime_resumption.pipecat.service import GeminiLiveLLMService
from realtime_resumption.resumption import ResumptionOptions

_SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]


class ServiceAccountTokens:
    """A ``CredentialProvider`` for Google credentials: a service account's JSON (``info``),
    its file (``path``), or Application Default Credentials. Loaded and refreshed off the
    event loop, when a dial asks for a token."""

    def __init__(self, info: str | None = None, path: str | None = None) -> None:
        self._info = info
        self._path = path
        self._credentials: Any = None

    def __repr__(self) -> str:
        source = "json" if self._info else "file" if self._path else "default"
        return f"ServiceAccountTokens({source})"

    async def __call__(self) -> Credential:
        return await asyncio.to_thread(self._token)

    def _token(self) -> Credential:
        from google.auth.transport.requests import Request

        if self._credentials is None:
            self._credentials = self._load()
        credentials = self._credentials
        if not credentials.valid:
            credentials.refresh(Request())
        expiry = credentials.expiry
        return Credential(
            token=credentials.token,
            expires_at=None if expiry is None else _utc_timestamp(expiry),
        )

    def _load(self) -> Any:
        from google.auth import default
        from google.oauth2 import service_account

        if self._info:
            return service_account.Credentials.from_service_account_info(  # type: ignore[no-untyped-call]
                json.loads(self._info), scopes=_SCOPES
            )
        if self._path:
            return service_account.Credentials.from_service_account_file(  # type: ignore[no-untyped-call]
                self._path, scopes=_SCOPES
            )
        credentials, _ = default(scopes=_SCOPES)  # type: ignore[no-untyped-call]
        return credentials


def _utc_timestamp(expiry: datetime.datetime) -> float:
    # google-auth keeps a naive UTC datetime.
    return expiry.replace(tzinfo=datetime.UTC).timestamp()


class GeminiLiveVertexLLMService(GeminiLiveLLMService):
    """Gemini Live on Vertex AI, moving sessions across connection rotation.

    The stock ``GeminiLiveVertexLLMService`` 1.14 constructor, plus ``resumption``,
    ``input_buffer``, ``retry_budget``, ``resume_watchdog``, ``transparent`` (Vertex AI's
    transparent resumption: the transport then replays exactly what a handle lacks) and
    ``credential_provider`` (instead of ``credentials``/``credentials_path``/ADC).
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
        self._credential_provider: CredentialProvider = credential_provider or ServiceAccountTokens(
            credentials, credentials_path
        )
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
            **kwargs,
        )

    def _transport_auth(self) -> dict[str, Any]:
        return {
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
