"""The call the CPU benchmarks stream (``bench_cpu`` on Gemini Live, ``bench_openai_cpu`` on
OpenAI Realtime): 20 ms chunks at the call's pace on the emulator's time scale, a second of
speech every ten seconds of audio, and the counting (callgrind, cProfile) switched on while
the calls stream only.

Work done per second of wall clock rather than per chunk (timers such as WebSocket keepalive
pings) counts ``scale`` times per second of call: a scale above 1 (valgrind needs 3 to 6)
overstates it, one below 1 understates it. Comparing two scales separates the two kinds of work.
"""

from __future__ import annotations

import asyncio
import cProfile
import time
from collections.abc import Awaitable, Callable

import callgrind

CHUNK = 0.02
"""Seconds of audio per input chunk."""
ASK_EVERY = 500
"""Chunks between two questions (10 s of call audio)."""
SPEECH = 50
"""Chunks of speech per question (1 s); the rest is silence."""
WARMUP = 1.0
"""Seconds (emulator time) after connecting before the measured call starts."""


class Call:
    """The paced call: ``send`` gets each chunk at its time on the emulator's scale, ``speech``
    at the start of each question and ``silence`` otherwise (each one 20 ms chunk of the
    provider's input format)."""

    def __init__(self, seconds: float, scale: float, speech: bytes, silence: bytes) -> None:
        self.chunks = round(seconds / CHUNK)
        self.scale = scale
        self._speech = speech
        self._silence = silence
        self.answers = 0
        """Answer audio chunks the stack delivered (where the bench can see them)."""
        self.late = 0.0
        """The most a chunk went out after its time, in call seconds: a stack that cannot
        keep the pace (valgrind, a loaded machine) sends in bursts, and its figure is not a
        paced call's."""

    @property
    def seconds(self) -> float:
        """Seconds of call audio streamed."""
        return self.chunks * CHUNK

    def chunk(self, index: int) -> bytes:
        """The ``index``-th 20 ms chunk of the call (speech at the start of each question)."""
        return self._speech if index % ASK_EVERY < SPEECH else self._silence

    async def stream(self, send: Callable[[bytes], Awaitable[None] | None]) -> float:
        """Stream the call through ``send``; CPU seconds spent meanwhile (this process)."""
        loop = asyncio.get_running_loop()
        await asyncio.sleep(WARMUP * self.scale)
        interval = CHUNK * self.scale
        measuring("on")
        cpu = time.process_time()
        start = loop.time()
        for index in range(self.chunks):
            delay = start + index * interval - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            else:
                self.late = max(self.late, -delay / self.scale)
            sent = send(self.chunk(index))
            if sent is not None:
                await sent
        # The last answer's tail: a question's answer ends well within one question's span.
        await asyncio.sleep(ASK_EVERY * interval / 2)
        cpu = time.process_time() - cpu
        measuring("off")
        return cpu


_streaming = 0
"""Calls streaming now: instructions are counted (and the profile taken) while any is."""
_profiler: cProfile.Profile | None = None


def profile(profiler: cProfile.Profile | None) -> None:
    """Take ``profiler`` (None: none) over the calls' streaming, not the imports and set-up."""
    global _profiler
    _profiler = profiler


def measuring(state: str) -> None:
    """Count while the calls stream only: under ``valgrind --tool=callgrind
    --instr-atstart=no`` (``callgrind_control`` toggles instrumentation in this process), and
    in the profiler given to :func:`profile`."""
    global _streaming
    _streaming += 1 if state == "on" else -1
    if _streaming != (1 if state == "on" else 0):
        return
    if _profiler is not None and state == "on":
        _profiler.enable()
    elif _profiler is not None:
        _profiler.disable()
    callgrind.measure(state)
