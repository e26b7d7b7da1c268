"""CPU time per 20 ms input frame through a LiveKit AgentSession: ours against the stock
Google model, on the same emulator, in one run.

The emulator runs on its own thread and event loop, so the figure is the client thread's CPU
time alone (``time.thread_time``): AgentSession, the model plugin, google-genai, websockets and
TLS. A microphone streams silent 20 ms frames (every 2 ms: ten times real time, so the run
stays short) while the agent listens; each model runs three sessions, alternating, and the best
of each is reported. Goal: ours at most 1.0x stock.

    .venv/bin/python tests/benchmarks/bench_livekit.py
"""

from __future__ import annotations

import asyncio
import time
from typing import Literal

from emulator_thread import EmulatorThread
from google.genai import types
from livekit import rtc
from livekit.agents import Agent, AgentSession, llm
from livekit.agents.voice.io import AudioInput
from livekit.plugins import google
from livekit.plugins import realtime_resumption as rr

from realtime_resumption.testing.emulator import EmulatorConfig, user_audio

FRAMES = 2500
INTERVAL = 0.002
"""Wall seconds between 20 ms frames."""
ROUNDS = 3
"""Sessions per model, alternating; the best of each is reported (load only adds time)."""
WARMUP = 250
"""Frames streamed before the clock starts (connection set up, buffers warm)."""


class _Microphone(AudioInput):
    """``FRAMES + WARMUP`` silent frames, one every ``INTERVAL``; marks when it starts and
    finishes measuring."""

    def __init__(self) -> None:
        super().__init__(label="bench-microphone")
        self._sent = 0
        self._next_at = 0.0
        self.started = 0.0
        self.finished = asyncio.Event()
        self.cpu = 0.0

    async def __anext__(self) -> rtc.AudioFrame:
        if self._sent == WARMUP:
            self.started = time.thread_time()
        if self._sent == WARMUP + FRAMES:
            self.cpu = time.thread_time() - self.started
            self.finished.set()
        if self._sent >= WARMUP + FRAMES:
            await asyncio.Event().wait()
        loop = asyncio.get_running_loop()
        self._next_at = max(self._next_at + INTERVAL, loop.time())
        await asyncio.sleep(self._next_at - loop.time())
        pcm = user_audio(self._sent, speech=False)
        self._sent += 1
        return rtc.AudioFrame(pcm, 16_000, 1, len(pcm) // 2)


Kind = Literal["stock", "ours"]
KINDS: tuple[Kind, ...] = ("stock", "ours")


async def _run(kind: Kind, http_options: types.HttpOptions) -> float:
    """Client-thread CPU microseconds per input frame with the ``kind`` model."""
    model: llm.RealtimeModel
    if kind == "stock":
        model = google.realtime.RealtimeModel(api_key="bench", http_options=http_options)
    else:
        model = rr.RealtimeModel(api_key="bench", http_options=http_options)
    session = AgentSession(llm=model, aec_warmup_duration=None)
    microphone = _Microphone()
    session.input.audio = microphone
    await session.start(Agent(instructions="Listen."))
    try:
        async with asyncio.timeout(120):
            await microphone.finished.wait()
    finally:
        await session.aclose()
    return microphone.cpu * 1e6 / FRAMES


async def main() -> None:
    with EmulatorThread(EmulatorConfig()) as server:
        http_options = server.http_options
        figures: dict[str, list[float]] = {"stock": [], "ours": []}
        for _ in range(ROUNDS):
            for kind in KINDS:
                figures[kind].append(await _run(kind, http_options))
    stock, ours = min(figures["stock"]), min(figures["ours"])
    print(f"AgentSession CPU per 20 ms input frame (best of {ROUNDS} x {FRAMES}, client thread):")
    print(f"  stock Google RealtimeModel   {stock:7.1f} µs")
    print(
        f"  realtime_resumption          {ours:7.1f} µs  ({ours / stock:.2f}x stock; goal <= 1.0x)"
    )


if __name__ == "__main__":
    asyncio.run(main())
