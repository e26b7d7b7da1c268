"""What a ``RealtimeModel`` was configured with, and the transport each session gets from it."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from google.genai import types
from livekit.agents.telemetry import tracer as livekit_tracer
from livekit.agents.types import NOT_GIVEN, APIConnectOptions, NotGivenOr
from livekit.agents.utils import images, is_given

from realtime_resumption import OutboxLimits, ResumptionOptions, RetryPolicy
from realtime_resumption.gemini import GeminiLiveTransport, StoreOptions
from realtime_resumption.redaction import redact
from realtime_resumption.store import SessionStore
from realtime_resumption.telemetry import Telemetry
from realtime_resumption.transport import GenerationSettings

from ..log import logger

DEFAULT_IMAGE_ENCODE_OPTIONS = images.EncodeOptions(
    format="JPEG",
    quality=75,
    resize_options=images.ResizeOptions(width=1024, height=1024, strategy="scale_aspect_fit"),
)

# Gemini 3.1/3.8 Live answer a "." placeholder turn with an empty turn and refuse
# client_content after their first turn: they take text through realtime input.
_LIVE_TEXT_MODELS = ("3.1", "3.8")


@dataclass
class Options:
    """A model's settings; each session takes a copy."""

    model: str
    vertexai: bool
    api_key: str | None = field(repr=False)
    project: str | None
    location: str | None
    credentials: object | None = field(repr=False)
    voice: str
    language: str | None
    response_modality: str
    instructions: str | None
    input_audio_transcription: bool
    output_audio_transcription: bool
    image_encode_options: images.EncodeOptions
    realtime_input_config: types.RealtimeInputConfig | None
    context_window_compression: types.ContextWindowCompressionConfig | None
    tool_behavior: NotGivenOr[types.Behavior]
    tool_response_scheduling: NotGivenOr[types.FunctionResponseScheduling]
    http_options: types.HttpOptions | None
    conn_options: APIConnectOptions
    resumption_handle: str | None = field(repr=False)
    transparent: bool
    resumption: NotGivenOr[ResumptionOptions] = NOT_GIVEN
    input_buffer: NotGivenOr[OutboxLimits] = NOT_GIVEN
    retry_budget: NotGivenOr[int | RetryPolicy] = NOT_GIVEN
    resume_watchdog: NotGivenOr[float | None] = NOT_GIVEN
    generation: GenerationSettings = field(default_factory=GenerationSettings)
    store: SessionStore | None = None
    session_key: str | None = None
    store_options: StoreOptions | None = None

    def __repr__(self) -> str:
        return (
            f"Options(model={self.model!r}, vertexai={self.vertexai}, "
            f"api_key={redact(self.api_key)}, voice={self.voice!r})"
        )

    @property
    def live_text(self) -> bool:
        """The model takes text through realtime input only (Gemini 3.x Live)."""
        return any(tag in self.model for tag in _LIVE_TEXT_MODELS)

    @property
    def manual_activity(self) -> bool:
        """Automatic activity detection is off: the client marks the user's turns."""
        detection = (
            self.realtime_input_config.automatic_activity_detection
            if self.realtime_input_config is not None
            else None
        )
        return bool(detection is not None and detection.disabled)

    @property
    def interrupts(self) -> bool:
        """User activity interrupts the model (the provider's default)."""
        config = self.realtime_input_config
        return config is None or config.activity_handling != types.ActivityHandling.NO_INTERRUPTION

    def transport(self, tools: list[types.Tool]) -> GeminiLiveTransport:
        """A transport for one session, set up with these settings and ``tools``."""
        extra: dict[str, Any] = {}
        if is_given(self.resumption):
            extra["resumption"] = self.resumption
        if is_given(self.input_buffer):
            extra["input_buffer"] = self.input_buffer
        if is_given(self.retry_budget):
            extra["retry_budget"] = self.retry_budget
        if is_given(self.resume_watchdog):
            extra["resume_watchdog"] = self.resume_watchdog
        if self.store is not None:
            extra["store"] = self.store
            extra["session_key"] = self.session_key or _room_name()
            extra["store_options"] = self.store_options
        return GeminiLiveTransport(
            api_key=None if self.vertexai else self.api_key,
            vertexai=self.vertexai,
            project=self.project if self.vertexai else None,
            location=self.location if self.vertexai else None,
            credentials=self.credentials if self.vertexai else None,
            model=self.model,
            voice=self.voice,
            language=self.language,
            response_modality="audio" if self.response_modality == "audio" else "text",
            system_instruction=self.instructions,
            tools=tools,
            input_audio_transcription=self.input_audio_transcription,
            output_audio_transcription=self.output_audio_transcription,
            realtime_input_config=self.realtime_input_config,
            context_window_compression=self.context_window_compression,
            generation=self.generation,
            http_options=self.http_options,
            setup_timeout=self.conn_options.timeout,
            transparent=self.transparent,
            initial_history_in_client_content=self.live_text,
            telemetry=livekit_telemetry(),
            **extra,
        )


def warn_vertex_scheduling_unsupported() -> None:
    """Vertex AI drops ``scheduling`` from tool responses (the Google plugin's warning)."""
    logger.warning(
        "tool_response_scheduling is not supported by Vertex AI and will be ignored; "
        "tool responses use the default scheduling there."
    )


@functools.cache
def livekit_telemetry() -> Telemetry:
    """The plugin's spans go to LiveKit's tracer (``livekit.agents.telemetry.tracer``, which
    follows ``livekit.agents.telemetry.set_tracer_provider``) and its metrics to the global
    meter provider, as LiveKit's own."""
    return Telemetry(tracer=livekit_tracer)


def _room_name() -> str:
    """The job's room name: a session's default key in the store."""
    from livekit.agents import get_job_context

    try:
        return get_job_context().room.name
    except RuntimeError:
        raise ValueError(
            "a RealtimeModel with a store needs a session_key outside a LiveKit job "
            "(in a job, the room's name is the default)"
        ) from None
