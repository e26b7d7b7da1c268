"""No silent loss when the event loop falls behind: what the session never gets is exactly what
the transport reported dropped.

A loop too busy to write (many calls on one process) leaves the framework's audio in the
input buffer; past its bound the oldest is given up. The capacity benchmark compares the
ledger's loss with the transports' reports at scale; this is the same check on one call, the
loop held for one turn and the bound made tiny, so it is exact: every chunk lost is counted,
in the input stats (never written) or in the move's report (written, lacking from the snapshot
the move resumed from).
"""

from __future__ import annotations

import asyncio

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.move_reports import MoveOutcome
from realtime_resumption.outbox import OutboxLimits
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig, user_audio
from realtime_resumption.transport import ContentTurn

from .transport_helpers import MODEL, TIME_SCALE, Recorder

CHUNKS = 40
HELD = 10
"""Chunks of 20 ms the tiny bound holds (0.2 s)."""


async def test_a_loop_that_falls_behind_loses_only_what_it_reports() -> None:
    async with Emulator(EmulatorConfig(time_scale=TIME_SCALE)) as emu:
        transport = GeminiLiveTransport(
            client=emu.client(),
            model=MODEL,
            input_buffer=OutboxLimits(max_audio_seconds=HELD * 0.02),
        )
        rec = Recorder(transport)
        await transport.connect()
        transport.send_live_text([ContentTurn("user", "hello")])
        await rec.wait(lambda r: any(h and ok for h, ok, _ in r.of("on_resumption_update")))
        # One loop turn: the microphone's chunks pile up while nothing is written.
        for seq in range(1, CHUNKS + 1):
            transport.send_audio(user_audio(seq, speech=True))
        # The resumed session lacks all of them (the handle came before): the move replays
        # what the bound still holds.
        emu.faults.go_away()
        await rec.wait_for("on_move", timeout=10.0)
        (record,) = emu.ledger.sessions.values()
        async with asyncio.timeout(10.0):
            # Polled: the emulator's ledger signals no change.
            while len(set(record.audio_consumed)) < HELD:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        stats = transport.get_diagnostics().input
        await transport.disconnect()

    (move,) = rec.moves
    assert move.outcome is MoveOutcome.RESUMED
    assert stats is not None
    never_heard = set(range(1, CHUNKS + 1)) - set(record.audio_consumed)
    assert len(never_heard) == CHUNKS - HELD
    assert stats.audio_chunks_dropped + move.audio_chunks_dropped == len(never_heard)
    assert record.audio_consumed == list(range(CHUNKS - HELD + 1, CHUNKS + 1))
