"""What a ``RealtimeModel`` was configured with, and the transport each session gets from it."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace

from google.genai import types
from livekit.agents.telemetry import tracer as livekit_tracer
from livekit.agents.types import APIConnectOptions, NotGivenOr
from livekit.agents.utils import images

from realtime_resumption.gemini import GeminiLiveTransport, TransportOptions
from realtime_resumption.store import SessionStore
from realtime_resumption.telemetry import Telemetry
from realtime_resumption.transport import GenerationSettings

from ..job_room import room_name
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
    """A model's settings; each session takes a copy.

    ``transport_options`` is what every session's transport is built from, made once by the
    model (how to reach the service, the setup as constructed, how sessions move, the store's
    options, LiveKit's telemetry). The fields beside it are what changes while the model
    lives (``update_options``, a refused setup rolled back) and what only the plugin reads.
    """

    transport_options: TransportOptions
    voice: str
    instructions: str | None
    image_encode_options: images.EncodeOptions
    tool_behavior: NotGivenOr[types.Behavior]
    tool_response_scheduling: NotGivenOr[types.FunctionResponseScheduling]
    conn_options: APIConnectOptions
    resumption_handle: str | None = field(repr=False)
    generation: GenerationSettings = field(default_factory=GenerationSettings)
    store: SessionStore | None = None
    session_key: str | None = None
    """The call's key in ``store``; None: the job's room name, when a session is made."""

    def __repr__(self) -> str:
        return f"Options({self.transport_options!r}, voice={self.voice!r})"

    @property
    def model(self) -> str:
        """The Gemini Live model's name."""
        return self.transport_options.model

    @property
    def vertexai(self) -> bool:
        """Vertex AI, not the Gemini API."""
        return self.transport_options.uses_vertex

    @property
    def response_modality(self) -> str:
        """``audio`` or ``text``."""
        return self.transport_options.response_modality

    @property
    def output_audio_transcription(self) -> bool:
        """The model's speech is transcribed."""
        return self.transport_options.output_audio_transcription

    @property
    def live_text(self) -> bool:
        """The model takes text through realtime input only (Gemini 3.x Live)."""
        return live_text(self.model)

    @property
    def manual_activity(self) -> bool:
        """Automatic activity detection is off: the client marks the user's turns."""
        config = self.transport_options.realtime_input_config
        detection = config.automatic_activity_detection if config is not None else None
        return bool(detection is not None and detection.disabled)

    @property
    def interrupts(self) -> bool:
        """User activity interrupts the model (the provider's default)."""
        config = self.transport_options.realtime_input_config
        return config is None or config.activity_handling != types.ActivityHandling.NO_INTERRUPTION

    def transport(self, tools: list[types.Tool]) -> GeminiLiveTransport:
        """A transport for one session: the model's transport options with this copy's
        voice, instructions and generation settings, ``tools``, and the store."""
        options = replace(
            self.transport_options,
            voice=self.voice,
            system_instruction=self.instructions,
            generation=self.generation,
            tools=tools,
            store=self.store,
            session_key=(self.session_key or room_name()) if self.store is not None else None,
        )
        return GeminiLiveTransport(options)


def live_text(model: str) -> bool:
    """``model`` takes text through realtime input only (Gemini 3.x Live)."""
    return any(tag in model for tag in _LIVE_TEXT_MODELS)


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
