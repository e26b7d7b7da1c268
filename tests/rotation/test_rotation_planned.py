"""Planned moves (goAway): make-before-break at the next resumable point, the deadline
fallback, the break-before-make fallback, and back-to-back rotations, against the emulator."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from realtime_resumption.move_reports import HandleKind, MoveOutcome, MoveReason, MoveReport
from realtime_resumption.outbox import OutboxLimits
from realtime_resumption.testing.emulator import Emulator, answer_chunk_id, user_audio
from realtime_resumption.transport import ContentTurn, GenerationEndReason

from ..ledger_checks import assert_nothing_said_lost
from ..transport.transport_helpers import connected_and_answered
from .rotation_helpers import (
    HELLO,
    Recorder,
    answered_with_handle,
    assert_closed_first,
    emulator_config,
    established,
    go_away_while_streaming,
    kind_emulator_config,
    make_transport,
    only_session,
    resumable,
    seconds,
    stream_silence,
)

COMPRESSED_MARGINS = OutboxLimits(handle_margin=0.005, round_trip_tolerance=0.005)
"""Arrival margins for a test whose question, answer and handle all come within milliseconds
(the emulator's clock runs fast): the defaults, sized for a real service, would replay the
question."""
WORDS = ("what", "is", "the", "time")


async def _go_away_at_idle(emu: Emulator, *, kind: bool) -> Recorder:
    """A goAway at idle while the user's microphone streams 150 chunks of silence."""
    transport = make_transport(emu)
    rec = Recorder(transport)
    await transport.connect()
    await resumable(transport, rec, kind=kind)
    await go_away_while_streaming(emu, transport, rec)
    await emu.wait_disconnected()
    return rec


def _one_planned_resume(rec: Recorder) -> MoveReport:
    """The session's one move: planned, from the handle after the answer, resumed, with the
    audio written after that handle replayed; announced as such."""
    (move,) = rec.moves
    assert (move.reason, move.handle_kind, move.outcome) == (
        MoveReason.PLANNED,
        HandleKind.AFTER_TURN,
        MoveOutcome.RESUMED,
    )
    assert move.messages_replayed > 0  # the audio written after the handle it resumed from
    assert rec.of("on_move_started") == [(MoveReason.PLANNED, HandleKind.AFTER_TURN)]
    return move


@pytest.mark.parametrize("profile", ["gemini", "vertex"])
async def test_go_away_at_idle_closes_first_then_resumes_and_loses_no_input(profile: str) -> None:
    """The service refuses the resume beside the open connection: the old connection closes,
    the same handle resumes, and what the microphone sent meanwhile is held and delivered."""
    async with Emulator(emulator_config(profile)) as emu:
        rec = await _go_away_at_idle(emu, kind=False)

    move = _one_planned_resume(rec)
    session = only_session(emu)
    assert_closed_first(session, move, refused=True)
    old, new = established(session)
    assert new.resumed_handle_index == len(session.handles) - 1  # the old connection's last
    assert session.handles[new.resumed_handle_index].connection == old.index
    assert old.closed_by == "client"
    summary = emu.ledger.summary().sessions[session.session_id]
    assert summary.audio_consumed == tuple(range(1, 151))  # each chunk once, in order
    assert_nothing_said_lost(summary)
    assert rec.of("on_close") == [(1000, "closed by the client")]
    # Each connection set up closed once; the refused dial never counted as one.
    set_up = [e.connect_attempt_id for e in rec.lifecycle("setup-ok")]
    assert [e.connect_attempt_id for e in rec.lifecycle("generation-close")] == set_up
    assert len(set_up) == 2


@pytest.mark.parametrize("profile", ["gemini", "vertex"])
async def test_go_away_at_idle_moves_before_breaking_on_a_kind_service(profile: str) -> None:
    async with Emulator(kind_emulator_config(profile)) as emu:
        rec = await _go_away_at_idle(emu, kind=True)

    move = _one_planned_resume(rec)
    assert move.gap_ms == 0.0
    assert move.attempts == 1
    session = only_session(emu)
    old, new = session.connections
    assert new.resumed_handle_index == len(session.handles) - 2  # the old connection's last
    assert new.setup_at is not None and old.closed_at is not None
    assert new.setup_at < old.closed_at  # make-before-break: both were open at once
    assert old.closed_by == "client"
    summary = emu.ledger.summary().sessions[session.session_id]
    assert summary.audio_consumed == tuple(range(1, 151))  # each chunk once, in order
    assert_nothing_said_lost(summary)
    assert rec.of("on_close") == [(1000, "closed by the client")]
    assert [e.connect_attempt_id for e in rec.lifecycle("generation-close")] == ["att_1", "att_2"]


@pytest.mark.parametrize("profile", ["gemini", "vertex"])
async def test_go_away_mid_answer_waits_for_the_answer_to_finish(profile: str) -> None:
    async with Emulator(emulator_config(profile, answer_chunks=40)) as emu:
        transport = make_transport(emu)
        rec = Recorder(transport)
        await transport.connect()
        # No handle yet (the service issues the first after an answer): the move resumes
        # from the one that follows this answer.
        transport.send_content(HELLO)
        await rec.wait_for("on_audio_output", 3)
        emu.faults.go_away(60.0)  # 3 s left, the fallback 2 s away: the answer needs 80 ms
        await rec.wait_for("on_move")
        await transport.disconnect()

    (move,) = rec.moves
    assert (move.handle_kind, move.outcome) == (HandleKind.AFTER_TURN, MoveOutcome.RESUMED)
    assert_closed_first(only_session(emu), move, refused=True)
    names = rec.names("on_turn_complete", "on_move_started")
    assert names == ["on_turn_complete", "on_move_started"]
    chunks = [answer_chunk_id(data) for (data,) in rec.of("on_audio_output")]
    assert chunks == [(0, k) for k in range(40)]
    assert rec.ends() == [GenerationEndReason.GENERATION_COMPLETE]
    rec.assert_paired()
    summary = emu.ledger.summary().sessions[only_session(emu).session_id]
    assert summary.answers_cut == ()


async def test_go_away_between_turn_complete_and_the_handle_moves_at_the_handle() -> None:
    # Vertex AI issues the post-turn handle 20-70 ms after turnComplete; here 100 ms.
    config = emulator_config("vertex", handle_delay=(2.0, 2.0))
    async with Emulator(config) as emu:
        transport = make_transport(emu)
        rec = Recorder(transport)
        await transport.connect()
        transport.send_content(HELLO)
        await rec.wait_for("on_turn_complete")
        updates_before = rec.count("on_resumption_update")
        await emu.faults.go_away(60.0)
        await rec.wait_for("on_move")
        await transport.disconnect()

    (move,) = rec.moves
    assert (move.handle_kind, move.reason, move.outcome) == (
        HandleKind.AFTER_TURN,
        MoveReason.PLANNED,
        MoveOutcome.RESUMED,
    )
    # The move waited for the handle that followed the turn, and resumed from it.
    names = rec.names("on_go_away", "on_resumption_update", "on_move_started")
    started = names.index("on_move_started") + 1
    assert names[:started][-3:] == ["on_go_away", "on_resumption_update", "on_move_started"]
    assert rec.count("on_resumption_update") > updates_before
    session = only_session(emu)
    resumed_from = session.handles[session.connections[1].resumed_handle_index or 0]
    assert resumed_from.snapshot.answer is None  # no answer in progress in that snapshot
    assert len(resumed_from.snapshot.history) == 1


@pytest.mark.parametrize("profile", ["gemini", "vertex"])
async def test_a_silent_connection_moves_at_the_deadline_and_ends_the_cut_answer(
    profile: str,
) -> None:
    async with Emulator(emulator_config(profile, answer_chunks=200)) as emu:
        transport = make_transport(emu)
        rec = await connected_and_answered(transport)  # the handle the move resumes from
        transport.send_content(HELLO)
        await rec.wait_for("on_audio_output", 200 + 3)
        started = asyncio.get_running_loop().time()
        # 1.5 s left and nothing more from this connection: no resumable point will come.
        emu.faults.go_away(30.0, silence=True)
        await rec.wait_for("on_move")
        moved_after = asyncio.get_running_loop().time() - started
        await rec.wait(lambda r: r.count("on_generation_end") >= 2)
        if profile == "gemini":
            # The question came after the handle the move resumed from: it is replayed,
            # and the model answers it again on the new connection.
            await rec.wait_for("on_generation_end", 3)
        await transport.disconnect()

    (move,) = rec.moves
    assert (move.handle_kind, move.reason, move.outcome) == (
        HandleKind.MID_TURN,
        MoveReason.DEADLINE,
        MoveOutcome.RESUMED,
    )
    # The fallback moment: a third of the notice before the deadline, at least 1 s.
    assert seconds(30.0) - 1.0 - 0.2 < moved_after < seconds(30.0) - 0.5
    assert rec.ends()[:2] == [GenerationEndReason.GENERATION_COMPLETE, GenerationEndReason.MOVED]
    rec.assert_paired()
    session = only_session(emu)
    assert_closed_first(session, move, refused=True)
    if profile == "gemini":
        assert rec.ends()[2] == GenerationEndReason.GENERATION_COMPLETE
        replayed = established(session)[1].client_messages[1]
        assert (replayed.kind, replayed.text) == ("client_content", "hello there")


async def test_two_rotations_back_to_back_both_resume_after_the_turn() -> None:
    async with Emulator(emulator_config("gemini")) as emu:
        transport = make_transport(emu)
        rec = await connected_and_answered(transport)
        await emu.faults.go_away(20.0)
        await rec.wait_for("on_move")
        # The new connection's first handle follows its first answer.
        await answered_with_handle(transport, rec)
        emu.faults.go_away(20.0, session_id=only_session(emu).session_id)
        await rec.wait_for("on_move", 2)
        transport.send_content(HELLO)
        await rec.wait_for("on_generation_end", 3)
        await transport.disconnect()

    assert [(m.number, m.handle_kind, m.outcome) for m in rec.moves] == [
        (1, HandleKind.AFTER_TURN, MoveOutcome.RESUMED),
        (2, HandleKind.AFTER_TURN, MoveOutcome.RESUMED),
    ]
    session = only_session(emu)
    first, second = rec.moves
    assert_closed_first(session, first, refused=True)
    assert_closed_first(session, second, refused=False)  # the endpoint is known by now
    connections = established(session)
    assert len(connections) == 3
    # Each connection resumed from a handle its predecessor issued.
    for previous, connection in itertools.pairwise(connections):
        index = connection.resumed_handle_index
        assert index is not None and session.handles[index].connection == previous.index
    assert rec.ends() == [GenerationEndReason.GENERATION_COMPLETE] * 3


async def test_a_resume_refused_while_the_old_connection_is_open_falls_back_for_good() -> None:
    async with Emulator(emulator_config("gemini")) as emu:
        transport = make_transport(emu)
        rec = await connected_and_answered(transport)
        for start in (1, 101):
            # The microphone streams through each move; the second one resumes from the
            # handle that follows an answer on the new connection, before the stream.
            if start > 1:
                await answered_with_handle(transport, rec)
            streaming = asyncio.create_task(stream_silence(transport, start, 100))
            await asyncio.sleep(0.05)
            emu.faults.go_away(20.0, session_id=only_session(emu).session_id)
            await rec.wait_for("on_move", start // 100 + 1)
            await streaming
        await transport.disconnect()
        await emu.wait_disconnected()

    first, second = rec.moves
    assert (first.outcome, first.attempts) == (MoveOutcome.RESUMED, 2)
    assert first.gap_ms > 0  # the old connection closed before the second dial
    assert first.messages_buffered > 0 or first.messages_replayed > 0
    # Remembered: the next move closes the old connection first and is not refused.
    assert (second.outcome, second.attempts) == (MoveOutcome.RESUMED, 1)
    assert second.gap_ms > 0
    session = only_session(emu)
    assert_closed_first(session, first, refused=True)
    assert_closed_first(session, second, refused=False)
    assert [c.refused for c in session.connections] == [None, "open-session", None, None]
    summary = emu.ledger.summary().sessions[session.session_id]
    assert summary.audio_received[-1] == 200 and summary.audio_duplicates == ()
    # Each move held the input, and a held stretch of silence is replayed by its edges
    # (``OutboxLimits.silence_padding``): a chunk may be missing only as silence, never
    # speech (the ledger tells them apart).
    assert_nothing_said_lost(summary)
    missing = set(range(1, 201)) - set(summary.audio_consumed)
    assert missing == set(summary.silence_lost), missing


async def test_the_end_of_an_interrupted_answer_is_no_place_to_move() -> None:
    async with Emulator(emulator_config("gemini", answer_chunks=10)) as emu:
        transport = make_transport(emu)
        rec = Recorder(transport)
        await transport.connect()
        transport.send_live_text([ContentTurn("user", "tell me a story")])
        await rec.wait_for("on_first_audio_chunk")
        emu.faults.go_away(60.0)
        await rec.wait_for("on_go_away")
        # The user cuts in: the first answer ends interrupted, and a second one begins.
        transport.send_live_text([ContentTurn("user", "a shorter one")])
        await rec.wait_for("on_move")
        await rec.wait(lambda r: GenerationEndReason.GENERATION_COMPLETE in r.ends())
        await transport.disconnect()
        await emu.wait_disconnected()

    (move,) = rec.moves
    assert (move.handle_kind, move.outcome) == (HandleKind.AFTER_TURN, MoveOutcome.RESUMED)
    rec.assert_paired()
    session = only_session(emu)
    summary = emu.ledger.summary().sessions[session.session_id]
    assert summary.answers_cut == ()
    outcomes = [(t.user_text, t.outcome) for t in session.turns.values()]
    assert outcomes == [("tell me a story", "interrupted"), ("a shorter one", "complete")]
    # The move came after the second answer, at the handle its turnComplete brought.
    assert rec.names("on_turn_complete", "on_move_started")[-1] == "on_move_started"
    assert rec.count("on_turn_complete") == 2


async def _a_turn_begun_as_the_move_starts(emu: Emulator, *, kind: bool) -> Recorder:
    """At idle a goAway starts the move at once; the user then asks a question aloud."""
    # The answer and its handle come within milliseconds of the question here (a real one
    # takes seconds): arrival margins that long would replay the question.
    transport = make_transport(emu, input_buffer=COMPRESSED_MARGINS)
    rec = Recorder(transport)
    await transport.connect()
    await resumable(transport, rec, kind=kind)
    emu.faults.go_away(60.0)
    await rec.wait_for("on_move_started")  # idle: the move starts dialling at once
    for seq, word in enumerate(WORDS, start=1):
        transport.send_audio(user_audio(seq, word=word))
    await stream_silence(transport, len(WORDS) + 1, 20)  # enough to end the turn
    await rec.wait_for("on_move")
    await rec.wait(lambda r: r.ends().count(GenerationEndReason.GENERATION_COMPLETE) == 2 - kind)
    await transport.disconnect()
    await emu.wait_disconnected()
    return rec


async def test_a_turn_begun_as_the_move_starts_is_answered_once_whole() -> None:
    """On the service's terms the old connection closes before the replacement is set up:
    the question, held or taken by the old connection, reaches the resumed session whole
    and is answered once."""
    async with Emulator(emulator_config("gemini", answer_chunks=10)) as emu:
        rec = await _a_turn_begun_as_the_move_starts(emu, kind=False)

    (move,) = rec.moves
    assert (move.handle_kind, move.outcome) == (HandleKind.AFTER_TURN, MoveOutcome.RESUMED)
    assert not move.turn_cut
    assert rec.ends() == [GenerationEndReason.GENERATION_COMPLETE] * 2
    rec.assert_paired()
    session = only_session(emu)
    assert_closed_first(session, move, refused=True)
    summary = emu.ledger.summary().sessions[session.session_id]
    assert summary.answers_cut == ()
    assert_nothing_said_lost(summary)
    assert set(range(1, len(WORDS) + 1)) <= set(summary.audio_consumed), "the words kept"
    asked = [t for t in session.turns.values() if t.user_text == " ".join(WORDS)]
    assert [(t.outcome, t.delivered == t.planned) for t in asked] == [("complete", True)]


async def test_a_turn_begun_as_the_move_dials_runs_on_the_incumbent_on_a_kind_service() -> None:
    """No stall: the old connection keeps taking the user's turn and answers it; the
    replacement, whose snapshot lacks the turn, is given up, and the move resumes from the
    handle that follows the answer."""
    async with Emulator(kind_emulator_config("gemini", answer_chunks=10)) as emu:
        rec = await _a_turn_begun_as_the_move_starts(emu, kind=True)

    (move,) = rec.moves
    assert (move.handle_kind, move.outcome) == (HandleKind.AFTER_TURN, MoveOutcome.RESUMED)
    assert move.gap_ms == 0  # the old connection took every chunk until the switch
    assert not move.turn_cut
    assert rec.ends() == [GenerationEndReason.GENERATION_COMPLETE]
    rec.assert_paired()
    session = only_session(emu)
    old = session.connections[0]
    assert [seq for m in old.client_messages for seq in m.audio_seqs][: len(WORDS)] == [1, 2, 3, 4]
    final = session.connections[-1]
    resumed_from = session.handles[final.resumed_handle_index or 0]
    assert len(resumed_from.snapshot.history) == 1, "resumed after the answered turn"
    summary = emu.ledger.summary().sessions[session.session_id]
    assert summary.answers_cut == ()
    assert_nothing_said_lost(summary)
    (answered,) = session.turns.values()
    assert answered.outcome == "complete" and answered.delivered == answered.planned


@pytest.mark.parametrize("voice_activity", [False, True])
async def test_go_away_while_the_user_speaks_waits_for_the_turn_to_end(
    voice_activity: bool,
) -> None:
    config = emulator_config("gemini", answer_chunks=10, voice_activity=voice_activity)
    async with Emulator(config) as emu:
        # The whole utterance is sent, and answered, within milliseconds here: arrival
        # margins as long as a real service needs would replay all of it.
        transport = make_transport(emu, input_buffer=COMPRESSED_MARGINS)
        rec = Recorder(transport)
        await transport.connect()
        # No handle yet (the service issues the first after an answer): the move resumes
        # from the one that follows the user's turn.
        words = WORDS
        for seq, word in enumerate(words, start=1):
            transport.send_audio(user_audio(seq, word=word))
        await rec.wait_for("on_input_transcription")
        emu.faults.go_away(60.0)
        await rec.wait_for("on_go_away")
        assert rec.count("on_move_started") == 0  # the user's turn is in progress
        await stream_silence(transport, len(words) + 1, 20)  # silence: the turn ends
        await rec.wait_for("on_move")
        await transport.disconnect()

    (move,) = rec.moves
    assert (move.handle_kind, move.outcome) == (HandleKind.AFTER_TURN, MoveOutcome.RESUMED)
    assert_closed_first(only_session(emu), move, refused=True)
    assert rec.names("on_turn_complete", "on_move_started") == [
        "on_turn_complete",
        "on_move_started",
    ]
    assert rec.ends() == [GenerationEndReason.GENERATION_COMPLETE]
    summary = emu.ledger.summary().sessions[only_session(emu).session_id]
    assert summary.answers_cut == ()
    assert_nothing_said_lost(summary)
    assert set(range(1, len(words) + 1)) <= set(summary.audio_consumed), "the words kept"
    # Only silence written within the arrival margin of the handle may come twice.
    assert all(seq > len(words) for seq in summary.audio_duplicates)
    assert "".join(text for (text,) in rec.of("on_input_transcription")) == "what is the time"
