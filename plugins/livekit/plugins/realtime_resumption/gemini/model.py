"""``RealtimeModel``: the Google plugin's constructor, on a transport that moves sessions."""

from __future__ import annotations

import os
import weakref
from dataclasses import replace
from typing import TYPE_CHECKING, TypeVar, cast

from google.genai import types
from livekit.agents import llm
from livekit.agents.types import (
    DEFAULT_API_CONNECT_OPTIONS,
    NOT_GIVEN,
    APIConnectOptions,
    NotGivenOr,
)
from livekit.agents.utils import images, is_given
from livekit.plugins.google.realtime.realtime_api import (
    KNOWN_GEMINI_API_MODELS,
    KNOWN_VERTEXAI_MODELS,
)

from realtime_resumption import OutboxLimits, ResumptionOptions, RetryPolicy
from realtime_resumption.gemini import (
    DEFAULT_MODEL,
    DEFAULT_RESUME_WATCHDOG,
    DEFAULT_RETRY_BUDGET,
    StoreOptions,
    TransportOptions,
    sliding_window,
)
from realtime_resumption.store import SessionStore
from realtime_resumption.transport import GenerationSettings, ResponseModality

from ..log import logger
from .options import (
    DEFAULT_IMAGE_ENCODE_OPTIONS,
    Options,
    live_text,
    livekit_telemetry,
    warn_vertex_scheduling_unsupported,
)

if TYPE_CHECKING:
    from .session import RealtimeSession

DEFAULT_VERTEX_MODEL = "gemini-live-2.5-flash-native-audio"


class RealtimeModel(llm.RealtimeModel):
    """Gemini Live for LiveKit Agents, with sessions that survive connection rotation.

    Takes every parameter of ``livekit.plugins.google.realtime.RealtimeModel`` (same names and
    defaults), so switching is a change of import. On top of it, sessions move to a new
    connection by themselves: at the next resumable point after a ``goAway``, after a dropped
    connection (with backoff, within ``retry_budget`` failed attempts per session), and when
    instructions or tools change — the answer in progress is never cut, and audio, text and
    tool results sent during a move are delivered once. ``resumption`` times the moves
    (``ResumptionOptions``), ``input_buffer`` bounds what is held across one (``OutboxLimits``),
    ``resume_watchdog`` bounds how long a resumed session may leave the user unanswered (None:
    off), ``transparent`` asks Vertex AI for exact replay. ``context_window_compression`` left
    unset is a sliding window (the Google plugin sends none, and the service ends an audio
    session at 15 minutes without one); None turns compression off. Each move is reported by a
    ``session_moved`` event (``SessionMovedEvent``) and then ``session_reconnected``.

    ``store`` (a ``SessionStore``, e.g. ``RedisStore``) keeps each session's state so a call
    survives its worker: a session made for the same key (``session_key``, by default the
    job's room name) in another process takes the call over (``store_options`` tunes it).

    ``conn_options`` bounds the first connection: ``timeout`` per setup, ``max_retry``
    attempts ``retry_interval`` apart. ``session_resumption.handle`` resumes an earlier
    session. The generation settings (temperature, max output tokens, top-p/k, penalties,
    thinking, media resolution, affective dialog, proactivity) reach the setup as with the
    Google plugin; ``candidate_count`` other than 1 is logged and not applied (Gemini Live
    gives one answer per turn).
    """

    def __init__(
        self,
        *,
        instructions: NotGivenOr[str] = NOT_GIVEN,
        model: NotGivenOr[str] = NOT_GIVEN,
        api_key: NotGivenOr[str] = NOT_GIVEN,
        voice: str = "Puck",
        language: NotGivenOr[str] = NOT_GIVEN,
        modalities: NotGivenOr[list[types.Modality]] = NOT_GIVEN,
        vertexai: NotGivenOr[bool] = NOT_GIVEN,
        project: NotGivenOr[str] = NOT_GIVEN,
        location: NotGivenOr[str] = NOT_GIVEN,
        candidate_count: int = 1,
        temperature: NotGivenOr[float] = NOT_GIVEN,
        max_output_tokens: NotGivenOr[int] = NOT_GIVEN,
        top_p: NotGivenOr[float] = NOT_GIVEN,
        top_k: NotGivenOr[int] = NOT_GIVEN,
        presence_penalty: NotGivenOr[float] = NOT_GIVEN,
        frequency_penalty: NotGivenOr[float] = NOT_GIVEN,
        input_audio_transcription: NotGivenOr[types.AudioTranscriptionConfig | None] = NOT_GIVEN,
        output_audio_transcription: NotGivenOr[types.AudioTranscriptionConfig | None] = NOT_GIVEN,
        image_encode_options: NotGivenOr[images.EncodeOptions] = NOT_GIVEN,
        enable_affective_dialog: NotGivenOr[bool] = NOT_GIVEN,
        proactivity: NotGivenOr[bool] = NOT_GIVEN,
        realtime_input_config: NotGivenOr[types.RealtimeInputConfig] = NOT_GIVEN,
        context_window_compression: NotGivenOr[
            types.ContextWindowCompressionConfig | None
        ] = NOT_GIVEN,
        tool_behavior: NotGivenOr[types.Behavior] = NOT_GIVEN,
        tool_response_scheduling: NotGivenOr[types.FunctionResponseScheduling] = NOT_GIVEN,
        session_resumption: NotGivenOr[types.SessionResumptionConfig] = NOT_GIVEN,
        api_version: NotGivenOr[str] = NOT_GIVEN,
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
        http_options: NotGivenOr[types.HttpOptions] = NOT_GIVEN,
        media_resolution: NotGivenOr[types.MediaResolution] = NOT_GIVEN,
        thinking_config: NotGivenOr[types.ThinkingConfig] = NOT_GIVEN,
        credentials: object | None = None,
        resumption: NotGivenOr[ResumptionOptions] = NOT_GIVEN,
        input_buffer: NotGivenOr[OutboxLimits] = NOT_GIVEN,
        retry_budget: NotGivenOr[int | RetryPolicy] = NOT_GIVEN,
        resume_watchdog: NotGivenOr[float | None] = NOT_GIVEN,
        transparent: bool = False,
        store: SessionStore | None = None,
        session_key: NotGivenOr[str] = NOT_GIVEN,
        store_options: StoreOptions | None = None,
    ) -> None:
        use_vertexai = (
            vertexai
            if is_given(vertexai)
            else os.environ.get("GOOGLE_GENAI_USE_VERTEXAI", "0").lower() in ("true", "1")
        )
        model_name = (
            model if is_given(model) else (DEFAULT_VERTEX_MODEL if use_vertexai else DEFAULT_MODEL)
        )
        modality: ResponseModality = "audio"
        if is_given(modalities) and types.Modality.AUDIO not in modalities:
            modality = "text"
        input_transcription = (
            input_audio_transcription is not None if is_given(input_audio_transcription) else True
        )
        output_transcription = (
            output_audio_transcription is not None if is_given(output_audio_transcription) else True
        )

        if use_vertexai and is_given(tool_response_scheduling):
            warn_vertex_scheduling_unsupported()
        key = api_key if is_given(api_key) else os.environ.get("GOOGLE_API_KEY")
        gcp_project = project if is_given(project) else os.environ.get("GOOGLE_CLOUD_PROJECT")
        gcp_location = (
            location
            if is_given(location)
            else os.environ.get("GOOGLE_CLOUD_LOCATION") or "us-central1"
        )
        # The texts below are the Google plugin's own, so logs and errors read the same.
        if use_vertexai:
            if not gcp_project:
                gcp_project = _default_project()
            if not gcp_project:
                raise ValueError(
                    "Project is required for VertexAI via project kwarg or GOOGLE_CLOUD_PROJECT"
                    " environment variable"
                )
        else:
            if credentials is not None:
                logger.warning(
                    "'credentials' is only applicable to VertexAI and will be ignored for the"
                    " Gemini API"
                )
                credentials = None
            if not key:
                raise ValueError(
                    "API key is required for Google API either via api_key or GOOGLE_API_KEY"
                    " environment variable"
                )
        _warn_model_api_mismatch(model_name, use_vertexai)
        if (
            not use_vertexai
            and model_name.removeprefix("models/") == "gemini-3.8-live"
            and is_given(thinking_config)
            and thinking_config.thinking_level is not None
        ):
            raise ValueError(
                f"Model '{model_name}' does not support thinking_level on the Gemini API. "
                "Omit thinking_level or use 'gemini-3.8-live-extended-thinking'."
            )

        resumption_handle: str | None = None
        if is_given(session_resumption):
            resumption_handle = session_resumption.handle
            transparent = transparent or bool(session_resumption.transparent)
        if transparent and not use_vertexai:
            raise ValueError(
                "transparent session resumption is a Vertex AI feature: the Gemini API refuses it"
            )

        if candidate_count != 1:
            logger.warning(
                "candidate_count is not applied: Gemini Live gives one answer per turn",
                extra={"candidate_count": candidate_count},
            )
        generation = GenerationSettings(
            temperature=_given(temperature),
            max_output_tokens=_given(max_output_tokens),
            top_p=_given(top_p),
            top_k=_given(top_k),
            presence_penalty=_given(presence_penalty),
            frequency_penalty=_given(frequency_penalty),
            media_resolution=_given(media_resolution),
            thinking=_given(thinking_config),
            enable_affective_dialog=_given(enable_affective_dialog),
            proactivity=(
                types.ProactivityConfig(proactive_audio=proactivity)
                if is_given(proactivity)
                else None
            ),
        )

        options_http = _given(http_options)
        if is_given(api_version):
            options_http = (options_http or types.HttpOptions()).model_copy(
                update={"api_version": api_version}
            )

        # What each session's transport is built from, made (and checked) once here.
        # mypy joins the budget's two types to object through ``_given``.
        budget = cast("int | RetryPolicy | None", _given(retry_budget))
        transport = TransportOptions(
            api_key=key if not use_vertexai else None,
            vertexai=use_vertexai,
            project=gcp_project if use_vertexai else None,
            location=gcp_location if use_vertexai else None,
            credentials=credentials if use_vertexai else None,
            model=model_name,
            voice=voice,
            language=_given(language),
            response_modality=modality,
            system_instruction=_given(instructions),
            input_audio_transcription=input_transcription,
            output_audio_transcription=output_transcription,
            realtime_input_config=realtime_input_config
            if is_given(realtime_input_config)
            else None,
            context_window_compression=(
                context_window_compression
                if is_given(context_window_compression)
                else sliding_window()
            ),
            generation=generation,
            http_options=options_http,
            setup_timeout=conn_options.timeout,
            transparent=transparent,
            initial_history_in_client_content=live_text(model_name),
            telemetry=livekit_telemetry(),
            resumption=_given(resumption),
            input_buffer=_given(input_buffer),
            retry_budget=budget if budget is not None else DEFAULT_RETRY_BUDGET,
            resume_watchdog=(
                resume_watchdog if is_given(resume_watchdog) else DEFAULT_RESUME_WATCHDOG
            ),
            store_options=store_options,
        )
        self._opts = Options(
            transport_options=transport,
            voice=voice,
            instructions=_given(instructions),
            image_encode_options=(
                image_encode_options
                if is_given(image_encode_options)
                else DEFAULT_IMAGE_ENCODE_OPTIONS
            ),
            tool_behavior=tool_behavior,
            tool_response_scheduling=tool_response_scheduling,
            conn_options=conn_options,
            resumption_handle=resumption_handle,
            generation=generation,
            store=store,
            session_key=_given(session_key),
        )
        super().__init__(
            capabilities=llm.RealtimeCapabilities(
                message_truncation=False,
                turn_detection=not self._opts.manual_activity,
                user_transcription=input_transcription,
                auto_tool_reply_generation=True,
                audio_output=modality == "audio",
                manual_function_calls=False,
                mutable_chat_context=True,
                mutable_instructions=True,
                mutable_tools=True,
                per_response_tool_choice=False,
            )
        )
        self._sessions: weakref.WeakSet[RealtimeSession] = weakref.WeakSet()

    @property
    def model(self) -> str:
        """The Gemini Live model's name."""
        return self._opts.model

    @property
    def provider(self) -> str:
        """``Vertex AI`` or ``Gemini``."""
        return "Vertex AI" if self._opts.vertexai else "Gemini"

    def session(self, *, turn_detection_disabled: bool = False) -> RealtimeSession:
        """A new session; it connects at once. ``turn_detection_disabled`` is not supported
        (``can_disable_turn_detection`` is False), as with the Google plugin."""
        from .session import RealtimeSession

        session = RealtimeSession(
            self, replace(self._opts), on_setup_rolled_back=self._setup_rolled_back
        )
        self._sessions.add(session)
        return session

    def update_options(
        self,
        *,
        voice: NotGivenOr[str] = NOT_GIVEN,
        temperature: NotGivenOr[float] = NOT_GIVEN,
        tool_behavior: NotGivenOr[types.Behavior] = NOT_GIVEN,
        tool_response_scheduling: NotGivenOr[types.FunctionResponseScheduling] = NOT_GIVEN,
    ) -> None:
        """Change settings for new sessions and every live one (a new voice, temperature or
        tool behaviour moves a live session to a connection set up with it)."""
        if is_given(voice):
            self._opts.voice = voice
        if is_given(tool_behavior):
            self._opts.tool_behavior = tool_behavior
        if is_given(tool_response_scheduling):
            self._opts.tool_response_scheduling = tool_response_scheduling
        if is_given(temperature):
            self._opts.generation = self._opts.generation.merged(
                GenerationSettings(temperature=temperature)
            )
        for session in self._sessions:
            session.update_options(
                voice=voice,
                temperature=temperature,
                tool_behavior=tool_behavior,
                tool_response_scheduling=tool_response_scheduling,
            )

    def _setup_rolled_back(self, refused: Options, working: Options) -> None:
        """A session of this model had its changed setup (``refused``'s options) refused by
        the service and went back to ``working``'s: each option this model holds at its
        refused value goes back too, so a new session does not ask for it again."""
        opts = self._opts
        if opts.voice == refused.voice:
            opts.voice = working.voice
        if opts.generation.temperature == refused.generation.temperature:
            opts.generation = replace(opts.generation, temperature=working.generation.temperature)
        if opts.tool_behavior == refused.tool_behavior:
            opts.tool_behavior = working.tool_behavior

    async def aclose(self) -> None:
        """Nothing to release: each session owns its connection."""


_T = TypeVar("_T")


def _given(value: NotGivenOr[_T]) -> _T | None:
    """``value``, or None when it was not given."""
    return value if is_given(value) else None


def _warn_model_api_mismatch(model: str, use_vertexai: bool) -> None:
    """Warn, as the Google plugin does, when a known model may not exist on the chosen API."""
    if use_vertexai and model in KNOWN_GEMINI_API_MODELS and model not in KNOWN_VERTEXAI_MODELS:
        logger.warning(
            f"Model '{model}' may not be available on VertexAI (vertexai=True). "
            "If the connection fails, use a VertexAI model "
            "(e.g., 'gemini-live-2.5-flash-native-audio') or set vertexai=False."
        )
    if not use_vertexai and model in KNOWN_VERTEXAI_MODELS and model not in KNOWN_GEMINI_API_MODELS:
        logger.warning(
            f"Model '{model}' may not be available on the Gemini API (vertexai=False). "
            "If the connection fails, use a Gemini API model "
            "(e.g., 'gemini-2.5-flash-native-audio-preview-12-2025') or set vertexai=True."
        )


def _default_project() -> str | None:
    """The project of the application-default credentials. As with the Google plugin, no
    such credentials is an error here (google.auth's ``DefaultCredentialsError``)."""
    import google.auth

    _, project = google.auth.default(  # type: ignore[no-untyped-call]
        scopes=["https://www.googleapis.com/auth/cloud-platform"]
    )
    return project if isinstance(project, str) else None
