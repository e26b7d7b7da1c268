"""The README's bound on held input, with the shipped ``OutboxLimits``: across a gap the
transport holds up to 30 s of speech and drops only the oldest past that, never text.
(Silence is bounded apart: only the edges of a long stretch are held; see the outbox's tests.)

Run on the emulator's own defaults (its first handle follows the first answer), with the
transport's defaults: nothing here sets an ``input_buffer``.
"""

from __future__ import annotations

import asyncio

import pytest

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.move_reports import MoveOutcome
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig, user_audio
from realtime_resumption.transport import ContentTurn

from .transport_helpers import MODEL, TIME_SCALE, Recorder

CHUNK = 0.02
HELD = 1500
"""30 s of 20 ms chunks: the README's bound."""
OVER = 100
"""2 s more than the bound."""


async def test_a_gap_holds_the_last_30_s_of_speech_and_drops_only_the_oldest() -> None:
    async with Emulator(EmulatorConfig(time_scale=TIME_SCALE)) as emu:
        transport = GeminiLiveTransport(client=emu.client(), model=MODEL)
        rec = Recorder(transport)
        await transport.connect()
        transport.send_live_text([ContentTurn("user", "hello")])
        await rec.wait(lambda r: any(h and ok for h, ok, _ in r.of("on_resumption_update")))
        emu.faults.drop()
        await rec.wait_for("on_move_started")
        # No await between the sends: the move cannot progress, so all of it is held at once,
        # well within the 60 s age bound.
        for seq in range(1, HELD + OVER + 1):
            transport.send_audio(user_audio(seq, speech=True))
        transport.send_content([ContentTurn("user", "note this")], turn_complete=False)
        stats = transport.get_diagnostics().input
        assert stats is not None and stats.audio_chunks_dropped == OVER
        await rec.wait_for("on_move", timeout=10.0)
        # Polled: the emulator's ledger signals no change.
        async with asyncio.timeout(10.0):
            while len(emu.ledger.sessions[session_id(emu)].audio_received) < HELD:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        await transport.disconnect()

    (move,) = rec.moves
    assert move.outcome is MoveOutcome.RESUMED
    assert move.audio_chunks_dropped == OVER
    assert move.audio_seconds_dropped == pytest.approx(OVER * CHUNK)
    summary = emu.ledger.summary().sessions[session_id(emu)]
    assert summary.audio_consumed == tuple(range(OVER + 1, HELD + OVER + 1))
    texts = [m.kind for m in emu.ledger.sessions[session_id(emu)].connections[-1].client_messages]
    assert texts.count("client_content") == 1


def session_id(emu: Emulator) -> str:
    (session,) = emu.ledger.sessions.values()
    return session.session_id
