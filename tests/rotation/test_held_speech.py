"""Held input is bounded by speech, not wall time: through the real transport and emulator,
a resume from an old handle replays the user's speech whole with a little silence around
it, skips the rest of the silence (counted), and drops nothing."""

from __future__ import annotations

import asyncio

from realtime_resumption.move_reports import MoveOutcome, MoveReason
from realtime_resumption.outbox import OutboxLimits
from realtime_resumption.testing.emulator import Emulator, user_audio

from ..transport.transport_helpers import (
    connected_and_answered,
    emulator_config,
    make_transport,
)
from .rotation_helpers import only_session

PADDING = 0.2
BOUND = 1.5
"""Seconds of audio held: less than the 3.3 s streamed after the handle."""


async def _stream(transport: object, first: int, count: int, *, speech: bool) -> int:
    for seq in range(first, first + count):
        transport.send_audio(user_audio(seq, speech=speech))  # type: ignore[attr-defined]
        await asyncio.sleep(0.002)
    return first + count


async def test_a_resume_from_an_old_handle_replays_speech_and_skips_silence() -> None:
    limits = OutboxLimits(max_audio_seconds=BOUND, silence_padding=PADDING)
    async with Emulator(emulator_config("gemini")) as emu:
        transport = make_transport(emu, input_buffer=limits)
        rec = await connected_and_answered(transport)  # the handle the move resumes from
        seq = await _stream(transport, 1, 100, speech=False)  # 2 s of silence
        speech = range(seq, seq + 15)
        seq = await _stream(transport, seq, len(speech), speech=True)
        emu.faults.drop()  # before the service ends the turn: no newer handle
        seq = await _stream(transport, seq, 50, speech=False)  # 1 s more, held in the gap
        await rec.wait_for("on_move", timeout=5)
        diagnostics = transport.get_diagnostics().input
        await transport.disconnect()
        await emu.wait_disconnected()

    (move,) = rec.moves
    assert (move.reason, move.outcome) == (MoveReason.LOST, MoveOutcome.RESUMED)
    assert (move.audio_chunks_dropped, diagnostics.audio_chunks_dropped) == (0, 0), (
        "nothing dropped: silence is not held"
    )
    assert diagnostics.silence_seconds_skipped > 1.0
    session = only_session(emu)
    summary = emu.ledger.summary().sessions[session.session_id]
    assert summary.speech_lost == ()
    resumed = session.connections[-1]
    replayed = {s for m in resumed.client_messages for s in m.audio_seqs}
    assert set(speech) <= replayed, "every chunk of speech reached the resumed session"
