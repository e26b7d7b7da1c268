"""A busy event loop and the replay: a spike of the loop's lag that ended before a handle came
does not move the handle's place, so a move does not replay the question before it.

A loaded event loop cannot be had on demand, so the loop's lag monitor is a stand-in with set
readings (its turns are marked as usual); the transport, the SDK, the sockets and the emulator
are real. ``tests/unit/gemini/test_loop_lag.py`` checks the readings the real monitor gives."""

from __future__ import annotations

import asyncio

import pytest

from realtime_resumption.gemini import GeminiLiveTransport, loop_lag
from realtime_resumption.move_reports import MoveOutcome
from realtime_resumption.testing.emulator import Emulator, user_audio
from realtime_resumption.transport import ContentTurn

from .transport_helpers import (
    Recorder,
    answered_with_handle,
    emulator_config,
    handle_after_the_answer,
    make_transport,
)

QUESTION = "what is the time"
CHUNK = 0.02


class _SpikeAgo(loop_lag.LoopLag):
    """The monitor of a loop that was busy for 300 ms a second ago and has run on time since:
    the largest lag of the last two seconds is that spike, and the turns a message handled
    now waited through were on time."""

    def current(self, now: float) -> float:
        return 0.0

    def recent(self, now: float) -> float:
        return 0.3


async def _microphone(transport: GeminiLiveTransport) -> None:
    seq = 1
    while True:
        transport.send_audio(user_audio(seq, speech=False))
        seq += 1
        await asyncio.sleep(CHUNK)


async def test_a_lag_spike_before_the_handle_came_does_not_replay_the_question(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On a loaded machine a question written 260 ms before its handle was replayed (and
    answered twice): a spike of lag that had ended moved the handle's place back past it.
    Here answers take 20 ms on the wall clock, well within twice that spike."""
    monkeypatch.setattr(loop_lag, "for_loop", lambda loop: _SpikeAgo())
    async with Emulator(emulator_config("gemini")) as emu:
        transport = make_transport(emu)
        rec = Recorder(transport)
        await transport.connect()
        microphone = asyncio.create_task(_microphone(transport))
        try:
            await answered_with_handle(transport, rec)
            start = len(rec.events)
            transport.send_live_text([ContentTurn("user", QUESTION)])
            await rec.wait(handle_after_the_answer(start))
            emu.faults.go_away(60.0)
            await rec.wait_for("on_move")
        finally:
            microphone.cancel()
            await transport.disconnect()
        await emu.wait_disconnected()

    (move,) = rec.moves
    assert move.outcome is MoveOutcome.RESUMED
    (session,) = emu.ledger.sessions.values()
    sent = [
        connection.index
        for connection in session.connections
        for message in connection.client_messages
        if message.text == QUESTION
    ]
    assert sent == [0], "the question was replayed to the resumed session"
    assert [turn.user_text for turn in session.turns.values()].count(QUESTION) == 1
