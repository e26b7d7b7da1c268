"""Vertex AI ``transparent`` mode: after a resume, exactly the client messages after the
handle's ``lastConsumedClientMessageIndex`` are replayed — nothing twice, nothing lost."""

from __future__ import annotations

import asyncio

import pytest

from realtime_resumption.move_reports import MoveOutcome
from realtime_resumption.testing.emulator import Emulator, user_audio
from realtime_resumption.transport import ContentTurn

from .rotation_helpers import Recorder, emulator_config, make_transport, only_session


@pytest.mark.parametrize("fault", ["drop", "go_away"])
async def test_transparent_resume_replays_exactly_what_the_session_lacks(fault: str) -> None:
    async with Emulator(emulator_config("vertex")) as emu:
        transport = make_transport(emu, transparent=True)
        rec = Recorder(transport)
        await transport.connect()
        transport.send_content([ContentTurn("user", "hello there")])
        await rec.wait_for("on_turn_complete")
        await rec.wait(lambda r: r.of("on_resumption_update")[-1][2] == 1)
        for seq in range(1, 101):
            transport.send_audio(user_audio(seq, speech=False))
            if seq == 50:
                if fault == "drop":
                    emu.faults.drop()
                else:
                    emu.faults.go_away(60.0)
            await asyncio.sleep(0.002)
        await rec.wait_for("on_move")
        await transport.disconnect()

    (move,) = rec.moves
    assert move.outcome is MoveOutcome.RESUMED
    session = only_session(emu)
    summary = emu.ledger.summary().sessions[session.session_id]
    assert summary.audio_consumed == tuple(range(1, 101))
    assert summary.audio_duplicates == ()
    # The resumed connection got each chunk its session lacked once, and nothing else twice.
    handle = session.handles[session.connections[1].resumed_handle_index or 0]
    assert handle.last_consumed_index is not None
    delivered = [
        seq for c in session.connections for m in c.client_messages for seq in m.audio_seqs
    ]
    received_twice = len(delivered) - len(set(delivered))
    if fault == "go_away":
        assert received_twice == move.messages_replayed
    else:  # what was in flight when the socket dropped was written but never received
        assert received_twice <= move.messages_replayed
    assert summary.answers_cut == ()
