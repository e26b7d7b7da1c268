"""No stall while the replacement sets up slowly: the old connection keeps taking all input,
a turn that begins on it is answered there, and the move comes after it, against the emulator.

The replacement's setup is slowed on the client side: the credential provider of each dial
after the first waits ``SLOW_DIAL`` seconds before the handshake (as long as a slow server
setup, from the transport's view: the incumbent serves meanwhile).
"""

from __future__ import annotations

import asyncio

from realtime_resumption.emulator import Emulator, user_audio
from realtime_resumption.gemini import Credential, GeminiLiveTransport
from realtime_resumption.moves import MoveOutcome, MoveReason
from realtime_resumption.transport import ContentTurn, GenerationEndReason

from .rotation_helpers import (
    FAST,
    GRACE,
    MODEL,
    Recorder,
    emulator_config,
    only_session,
    stream_silence,
)

SLOW_DIAL = 0.4


class SlowDials:
    """Credentials at once for the first dial, after ``SLOW_DIAL`` for every later one."""

    def __init__(self) -> None:
        self.dials = 0
        self.slow_started = asyncio.Event()

    async def __call__(self) -> Credential:
        self.dials += 1
        if self.dials > 1:
            self.slow_started.set()
            await asyncio.sleep(SLOW_DIAL)
        return Credential("emulator-key")


def _transport(emu: Emulator, dials: SlowDials) -> GeminiLiveTransport:
    return GeminiLiveTransport(
        model=MODEL,
        http_options=emu.http_options(),
        credential_provider=dials,
        resumption=FAST,
        tool_call_grace=GRACE,
    )


async def test_a_question_during_a_slow_dial_is_answered_on_the_old_connection() -> None:
    async with Emulator(emulator_config("gemini")) as emu:
        dials = SlowDials()
        transport = _transport(emu, dials)
        rec = Recorder(transport)
        await transport.connect()
        await rec.wait_for("on_resumption_update")
        emu.faults.go_away(60.0)
        await asyncio.wait_for(dials.slow_started.wait(), 5)
        transport.send_content([ContentTurn("user", "what is new")])
        await rec.wait(lambda r: GenerationEndReason.GENERATION_COMPLETE in r.ends())
        answered_before_move = rec.count("on_move") == 0
        await rec.wait_for("on_move", timeout=5)
        await transport.disconnect()

    assert answered_before_move, "the answer did not wait for the move"
    (move,) = rec.moves
    assert (move.reason, move.outcome, move.gap_ms, move.turn_cut) == (
        MoveReason.PLANNED,
        MoveOutcome.RESUMED,
        0.0,
        False,
    )
    assert move.attempts == 2, "the dial whose snapshot lacked the turn was given up"
    session = only_session(emu)
    old = session.connections[0].client_messages
    assert any(("user", "what is new") in m.turns for m in old), "the old connection took it"
    (turn,) = session.turns.values()
    assert turn.outcome == "complete"
    summary = emu.ledger.summary().sessions[session.session_id]
    assert summary.answers_cut == ()
    rec.assert_paired()


async def test_the_user_speaking_through_a_slow_dial_is_not_held() -> None:
    async with Emulator(emulator_config("gemini", answer_chunks=10)) as emu:
        dials = SlowDials()
        transport = _transport(emu, dials)
        rec = Recorder(transport)
        await transport.connect()
        await rec.wait_for("on_resumption_update")
        emu.faults.go_away(60.0)
        await asyncio.wait_for(dials.slow_started.wait(), 5)
        words = ("what", "is", "the", "time")
        for seq, word in enumerate(words, start=1):
            transport.send_audio(user_audio(seq, word=word))
            await asyncio.sleep(0.002)
        await stream_silence(transport, len(words) + 1, 30)
        await rec.wait(lambda r: GenerationEndReason.GENERATION_COMPLETE in r.ends())
        await rec.wait_for("on_move", timeout=5)
        await transport.disconnect()
        await emu.wait_disconnected()

    (move,) = rec.moves
    assert (move.outcome, move.gap_ms, move.turn_cut) == (MoveOutcome.RESUMED, 0.0, False)
    session = only_session(emu)
    heard_on_old = [seq for m in session.connections[0].client_messages for seq in m.audio_seqs]
    assert heard_on_old[: len(words)] == [1, 2, 3, 4], "the old connection took the turn"
    summary = emu.ledger.summary().sessions[session.session_id]
    assert summary.answers_cut == ()
    assert summary.audio_lost == ()
    (turn,) = session.turns.values()
    assert turn.outcome == "complete" and turn.delivered == turn.planned
