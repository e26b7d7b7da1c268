"""The OpenAI Realtime emulator's settings: profile, pacing, server VAD and the session cap."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Profile = Literal["openai", "azure"]
PROFILES: tuple[Profile, ...] = ("openai", "azure")

SESSION_CAP: dict[Profile, float] = {"openai": 3600.0, "azure": 1800.0}
"""The session cap of each service: 60 minutes on OpenAI (GA, 2025-12 on), 30 minutes on Azure
OpenAI (livekit/agents issues 2358 and 2341; the caps Pipecat issue 3170 asks to survive)."""

CAP_CLOSE_CODE = 1001
"""The close at the cap: 1001 (going away), which websockets clients raise as
``ConnectionClosedOK`` (pollen-robotics/reachy_mini_conversation_app issue 134)."""


def cap_reason(seconds: float) -> str:
    """The close reason the service sends at a cap of ``seconds`` (unscaled): "Your session hit
    the maximum duration of 60 minutes." (the same text is the older ``session_expired``
    error's message)."""
    return f"Your session hit the maximum duration of {seconds / 60:g} minutes."


VOICES: frozenset[str] = frozenset(
    "alloy ash ballad cedar coral echo marin sage shimmer verse".split()
)
"""The voices the ``openai`` SDK's ``RealtimeAudioConfigOutput.voice`` lists for realtime."""

KIND_SERVICE: dict[str, Any] = {
    "session_cap": None,
    "first_audio_latency": 0.0,
    "transcription_latency": 0.0,
    "session_created_latency": 0.0,
}
"""A kinder service than the live one: no cap, an answer's audio and the input transcription
without delay, ``session.created`` at once. ``OpenAIEmulatorConfig.kind()`` applies them."""


@dataclass
class OpenAIEmulatorConfig:
    """How the emulated OpenAI Realtime service behaves.

    Every duration is in seconds of the service's clock and is multiplied by ``time_scale``
    before the emulator waits on it; durations the client states on the wire (a session's
    ``silence_duration_ms``) are scaled too, so a call of an hour runs in seconds while the
    client's audio keeps its real pace.
    """

    profile: Profile = "openai"
    """``openai`` (60-minute cap) or ``azure`` (30-minute cap)."""
    time_scale: float = 1.0
    session_cap: float | Literal["profile"] | None = "profile"
    """Seconds from ``session.created`` after which the service closes the session with 1001
    and :func:`cap_reason`; ``profile``: the profile's cap (:data:`SESSION_CAP`); None: no cap.
    """
    cap_error_event: bool = False
    """Send the older ``error`` event (``invalid_request_error``, code ``session_expired``, the
    same message) before the cap's close, as the service did in 2024-25 (livekit/agents issue
    2358; twilio-samples issue 10). The GA service closes without it."""
    answer_chunks: int = 10
    """Audio chunks (``response.output_audio.delta``) per spoken answer."""
    chunk_ms: int = 100
    """Audio each chunk carries (24 kHz PCM16 mono). Chunks leave at playback pace: one every
    ``chunk_ms`` of the service's clock."""
    first_audio_latency: float = 0.3
    """Time between ``response.created`` and the first audio of an answer (the model's work)."""
    transcription_latency: float = 0.2
    """Time between a commit and its ``input_audio_transcription.completed``: the transcript is
    made apart from the answer (API reference, "input_audio_transcription"), so it can arrive
    after the answer started."""
    vad_level: float = 500.0
    """RMS level (PCM16) that a session's ``turn_detection.threshold`` of 0.5 stands for; each
    0.1 of threshold above (below) it doubles (halves) the level, as a higher threshold "will
    require louder audio to activate the model" (API reference, ``turn_detection``)."""
    session_created_latency: float = 0.1
    """Time between the upgrade and ``session.created``; ``faults.slow_session_created``
    overrides it for chosen connections."""
    rate_limits: bool = True
    """Send ``rate_limits.updated`` after each ``response.done``, as the service does."""
    api_key: str | None = None
    """The only key accepted (401 for any other); None accepts any non-empty key."""
    round_trip: float = 0.006
    """Network round trip (see the Gemini emulator's ``network``): everything on the wire
    arrives half of it after it was sent, in order, both ways."""
    hang_limit: float = 600.0
    """Upper bound of every open-ended wait."""
    host: str = "127.0.0.1"
    port: int = 0
    seed: int = 0
    """Seeds the identifiers, so runs repeat."""

    @classmethod
    def kind(cls, **changes: Any) -> OpenAIEmulatorConfig:
        """A configuration of the kinder service (:data:`KIND_SERVICE`), with ``changes``."""
        return cls(**{**KIND_SERVICE, **changes})

    def __post_init__(self) -> None:
        if self.profile not in PROFILES:
            raise ValueError(f"profile must be one of {PROFILES}, not {self.profile!r}")
        if not self.time_scale > 0:
            raise ValueError("time_scale must be > 0")
        if self.answer_chunks < 1:
            raise ValueError("answer_chunks must be >= 1")
        if not 10 <= self.chunk_ms <= 10_000:
            raise ValueError("chunk_ms must be between 10 and 10000")
        cap = self.session_cap
        if cap != "profile" and cap is not None and not (isinstance(cap, int | float) and cap > 0):
            raise ValueError("session_cap must be > 0, 'profile' or None")
        for name in (
            "first_audio_latency",
            "transcription_latency",
            "session_created_latency",
            "round_trip",
        ):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0")
        if not self.vad_level > 0:
            raise ValueError("vad_level must be > 0")
        if not self.hang_limit > 0:
            raise ValueError("hang_limit must be > 0")

    @property
    def cap_seconds(self) -> float | None:
        """The session cap in seconds (unscaled), or None."""
        if self.session_cap == "profile":
            return SESSION_CAP[self.profile]
        return self.session_cap

    @property
    def one_way(self) -> float:
        """The scaled delay of the wire in each direction (half the round trip)."""
        return self.scaled(self.round_trip / 2)

    def scaled(self, seconds: float) -> float:
        """``seconds`` on the emulator's clock (multiplied by ``time_scale``)."""
        return seconds * self.time_scale
