"""What shapes a Gemini Live connection: construction options, credentials, the setup message."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Final

import pydantic
from google import genai
from google.genai import types

from realtime_resumption.redaction import redact
from realtime_resumption.store import StoreOptions as StoreOptions
from realtime_resumption.transport import GenerationSettings, ResponseModality, SessionUpdate

DEFAULT_MODEL: Final = "gemini-2.5-flash-native-audio-preview-12-2025"
DEFAULT_SETUP_TIMEOUT: Final = 10.0
"""Seconds a dial may take to get ``setupComplete``; the SDK itself would wait forever."""


HANDLE_VALIDITY: Final = {"gemini": 7200.0, "vertex": 86400.0}
"""How long a resumption handle stays valid after its session's connection ended, in seconds:
2 hours on the Gemini API, 24 hours on Vertex AI (as documented; the emulator's
``handle_validity`` defaults to the same). A stored session record expires with its handle."""


def sliding_window(trigger_tokens: int | None = None) -> types.ContextWindowCompressionConfig:
    """Context-window compression by a sliding window: the service drops the oldest turns
    once the context reaches ``trigger_tokens`` (None: the service's default threshold).
    Without compression Gemini Live ends an audio session at 15 minutes (audio and video: 2);
    with it, a session has no such limit."""
    config = types.ContextWindowCompressionConfig(sliding_window=types.SlidingWindow())
    if trigger_tokens is not None:
        config.trigger_tokens = trigger_tokens
    return config


DEFAULT_COMPRESSION: Final = sliding_window()
"""The compression every session asks for unless told otherwise: the one default of this
package that differs from the stock integrations (Pipecat's and LiveKit's leave compression
off, so their calls end at the 15-minute cap). Shared: never mutate it."""


ALIAS_API_VERSION: Final = "v1beta"
"""The one Gemini API version that serves ``-latest`` model aliases."""


def live_api_version(model: str) -> str | None:
    """The Gemini API version ``model``'s Live endpoint must be dialled on, or None where any
    serves it: a ``-latest`` alias exists on ``v1beta`` only, and google-genai 3.x dials ``v1``
    unless told otherwise (2.x dialled ``v1beta``)."""
    return ALIAS_API_VERSION if model.removeprefix("models/").endswith("-latest") else None


@dataclass(frozen=True)
class Credential:
    """A short-lived credential from a ``credential_provider``.

    ``token`` is an API key or ephemeral token (Gemini API) or an OAuth access token (Vertex
    AI). ``expires_at`` is when it stops working, in seconds since the epoch (``time.time()``);
    ``None`` means it does not expire.
    """

    token: str = field(repr=False)
    expires_at: float | None = None

    def __repr__(self) -> str:
        return f"Credential(token={redact(self.token)}, expires_at={self.expires_at})"


CredentialProvider = Callable[[], Awaitable[Credential]]
"""Called before every dial; the connection it opens closes when the credential expires."""


@dataclass(frozen=True)
class Auth:
    """How to reach the service: the Gemini API (``api_key``) or Vertex AI."""

    api_key: str | None = field(default=None, repr=False)
    vertexai: bool = False
    project: str | None = None
    location: str | None = None
    credentials: object | None = field(default=None, repr=False)
    """A ``google.auth.credentials.Credentials`` for Vertex AI."""
    http_options: types.HttpOptions | None = None

    def client(self, model: str, credential: Credential | None = None) -> genai.Client:
        """A client for dialling ``model``; with ``credential``, authenticated by it.

        On the Gemini API, the client dials the API version ``model`` needs
        (:func:`live_api_version`) unless the app chose one (``http_options.api_version`` or
        ``GOOGLE_GENAI_API_VERSION``): an SDK's default never moves a model off the only
        endpoint that serves it."""
        if not self.vertexai:
            api_key = credential.token if credential is not None else self.api_key
            return genai.Client(api_key=api_key, http_options=self._gemini_http_options(model))
        credentials: Any = self.credentials
        if credential is not None:
            from google.oauth2.credentials import Credentials

            credentials = Credentials(token=credential.token)  # type: ignore[no-untyped-call]
        return genai.Client(
            vertexai=True,
            project=self.project,
            location=self.location,
            credentials=credentials,
            http_options=self.http_options,
        )

    def _gemini_http_options(self, model: str) -> types.HttpOptions | None:
        options = self.http_options
        version = live_api_version(model)
        chosen = (options is not None and options.api_version) or os.environ.get(
            "GOOGLE_GENAI_API_VERSION"
        )
        if version is None or chosen:
            return options
        return (options or types.HttpOptions()).model_copy(update={"api_version": version})


def check_arguments(
    *,
    response_modality: str,
    setup_timeout: float,
    client: genai.Client | None,
    api_key: str | None,
    credentials: object | None,
    http_options: types.HttpOptions | None,
    credential_provider: CredentialProvider | None,
    vertexai: bool,
    project: str | None,
    location: str | None,
    transparent: bool,
    has_store: bool,
    session_key: str | None,
) -> bool:
    """Check the arguments ``GeminiLiveTransport`` takes together (``ValueError`` saying which
    do not go together); returns whether they select Vertex AI (a ready client's own choice,
    else ``vertexai`` or a project or location)."""
    if response_modality not in ("audio", "text"):
        raise ValueError(f"response_modality must be 'audio' or 'text', not {response_modality!r}")
    if not setup_timeout > 0:
        raise ValueError("setup_timeout must be > 0 seconds")
    if client is not None and (
        api_key is not None
        or credentials is not None
        or http_options is not None
        or credential_provider is not None
    ):
        raise ValueError(
            "pass either a ready client or what to build one from "
            "(api_key, credentials, http_options, credential_provider), not both"
        )
    vertex = (
        bool(client.vertexai)
        if client is not None
        else vertexai or project is not None or location is not None
    )
    if transparent and not vertex:
        raise ValueError(
            "transparent session resumption is a Vertex AI feature: the Gemini API refuses "
            "it (use vertexai=True, or transparent=False)"
        )
    if has_store and session_key is None:
        raise ValueError("a store needs a session_key: the call's key in it")
    return vertex


_TOOL_KEYS: Final = frozenset(types.Tool.model_fields)


def normalise_tools(tools: Sequence[object]) -> tuple[types.Tool, ...]:
    """google-genai ``Tool``s from tools and function declarations (objects or dicts).

    Bare function declarations are gathered into one ``Tool``, after the given ``Tool``s.
    """
    out: list[types.Tool] = []
    functions: list[types.FunctionDeclaration] = []
    for tool in tools:
        if isinstance(tool, types.Tool):
            out.append(tool)
        elif isinstance(tool, types.FunctionDeclaration):
            functions.append(tool)
        elif isinstance(tool, Mapping):
            if not _TOOL_KEYS.intersection(tool):
                functions.append(types.FunctionDeclaration.model_validate(tool))
            else:
                out.append(types.Tool.model_validate(tool))
        else:
            raise TypeError(
                "tools must be google.genai.types.Tool or FunctionDeclaration objects or their "
                f"dict forms, not {type(tool).__name__}"
            )
    if functions:
        out.append(types.Tool(function_declarations=functions))
    return tuple(out)


@dataclass(frozen=True)
class LiveOptions:
    """Everything the setup message carries, apart from the resumption handle."""

    model: str = DEFAULT_MODEL
    voice: str | None = None
    language: str | None = None
    response_modality: ResponseModality = "audio"
    system_instruction: str | None = None
    tools: tuple[types.Tool, ...] = ()
    input_audio_transcription: bool = True
    output_audio_transcription: bool = True
    realtime_input_config: types.RealtimeInputConfig | None = None
    context_window_compression: types.ContextWindowCompressionConfig | None = field(
        default_factory=sliding_window
    )
    """Sent as the setup's ``contextWindowCompression``; None sends none (compression off)."""
    initial_history_in_client_content: bool = False
    """Gemini 3.x: history may be seeded with ``client_content`` before the first realtime
    input (``history_config``)."""
    generation: GenerationSettings = field(default_factory=GenerationSettings)

    def __post_init__(self) -> None:
        _generation_fields(self.generation)  # a bad value fails here, not at the first dial

    @cached_property
    def declares_functions(self) -> bool:
        """Whether the setup declares a function the model may call (a ``toolCall``)."""
        return any(tool.function_declarations for tool in self.tools)

    def updated(self, update: SessionUpdate) -> LiveOptions:
        """These options with ``update`` applied (``None`` fields leave a setting as it is)."""
        changes: dict[str, Any] = {}
        if update.instructions is not None:
            changes["system_instruction"] = update.instructions
        if update.tools is not None:
            changes["tools"] = normalise_tools(update.tools)
        if update.voice is not None:
            changes["voice"] = update.voice
        if update.response_modality is not None:
            changes["response_modality"] = update.response_modality
        if update.input_transcription is not None:
            changes["input_audio_transcription"] = update.input_transcription
        if update.output_transcription is not None:
            changes["output_audio_transcription"] = update.output_transcription
        if update.generation is not None:
            changes["generation"] = self.generation.merged(update.generation)
        return replace(self, **changes)

    def live_connect_config(
        self, *, handle: str | None = None, transparent: bool = False
    ) -> types.LiveConnectConfig:
        """The SDK config for one dial. ``handle`` resumes a session; without one the server
        still issues handles (``"sessionResumption": {}``)."""
        config = types.LiveConnectConfig(
            response_modalities=[
                types.Modality.AUDIO if self.response_modality == "audio" else types.Modality.TEXT
            ],
            session_resumption=types.SessionResumptionConfig(
                handle=handle, transparent=True if transparent else None
            ),
        )
        if self.system_instruction is not None:
            config.system_instruction = types.Content(
                role="system", parts=[types.Part(text=self.system_instruction)]
            )
        if self.tools:
            config.tools = list(self.tools)
        if self.voice is not None or self.language is not None:
            config.speech_config = types.SpeechConfig(
                voice_config=(
                    types.VoiceConfig(
                        prebuilt_voice_config=types.PrebuiltVoiceConfig(voice_name=self.voice)
                    )
                    if self.voice is not None
                    else None
                ),
                language_code=self.language,
            )
        if self.input_audio_transcription:
            config.input_audio_transcription = types.AudioTranscriptionConfig()
        if self.output_audio_transcription and self.response_modality == "audio":
            config.output_audio_transcription = types.AudioTranscriptionConfig()
        if self.realtime_input_config is not None:
            config.realtime_input_config = self.realtime_input_config
        if self.context_window_compression is not None:
            config.context_window_compression = self.context_window_compression
        if self.initial_history_in_client_content:
            config.history_config = types.HistoryConfig(initial_history_in_client_content=True)
        _apply_generation(config, self.generation)
        return config


def _apply_generation(config: types.LiveConnectConfig, settings: GenerationSettings) -> None:
    """Put ``settings`` into ``config``. The SDK sends the top-level fields inside the setup's
    ``generationConfig``, merged with ``generation_config``, which alone carries penalties."""
    for name, value in _generation_fields(settings).items():
        setattr(config, name, value)


_PENALTIES: Final = ("presence_penalty", "frequency_penalty")


def _generation_fields(settings: GenerationSettings) -> dict[str, Any]:
    """``settings`` as validated ``LiveConnectConfig`` field values (the provider's dict forms
    become SDK objects); raises ValueError for a value the SDK does not take."""
    given = {k: v for k, v in vars(settings).items() if v is not None}
    penalties = {k: given.pop(k) for k in _PENALTIES if k in given}
    if "thinking" in given:
        given["thinking_config"] = given.pop("thinking")
    if penalties:
        given["generation_config"] = penalties
    try:
        validated = types.LiveConnectConfig(**given)
    except pydantic.ValidationError as error:
        raise ValueError(f"invalid generation settings: {error}") from None
    return {name: getattr(validated, name) for name in given}
