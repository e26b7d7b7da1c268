"""Helpers for the rotation tests: fast resumption settings and ledger shortcuts, on top of
the transport tests' recorder and emulator settings."""

from __future__ import annotations

import asyncio
from typing import Any

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.resumption import ResumptionOptions
from realtime_resumption.testing.emulator import Emulator, user_audio
from realtime_resumption.testing.emulator.ledger import SessionRecord
from realtime_resumption.transport import ContentTurn

from ..transport import transport_helpers
from ..transport.transport_helpers import GRACE, MODEL, TIME_SCALE, Recorder, kind_emulator_config

__all__ = [
    "CHUNK",
    "FAST",
    "GRACE",
    "HELLO",
    "MODEL",
    "TIME_SCALE",
    "Recorder",
    "kind_emulator_config",
    "make_transport",
    "only_session",
    "seconds",
    "stream_silence",
]

FAST = ResumptionOptions(deadline_margin=1.0, retry_delays=(0.0, 0.05, 0.1), attempt_timeout=2.0)
"""Retries a few milliseconds apart, so a test that spends them all stays fast."""
HELLO = [ContentTurn("user", "hello there")]


def make_transport(emu: Emulator, **options: Any) -> GeminiLiveTransport:
    """A transport on a client of ``emu`` in its profile, with fast retries."""
    options.setdefault("resumption", FAST)
    return transport_helpers.make_transport(emu, **options)


def only_session(emu: Emulator) -> SessionRecord:
    (session,) = emu.ledger.sessions.values()
    return session


def seconds(n: float) -> float:
    """``n`` emulator seconds on the wall clock."""
    return n * TIME_SCALE


CHUNK = 0.02
"""A microphone's pace: one 20 ms chunk every 20 ms."""


async def stream_silence(
    transport: GeminiLiveTransport,
    first: int,
    count: int,
    every: float = 0.002,
    *,
    speech: bool = False,
) -> None:
    """Silent user audio numbered from ``first``, one 20 ms chunk every ``every`` seconds
    (2 ms by default; ``CHUNK`` is a microphone's real-time pace); ``speech``: the user
    talking through it instead (a move must keep every chunk of it, where it may skip
    silence)."""
    for seq in range(first, first + count):
        transport.send_audio(user_audio(seq, speech=speech))
        await asyncio.sleep(every)
