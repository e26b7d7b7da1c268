"""``RealtimeModel``: the OpenAI plugin's constructor, on a transport that moves sessions."""

from __future__ import annotations

import os
import weakref
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

import openai
from livekit.agents import llm
from livekit.agents.llm._realtime.openai_utils import (
    AZURE_DEFAULT_INPUT_AUDIO_TRANSCRIPTION,
    AZURE_DEFAULT_TURN_DETECTION,
    to_audio_transcription,
    to_noise_reduction,
    to_turn_detection,
)
from livekit.agents.types import (
    DEFAULT_API_CONNECT_OPTIONS,
    NOT_GIVEN,
    APIConnectOptions,
    NotGivenOr,
)
from livekit.agents.utils import is_given

from realtime_resumption.openai import (
    AZURE_CAP,
    InputTranscription,
    OpenAIRealtimeOptions,
    SemanticVad,
    ServerVad,
    SessionConfig,
)
from realtime_resumption.store import SessionStore, StoreOptions

from ..job_room import room_name
from ..log import logger

if TYPE_CHECKING:
    from .openai_session import RealtimeSession, StoreKeywords

DEFAULT_VOICE = "marin"
"""The OpenAI plugin's default voice."""
OPENAI_BASE_URL = "https://api.openai.com/v1"


class RealtimeModel(llm.RealtimeModel):
    """OpenAI Realtime for LiveKit Agents, with sessions that move before the service's cap.

    Takes the keywords of ``livekit.plugins.openai.realtime.RealtimeModel`` (same names and
    defaults), so switching is a change of import; ``RealtimeModel.with_azure(...)`` is the
    Azure constructor, as there. A session moves to a new one before the service closes it
    (60 minutes on OpenAI, 30 on Azure) at a turn boundary, and after a drop; the new session
    is given the conversation so far, and input sent meanwhile reaches it. Each move is
    reported by ``session_moved`` (``SessionMovedEvent``) and ``session_reconnected``, its
    figures through ``metrics_collected`` (``SessionMoveMetrics``).

    ``max_session_duration`` is the session's cap: stock restarts its connection then; here a
    move happens before it (None or not given: the service's own cap). ``realtime_options``
    (``OpenAIRealtimeOptions``) tunes moves and the dial (its ``model`` and ``session_cap``
    are taken from this constructor). ``http_session`` is not used: the ``openai`` SDK dials.

    ``store`` (a ``SessionStore``, e.g. ``RedisStore``) keeps each session's call so it
    survives its worker: a session made for the same key (``session_key``, by default the
    job's room name) in another process takes the call over (``store_options`` tunes it).
    """

    def __init__(
        self,
        *,
        model: str = "gpt-realtime",
        voice: str = DEFAULT_VOICE,
        modalities: NotGivenOr[list[Literal["text", "audio"]]] = NOT_GIVEN,
        tool_choice: NotGivenOr[llm.ToolChoice | None] = NOT_GIVEN,
        base_url: NotGivenOr[str] = NOT_GIVEN,
        input_audio_transcription: NotGivenOr[Any] = NOT_GIVEN,
        input_audio_noise_reduction: NotGivenOr[Any] = NOT_GIVEN,
        turn_detection: NotGivenOr[Any] = NOT_GIVEN,
        speed: NotGivenOr[float] = NOT_GIVEN,
        tracing: NotGivenOr[Any] = NOT_GIVEN,
        truncation: NotGivenOr[Any] = NOT_GIVEN,
        reasoning: NotGivenOr[Any] = NOT_GIVEN,
        api_key: str | None = None,
        http_session: object | None = None,
        azure_deployment: str | None = None,
        entra_token: str | None = None,
        max_session_duration: NotGivenOr[float | None] = NOT_GIVEN,
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
        temperature: NotGivenOr[float] = NOT_GIVEN,
        realtime_options: OpenAIRealtimeOptions | None = None,
        store: SessionStore | None = None,
        session_key: NotGivenOr[str] = NOT_GIVEN,
        store_options: StoreOptions | None = None,
        **kwargs: Any,
    ) -> None:
        api_version: str | None = kwargs.pop("api_version", None) or os.getenv("OPENAI_API_VERSION")
        if kwargs:
            raise TypeError(f"unexpected keyword arguments: {sorted(kwargs)}")
        for name, value in (("tracing", tracing), ("truncation", truncation)):
            if is_given(value) and value is not None:
                logger.warning(
                    f"{name} is not applied: the session configuration has no such field"
                )
        if is_given(reasoning) and reasoning is not None:
            logger.warning("reasoning is not applied by this transport")
        modalities = modalities if is_given(modalities) else ["text", "audio"]
        is_azure = (
            api_version is not None or entra_token is not None or azure_deployment is not None
        )
        key = api_key or os.environ.get("OPENAI_API_KEY")
        # The texts below are the OpenAI plugin's own, so errors read the same.
        if key is None and not is_azure:
            raise ValueError(
                "The api_key client option must be set either by passing api_key "
                "to the client or by setting the OPENAI_API_KEY environment variable"
            )
        if is_given(base_url):
            url = base_url
        elif is_azure:
            endpoint = os.getenv("AZURE_OPENAI_ENDPOINT")
            if endpoint is None:
                raise ValueError(
                    "Missing Azure endpoint. Please pass base_url "
                    "or set AZURE_OPENAI_ENDPOINT environment variable."
                )
            url = f"{endpoint.rstrip('/')}/openai"
        else:
            url = os.getenv("OPENAI_BASE_URL", OPENAI_BASE_URL)

        detection = to_turn_detection(turn_detection)
        transcription = to_audio_transcription(input_audio_transcription)
        noise = to_noise_reduction(input_audio_noise_reduction)
        self._config = SessionConfig(
            voice=voice,
            speed=speed if is_given(speed) else 1.0,
            tool_choice=_tool_choice(tool_choice),
            turn_detection=_detection(detection),
            transcription=(
                None
                if transcription is None or not transcription.model
                else InputTranscription(
                    model=transcription.model,
                    language=transcription.language,
                    prompt=transcription.prompt,
                )
            ),
            noise_reduction=None if noise is None else noise.type,
            output_modality="audio" if "audio" in modalities else "text",
        )
        self._is_azure = is_azure
        self._base_url = url
        self._model_name = azure_deployment if is_azure and azure_deployment else model
        self._options = replace(realtime_options or OpenAIRealtimeOptions(), model=self._model_name)
        if is_given(max_session_duration) and max_session_duration is not None:
            margin = self._options.move_margin
            if max_session_duration <= margin:
                raise ValueError(
                    f"max_session_duration ({float(max_session_duration)} s) must exceed "
                    f"realtime_options.move_margin ({margin} s): the move comes that long "
                    "before it"
                )
            self._options = replace(self._options, session_cap=max_session_duration)
        elif is_azure and self._options.session_cap == "service" and api_version is None:
            # Azure's GA surface is dialled with a plain OpenAI client: the transport would
            # count OpenAI's cap.
            self._options = replace(self._options, session_cap=AZURE_CAP)
        self._client_args: dict[str, Any] = {
            "api_key": key,
            "base_url": url,
            "entra_token": entra_token,
            "api_version": api_version,
        }
        self._conn_options = conn_options
        self._store = store
        self._session_key = session_key if is_given(session_key) else None
        self._store_options = store_options
        super().__init__(
            capabilities=llm.RealtimeCapabilities(
                message_truncation=True,
                turn_detection=detection is not None,
                can_disable_turn_detection=False,
                user_transcription=transcription is not None,
                auto_tool_reply_generation=True,
                audio_output="audio" in modalities,
                manual_function_calls=False,
                mutable_chat_context=True,
                mutable_instructions=True,
                mutable_tools=True,
                per_response_tool_choice=False,
            )
        )
        self._sessions: weakref.WeakSet[RealtimeSession] = weakref.WeakSet()

    @classmethod
    def with_azure(
        cls,
        *,
        azure_deployment: str,
        azure_endpoint: str | None = None,
        api_key: str | None = None,
        entra_token: str | None = None,
        base_url: str | None = None,
        voice: str = DEFAULT_VOICE,
        modalities: NotGivenOr[list[Literal["text", "audio"]]] = NOT_GIVEN,
        input_audio_transcription: NotGivenOr[Any] = NOT_GIVEN,
        input_audio_noise_reduction: Any = None,
        turn_detection: NotGivenOr[Any] = NOT_GIVEN,
        speed: NotGivenOr[float] = NOT_GIVEN,
        tracing: NotGivenOr[Any] = NOT_GIVEN,
        reasoning: NotGivenOr[Any] = NOT_GIVEN,
        http_session: object | None = None,
        max_session_duration: NotGivenOr[float | None] = NOT_GIVEN,
        temperature: NotGivenOr[float] = NOT_GIVEN,
        realtime_options: OpenAIRealtimeOptions | None = None,
        store: SessionStore | None = None,
        session_key: NotGivenOr[str] = NOT_GIVEN,
        store_options: StoreOptions | None = None,
        **kwargs: Any,
    ) -> RealtimeModel:
        """A model on Azure OpenAI, with the OpenAI plugin's Azure defaults (server VAD,
        whisper-1 transcription) and its errors for a missing key or endpoint."""
        api_key = api_key or os.getenv("AZURE_OPENAI_API_KEY")
        if api_key is None and entra_token is None:
            raise ValueError(
                "Missing credentials. Please pass one of `api_key`, `entra_token`, "
                "or the `AZURE_OPENAI_API_KEY` environment variable."
            )
        api_version = kwargs.pop("api_version", None) or os.getenv("OPENAI_API_VERSION")
        if base_url is None:
            azure_endpoint = azure_endpoint or os.getenv("AZURE_OPENAI_ENDPOINT")
            if azure_endpoint is None:
                raise ValueError(
                    "Missing Azure endpoint. Please pass the `azure_endpoint` "
                    "parameter or set the `AZURE_OPENAI_ENDPOINT` environment variable."
                )
            base_url = f"{azure_endpoint.rstrip('/')}/openai"
        elif azure_endpoint is not None:
            raise ValueError("base_url and azure_endpoint are mutually exclusive")
        return cls(
            voice=voice,
            modalities=modalities,
            input_audio_transcription=(
                input_audio_transcription
                if is_given(input_audio_transcription)
                else AZURE_DEFAULT_INPUT_AUDIO_TRANSCRIPTION
            ),
            input_audio_noise_reduction=input_audio_noise_reduction,
            turn_detection=(
                turn_detection if is_given(turn_detection) else AZURE_DEFAULT_TURN_DETECTION
            ),
            speed=speed,
            tracing=tracing,
            reasoning=reasoning,
            api_key=api_key,
            http_session=http_session,
            azure_deployment=azure_deployment,
            api_version=api_version,
            entra_token=entra_token,
            base_url=base_url,
            max_session_duration=max_session_duration,
            realtime_options=realtime_options,
            store=store,
            session_key=session_key,
            store_options=store_options,
            **kwargs,
        )

    @property
    def model(self) -> str:
        """The model's name (the deployment's on Azure)."""
        return self._model_name

    @property
    def provider(self) -> str:
        """The service's host, as the OpenAI plugin reports it."""
        from urllib.parse import urlparse

        return urlparse(self._base_url).netloc

    @property
    def config(self) -> SessionConfig:
        """The configuration each new session is given."""
        return self._config

    @property
    def realtime_options(self) -> OpenAIRealtimeOptions:
        """How sessions dial and move."""
        return self._options

    @property
    def conn_options(self) -> APIConnectOptions:
        return self._conn_options

    def store_keywords(self) -> StoreKeywords:
        """The store a new session keeps its call in (none without a ``store``), under
        ``session_key`` or, by default, the LiveKit job's room name."""
        if self._store is None:
            return {}
        return {
            "store": self._store,
            "session_key": self._session_key or room_name(),
            "store_options": self._store_options,
        }

    def client(self) -> openai.AsyncOpenAI:
        """A new SDK client for one session (its key never appears in a log or repr).

        On Azure with an ``api_version``, the legacy surface (``AsyncAzureOpenAI``); without
        one, Azure's GA surface, ``<endpoint>/openai/v1``, which takes the OpenAI client with
        the key in an ``api-key`` header (or the Entra token as the bearer), as the OpenAI
        plugin dials it."""
        args = self._client_args
        if self._is_azure and args["api_version"] is not None:
            return openai.AsyncAzureOpenAI(
                api_key=args["api_key"],
                azure_ad_token=args["entra_token"],
                api_version=args["api_version"],
                base_url=args["base_url"],
            )
        if self._is_azure:
            key = args["api_key"]
            return openai.AsyncOpenAI(
                api_key=args["entra_token"] or key,
                base_url=f"{args['base_url'].rstrip('/')}/v1",
                default_headers={"api-key": key} if key else None,
            )
        return openai.AsyncOpenAI(api_key=args["api_key"], base_url=args["base_url"])

    def session(self, *, turn_detection_disabled: bool = False) -> RealtimeSession:
        """A new session; it connects at once."""
        from .openai_session import RealtimeSession

        session = RealtimeSession(self, self)
        self._sessions.add(session)
        return session

    def update_options(
        self,
        *,
        voice: NotGivenOr[str] = NOT_GIVEN,
        tool_choice: NotGivenOr[llm.ToolChoice | None] = NOT_GIVEN,
        speed: NotGivenOr[float] = NOT_GIVEN,
        **unsupported: Any,
    ) -> None:
        """A new voice, tool choice or speed for new sessions and every live one."""
        if unsupported:
            logger.warning("options not applied here", extra={"options": sorted(unsupported)})
        if is_given(voice):
            self._config = replace(self._config, voice=voice)
        if is_given(tool_choice):
            self._config = replace(self._config, tool_choice=_tool_choice(tool_choice))
        if is_given(speed):
            self._config = replace(self._config, speed=speed)
        for session in self._sessions:
            session.update_options(voice=voice, tool_choice=tool_choice, speed=speed)

    async def aclose(self) -> None:
        """Nothing to release: each session owns its client and connection."""


def _tool_choice(choice: NotGivenOr[llm.ToolChoice | None]) -> Literal["auto", "none", "required"]:
    if not is_given(choice) or choice is None:
        return "auto"
    if choice in ("auto", "none", "required"):
        return choice
    logger.warning("a named tool_choice is not applied; it stays 'auto'")
    return "auto"


def _detection(detection: Any) -> ServerVad | SemanticVad | None:
    """The OpenAI SDK's turn detection as the transport's."""
    if detection is None:
        return None
    if detection.type == "semantic_vad":
        return SemanticVad(
            eagerness=detection.eagerness or "auto",
            create_response=detection.create_response is not False,
            interrupt_response=detection.interrupt_response is not False,
        )
    fields = {
        name: getattr(detection, name)
        for name in ("threshold", "prefix_padding_ms", "silence_duration_ms", "idle_timeout_ms")
        if getattr(detection, name, None) is not None
    }
    return ServerVad(
        create_response=detection.create_response is not False,
        interrupt_response=detection.interrupt_response is not False,
        **fields,
    )
