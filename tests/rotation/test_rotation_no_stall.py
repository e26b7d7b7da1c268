"""Moves while the replacement sets up slowly (the emulator's ``slow_setups``, as the
service's seconds-long "reconnect penalty").

On a kind service (make-before-break accepted) there is no stall: the old connection keeps
taking all input, a turn that begins on it is answered there, and the move comes after it.
On the service's terms the old connection closes before the replacement's setup: the input
is held for that setup alone, and what the user says meanwhile reaches the resumed session
whole and is answered once. Each cell asserts the ledger's per-move figures: input stall or
gap, audio lost and audio heard twice."""

from __future__ import annotations

import asyncio

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.move_reports import MoveOutcome, MoveReason
from realtime_resumption.testing.emulator import Emulator, user_audio
from realtime_resumption.testing.emulator.ledger import SessionSummary
from realtime_resumption.transport import ContentTurn, GenerationEndReason

from ..ledger_checks import assert_nothing_said_lost
from .arena import SILENCE_TWICE_PER_MOVE, SPEECH_TWICE_PER_MOVE
from .rotation_helpers import (
    CHUNK,
    TIME_SCALE,
    Recorder,
    answered_with_handle,
    assert_closed_first,
    emulator_config,
    kind_emulator_config,
    make_transport,
    only_session,
    resumable,
    stream_silence,
)

SLOW_SETUP = 0.4
"""Wall seconds every resumed setup takes (the emulator's clock runs at ``TIME_SCALE``)."""
STALL_BOUND = SLOW_SETUP / 4
"""An input stall this long would mean input waited for the setup."""


async def _microphone(transport: GeminiLiveTransport, first: int, seconds: float) -> None:
    """Silent user audio numbered from ``first``, in real time for ``seconds``."""
    await stream_silence(transport, first, round(seconds / CHUNK), every=CHUNK)


async def _slow_emulator_transport(
    emu: Emulator, *, kind: bool
) -> tuple[GeminiLiveTransport, Recorder]:
    emu.faults.slow_setups(100, SLOW_SETUP / TIME_SCALE, resumed_only=True)
    transport = make_transport(emu)
    rec = Recorder(transport)
    await transport.connect()
    await resumable(transport, rec, kind=kind)
    return transport, rec


def _summary(emu: Emulator) -> SessionSummary:
    return emu.ledger.summary().sessions[only_session(emu).session_id]


def _assert_no_stall(summary: SessionSummary) -> None:
    """``_assert_kept``, and no move stalled the input while a replacement set up."""
    for move in summary.moves:
        assert move.input_stall is not None and move.input_stall < STALL_BOUND, move
    _assert_kept(summary)


def _assert_kept(summary: SessionSummary) -> None:
    """Each move lost nothing the user said, made little heard twice, and cut no answer."""
    assert summary.moves, "the ledger saw the move"
    for move in summary.moves:
        assert_nothing_said_lost(move)
        # Without transparent mode the handle's place in the input is estimated from the
        # round trip: chunks written within the margin before it may be heard twice (README,
        # Limits), within the matrix's fixed bounds.
        assert len(move.speech_duplicates) <= SPEECH_TWICE_PER_MOVE, move
        assert len(move.silence_duplicates) <= SILENCE_TWICE_PER_MOVE, move
    assert summary.answers_cut == ()


async def _a_question_during_a_slow_setup(emu: Emulator, *, kind: bool) -> tuple[Recorder, bool]:
    """The user types a question as the move starts; returns the recorder and whether the
    answer was in before the move ended."""
    transport, rec = await _slow_emulator_transport(emu, kind=kind)
    streaming = asyncio.create_task(_microphone(transport, 1, 3 * SLOW_SETUP))
    emu.faults.go_away(60.0)
    await rec.wait_for("on_move_started")
    transport.send_content([ContentTurn("user", "what is new")])
    await rec.wait(lambda r: r.ends().count(GenerationEndReason.GENERATION_COMPLETE) == 2 - kind)
    answered_before_move = rec.count("on_move") == 0
    await rec.wait_for("on_move", timeout=5)
    await streaming
    await transport.disconnect()
    await emu.wait_disconnected()
    return rec, answered_before_move


async def test_a_question_in_a_slow_setup_is_answered_on_the_old_one_on_a_kind_service() -> None:
    async with Emulator(kind_emulator_config("gemini")) as emu:
        rec, answered_before_move = await _a_question_during_a_slow_setup(emu, kind=True)

    assert answered_before_move, "the answer did not wait for the move"
    (move,) = rec.moves
    assert (move.reason, move.outcome, move.gap_ms, move.turn_cut) == (
        MoveReason.PLANNED,
        MoveOutcome.RESUMED,
        0.0,
        False,
    )
    old = only_session(emu).connections[0].client_messages
    assert any(("user", "what is new") in m.turns for m in old), "the old connection took it"
    _assert_no_stall(_summary(emu))
    rec.assert_paired()


async def test_a_question_in_a_slow_setup_is_answered_once_input_held_for_the_setup() -> None:
    async with Emulator(emulator_config("gemini")) as emu:
        rec, _ = await _a_question_during_a_slow_setup(emu, kind=False)

    (move,) = rec.moves
    assert (move.reason, move.outcome, move.turn_cut) == (
        MoveReason.PLANNED,
        MoveOutcome.RESUMED,
        False,
    )
    session = only_session(emu)
    assert_closed_first(session, move, refused=True)
    asked = [t for t in session.turns.values() if t.user_text == "what is new"]
    assert [(t.outcome, t.delivered == t.planned) for t in asked] == [("complete", True)]
    _assert_kept(_summary(emu))
    rec.assert_paired()


WORDS = ("what", "is", "the", "time")


async def _speaking_through_a_slow_setup(emu: Emulator, *, kind: bool) -> Recorder:
    transport, rec = await _slow_emulator_transport(emu, kind=kind)
    emu.faults.go_away(60.0)
    await rec.wait_for("on_move_started")
    for seq, word in enumerate(WORDS, start=1):
        transport.send_audio(user_audio(seq, word=word))
        await asyncio.sleep(0.002)
    await _microphone(transport, len(WORDS) + 1, 3 * SLOW_SETUP)  # the turn ends
    await rec.wait(lambda r: r.ends().count(GenerationEndReason.GENERATION_COMPLETE) == 2 - kind)
    await rec.wait_for("on_move", timeout=5)
    await transport.disconnect()
    await emu.wait_disconnected()
    return rec


async def test_the_user_speaking_through_a_slow_setup_is_not_held_on_a_kind_service() -> None:
    async with Emulator(kind_emulator_config("gemini", answer_chunks=10)) as emu:
        rec = await _speaking_through_a_slow_setup(emu, kind=True)

    (move,) = rec.moves
    assert (move.outcome, move.gap_ms, move.turn_cut) == (MoveOutcome.RESUMED, 0.0, False)
    session = only_session(emu)
    heard_on_old = [seq for m in session.connections[0].client_messages for seq in m.audio_seqs]
    assert heard_on_old[: len(WORDS)] == [1, 2, 3, 4], "the old connection took the turn"
    (turn,) = session.turns.values()
    assert turn.outcome == "complete" and turn.delivered == turn.planned
    _assert_no_stall(_summary(emu))


async def test_the_user_speaking_through_a_slow_setup_is_held_whole_and_answered_once() -> None:
    async with Emulator(emulator_config("gemini", answer_chunks=10)) as emu:
        rec = await _speaking_through_a_slow_setup(emu, kind=False)

    (move,) = rec.moves
    assert (move.outcome, move.turn_cut) == (MoveOutcome.RESUMED, False)
    session = only_session(emu)
    assert_closed_first(session, move, refused=True)
    asked = [t for t in session.turns.values() if t.user_text == " ".join(WORDS)]
    assert [(t.outcome, t.delivered == t.planned) for t in asked] == [("complete", True)]
    summary = _summary(emu)
    assert set(range(1, len(WORDS) + 1)) <= set(summary.audio_consumed), "the words kept"
    _assert_kept(summary)


async def _two_moves_with_slow_setups(emu: Emulator, *, kind: bool) -> Recorder:
    transport, rec = await _slow_emulator_transport(emu, kind=kind)
    streaming = asyncio.create_task(_microphone(transport, 1, 5 * SLOW_SETUP))
    emu.faults.go_away(60.0)
    await rec.wait_for("on_move", timeout=5)
    if kind:
        await rec.wait(lambda r: r.names()[-1] == "on_resumption_update")
    else:
        # The new connection's first handle follows its first answer.
        await answered_with_handle(transport, rec)
    emu.faults.go_away(60.0, session_id=only_session(emu).session_id)
    await rec.wait_for("on_move", 2, timeout=5)
    await streaming
    await transport.disconnect()
    await emu.wait_disconnected()
    return rec


async def test_two_moves_back_to_back_with_slow_setups_on_a_kind_service() -> None:
    async with Emulator(kind_emulator_config("gemini")) as emu:
        rec = await _two_moves_with_slow_setups(emu, kind=True)

    assert [(m.outcome, m.gap_ms) for m in rec.moves] == [(MoveOutcome.RESUMED, 0.0)] * 2
    summary = _summary(emu)
    assert len(summary.moves) == 2
    _assert_no_stall(summary)
    assert_nothing_said_lost(summary)


async def test_two_moves_back_to_back_with_slow_setups() -> None:
    """The second move knows the endpoint: it closes the old connection first, no dial
    refused; each holds the input for its setup alone."""
    async with Emulator(emulator_config("gemini")) as emu:
        rec = await _two_moves_with_slow_setups(emu, kind=False)

    assert [m.outcome for m in rec.moves] == [MoveOutcome.RESUMED] * 2
    session = only_session(emu)
    first, second = rec.moves
    assert_closed_first(session, first, refused=True)
    assert_closed_first(session, second, refused=False)
    summary = _summary(emu)
    assert len(summary.moves) == 2
    _assert_kept(summary)
    assert_nothing_said_lost(summary)
