"""A LiveKit ``AgentSession`` around a realtime model, run offline (no room).

The session's audio input is the caller's microphone (a ``voice.io.AudioInput``), its audio
output plays in real time into the caller's ear (a ``voice.io.AudioOutput``). The model is a
parameter: the stock ``livekit.plugins.google.realtime.RealtimeModel`` and ours take the same
constructor (``gemini_model``), as do the stock ``openai.realtime.RealtimeModel`` and ours
(``openai_lanes``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from livekit import rtc
from livekit.agents import Agent, AgentSession, function_tool
from livekit.agents.voice import io
from livekit.agents.voice.events import CloseEvent, CloseReason, ErrorEvent

from realtime_resumption.testing.emulator.audio import USER_RATE

from .call import INSTRUCTIONS, weather
from .playback import ANSWER_RATE, RealtimePlayer
from .stacks import EMULATOR_KEY, StackContext


class _Microphone(io.AudioInput):
    """The caller's microphone chunks, as LiveKit audio frames."""

    def __init__(self, rate: int) -> None:
        super().__init__(label="demo-microphone")
        self._rate = rate
        self._frames: asyncio.Queue[rtc.AudioFrame] = asyncio.Queue()

    def put(self, pcm: bytes) -> None:
        self._frames.put_nowait(rtc.AudioFrame(pcm, self._rate, 1, len(pcm) // 2))

    async def __anext__(self) -> rtc.AudioFrame:
        return await self._frames.get()


class _Loudspeaker(io.AudioOutput):
    """Plays each segment in real time and reports its playback as a room output would."""

    def __init__(self, player: RealtimePlayer) -> None:
        super().__init__(
            label="demo-loudspeaker",
            capabilities=io.AudioOutputCapabilities(pause=False),
            sample_rate=ANSWER_RATE,
        )
        self._player = player
        self._segment_open = False
        self._started = False
        self._played = 0.0

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        await super().capture_frame(frame)
        if not self._segment_open:
            self._segment_open, self._started, self._played = True, False, 0.0
        duration = frame.samples_per_channel / frame.sample_rate
        self._player.enqueue(bytes(frame.data), lambda: self._piece_played(duration))

    def _piece_played(self, duration: float) -> None:
        if not self._started:
            self._started = True
            self.on_playback_started(created_at=time.time())
        self._played += duration

    def flush(self) -> None:
        super().flush()
        if self._segment_open:
            self._player.enqueue(b"", self._segment_played)

    def _segment_played(self) -> None:
        if self._segment_open:
            self._segment_open = False
            self.on_playback_finished(playback_position=self._played, interrupted=False)

    def clear_buffer(self) -> None:
        self._player.clear()
        if self._segment_open:
            self._segment_open = False
            self.on_playback_finished(playback_position=self._played, interrupted=True)


class _Assistant(Agent):
    def __init__(self) -> None:
        super().__init__(instructions=INSTRUCTIONS)

    @function_tool
    async def get_weather(self, city: str | None = None) -> dict[str, str]:
        """The weather in a city."""
        # A tool takes a moment, as a real lookup would.
        await asyncio.sleep(0.2)
        return weather(city)


def gemini_model(ctx: StackContext, model_cls: Any) -> Any:
    """``model_cls`` (a Gemini ``RealtimeModel``) on the call's emulator."""
    return model_cls(api_key=EMULATOR_KEY, http_options=ctx.http_options)


class LiveKitStack:
    """An offline ``AgentSession`` with ``model`` (a ``RealtimeModel``) as its LLM; ``rate``
    is the microphone's; ``closing`` is run at the end (what the model was given to hold, an
    HTTP session)."""

    def __init__(
        self,
        ctx: StackContext,
        model: Any,
        *,
        rate: int = USER_RATE,
        closing: Sequence[Callable[[], Awaitable[object]]] = (),
    ) -> None:
        self._ctx = ctx
        self._model = model
        self._closing = closing
        # The simulated caller has no echo to cancel: no AEC warm-up muting its microphone.
        self._session: AgentSession[None] = AgentSession(llm=self._model, aec_warmup_duration=None)
        self._microphone = _Microphone(rate)
        self._player: RealtimePlayer | None = None
        self._stopping = False
        self._session.on("error", self._on_error)
        self._session.on("close", self._on_close)

    def _on_error(self, event: ErrorEvent) -> None:
        error = event.error
        recoverable = getattr(error, "recoverable", None)
        what = getattr(error, "error", error)
        note = "" if recoverable is None else (" (recoverable)" if recoverable else " (fatal)")
        self._ctx.error(f"{type(what).__name__}: {what}{note}")

    def _on_close(self, event: CloseEvent) -> None:
        if not self._stopping:
            self._ctx.closed(f"AgentSession closed ({event.reason.value})")
        if event.reason == CloseReason.ERROR and event.error is not None:
            self._ctx.closed(f"AgentSession closed on {type(event.error).__name__}")

    async def start(self) -> None:
        self._player = RealtimePlayer(self._ctx.ear)
        self._session.input.audio = self._microphone
        self._session.output.audio = _Loudspeaker(self._player)
        await self._session.start(_Assistant())
        # As LiveKit's examples do: the agent greets first.
        self._session.generate_reply(instructions="Greet the user.")

    def push_audio(self, pcm: bytes) -> None:
        self._microphone.put(pcm)

    async def stop(self) -> None:
        self._stopping = True
        await self._session.aclose()
        await self._model.aclose()
        for close in self._closing:
            await close()
        if self._player is not None:
            await self._player.aclose()
