"""Helpers for the rotation tests: fast resumption settings and ledger shortcuts, on top of
the transport tests' recorder and emulator settings."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.move_reports import MoveReport
from realtime_resumption.resumption import ResumptionOptions
from realtime_resumption.testing.emulator import Emulator, user_audio
from realtime_resumption.testing.emulator.ledger import SessionRecord
from realtime_resumption.transport import ContentTurn

from ..transport import transport_helpers
from ..transport.transport_helpers import (
    GRACE,
    MODEL,
    TIME_SCALE,
    Recorder,
    answered_with_handle,
    emulator_config,
    established,
    kind_emulator_config,
    only_session,
)

__all__ = [
    "CHUNK",
    "FAST",
    "GAP_SLACK_MS",
    "GRACE",
    "HELLO",
    "MODEL",
    "TIME_SCALE",
    "Recorder",
    "answered_with_handle",
    "assert_closed_first",
    "emulator_config",
    "established",
    "go_away_while_streaming",
    "kind_emulator_config",
    "make_transport",
    "only_session",
    "resumable",
    "say",
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


async def resumable(transport: GeminiLiveTransport, rec: Recorder, *, kind: bool) -> None:
    """Wait until ``transport`` holds a handle it can resume: on a kind service the one sent
    after the setup; on the service as measured, the one after a first answer."""
    if kind:
        await rec.wait_for("on_resumption_update")
    else:
        await answered_with_handle(transport, rec)


GAP_SLACK_MS = 150.0
"""What the client may add to the ledger's gap (the old connection's close to the new one's
setupComplete) before the input flows again: the short settle and a loaded machine's lag."""


def assert_closed_first(session: SessionRecord, move: MoveReport, *, refused: bool) -> None:
    """``move`` went on the service's terms, by the ledger: the old connection closed before
    the new one was set up, and the input was held for that gap alone (``GAP_SLACK_MS``
    more). ``refused``: the process did not know the endpoint yet, so a dial beside the open
    connection was refused (1011) and the same handle resumed on the next; once it knows, a
    move closes first without that dial."""
    old, new = established(session)[move.number - 1 : move.number + 1]
    dials = session.connections[old.index + 1 : new.index + 1]
    assert [c.refused for c in dials] == (["open-session", None] if refused else [None])
    assert move.attempts == len(dials)
    assert dials[0].resumed_from == new.resumed_from, "the same handle"
    assert old.closed_at is not None and new.setup_at is not None
    gap = new.setup_at - old.closed_at
    assert gap > 0, "the old connection closed first"
    assert 0 < move.gap_ms <= 1000 * gap + GAP_SLACK_MS, (move.gap_ms, gap)


def seconds(n: float) -> float:
    """``n`` emulator seconds on the wall clock."""
    return n * TIME_SCALE


CHUNK = 0.02
"""A microphone's pace: one 20 ms chunk every 20 ms."""


async def go_away_while_streaming(
    emu: Emulator, transport: GeminiLiveTransport, rec: Recorder
) -> None:
    """goAway (20 s notice) 50 ms into 150 chunks of silence the microphone streams (numbered
    from 1); returns once the transport moved and the stream ended, then disconnects."""
    streaming = asyncio.create_task(stream_silence(transport, 1, 150))
    await asyncio.sleep(0.05)
    emu.faults.go_away(20.0)
    await rec.wait_for("on_move")
    await streaming
    await transport.disconnect()


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


async def say(
    transport: GeminiLiveTransport,
    words: Sequence[str],
    first: int,
    *,
    silence_after: int,
    every: float = 0.002,
) -> int:
    """The user says ``words``, a chunk of speech each numbered from ``first``, then
    ``silence_after`` silent chunks (the silence that ends the turn), a chunk every ``every``
    seconds as ``stream_silence`` paces them; returns the next seq."""
    for seq, word in enumerate(words, start=first):
        transport.send_audio(user_audio(seq, word=word))
        await asyncio.sleep(every)
    silence = first + len(words)
    await stream_silence(transport, silence, silence_after, every)
    return silence + silence_after
