"""Lost connections (no goAway): the session resumes from the fallback handle, input is held
within its bounds and flushed after, failed attempts are retried, against the emulator."""

from __future__ import annotations

import asyncio

import pytest

from realtime_resumption.move_reports import HandleKind, MoveOutcome, MoveReason
from realtime_resumption.outbox import OutboxLimits
from realtime_resumption.testing.emulator import Emulator, user_audio
from realtime_resumption.transport import ContentTurn, GenerationEndReason

from ..transport.transport_helpers import connected_and_answered
from .rotation_helpers import (
    HELLO,
    emulator_config,
    make_transport,
    only_session,
    stream_silence,
)


@pytest.mark.parametrize("profile", ["gemini", "vertex"])
async def test_a_drop_at_idle_resumes_and_delivers_what_was_sent_in_the_gap(profile: str) -> None:
    async with Emulator(emulator_config(profile)) as emu:
        transport = make_transport(emu)
        rec = await connected_and_answered(transport)
        streaming = asyncio.create_task(stream_silence(transport, 1, 150, speech=True))
        await asyncio.sleep(0.05)
        assert emu.faults.drop() == 1
        await rec.wait_for("on_move")
        assert transport.is_connected
        await streaming
        await transport.disconnect()

    (move,) = rec.moves
    assert (move.reason, move.handle_kind, move.outcome, move.attempts) == (
        MoveReason.LOST,
        HandleKind.AFTER_TURN,
        MoveOutcome.RESUMED,
        1,
    )
    assert move.gap_ms > 0
    assert move.audio_chunks_dropped == 0
    summary = emu.ledger.summary().sessions[only_session(emu).session_id]
    assert summary.audio_consumed == tuple(range(1, 151))
    assert rec.of("on_close") == [(1000, "closed by the client")]
    assert rec.count("on_error") == 0
    assert [(e.code, e.connect_attempt_id) for e in rec.lifecycle("generation-close")] == [
        (1006, "att_1"),
        (1000, "att_2"),
    ]


async def test_a_drop_mid_answer_ends_it_and_the_question_is_answered_again() -> None:
    async with Emulator(emulator_config("gemini", answer_chunks=60)) as emu:
        transport = make_transport(emu)
        rec = await connected_and_answered(transport)  # the handle the move resumes from
        transport.send_content(HELLO)
        await rec.wait_for("on_audio_output", 60 + 3)
        emu.faults.drop()
        await rec.wait_for("on_generation_end", 3)
        await transport.disconnect()

    (move,) = rec.moves
    assert move.outcome is MoveOutcome.RESUMED
    assert move.messages_replayed == 1  # the question: the handle came before it
    assert rec.ends() == [
        GenerationEndReason.GENERATION_COMPLETE,
        GenerationEndReason.DISCONNECTED,
        GenerationEndReason.GENERATION_COMPLETE,
    ]
    rec.assert_paired()
    summary = emu.ledger.summary().sessions[only_session(emu).session_id]
    assert [t.outcome for t in summary.turns] == ["complete", "cut", "complete"]


async def test_a_refused_attempt_is_retried_and_the_move_reports_both() -> None:
    async with Emulator(emulator_config("gemini")) as emu:
        transport = make_transport(emu)
        rec = await connected_and_answered(transport)
        emu.faults.refuse_next(1, how="http503")
        emu.faults.drop()
        await rec.wait_for("on_move")
        transport.send_content(HELLO)
        await rec.wait_for("on_generation_end")
        await transport.disconnect()

    (move,) = rec.moves
    assert (move.outcome, move.attempts) == (MoveOutcome.RESUMED, 2)
    assert [e.failure.code for e in rec.lifecycle("setup-failed")] == [503]
    assert rec.count("on_error") == 0
    assert rec.ends() == [GenerationEndReason.GENERATION_COMPLETE]


async def test_a_drop_during_a_planned_move_turns_it_into_a_gap_and_loses_nothing() -> None:
    async with Emulator(emulator_config("gemini")) as emu:
        transport = make_transport(emu, setup_timeout=1.0)
        rec = await connected_and_answered(transport)
        emu.faults.hang_next(1)  # the replacement hangs past setup_timeout
        streaming = asyncio.create_task(stream_silence(transport, 1, 200))
        await asyncio.sleep(0.02)
        emu.faults.go_away(60.0)
        await rec.wait_for("on_move_started")
        await asyncio.sleep(0.05)
        assert emu.faults.drop() == 1  # the incumbent goes while the move is dialling
        await rec.wait_for("on_move")
        await streaming
        await transport.disconnect()

    (move,) = rec.moves
    assert (move.reason, move.outcome, move.attempts) == (
        MoveReason.PLANNED,
        MoveOutcome.RESUMED,
        2,
    )
    assert move.gap_ms > 0
    assert [e.failure.kind for e in rec.lifecycle("setup-failed")] == ["timeout"]
    assert rec.count("on_move_started") == 1
    summary = emu.ledger.summary().sessions[only_session(emu).session_id]
    # Silence only: held, then replayed in order, but for the middle of its long stretch
    # (only its edges are held) and what the replay's uncertain window skips.
    assert summary.audio_consumed == tuple(sorted(set(summary.audio_consumed)))
    assert summary.audio_consumed[-1] == 200


async def test_a_long_gap_drops_the_oldest_audio_within_its_bound_never_text() -> None:
    async with Emulator(emulator_config("gemini")) as emu:
        limits = OutboxLimits(max_audio_seconds=0.2)  # ten 20 ms chunks
        transport = make_transport(emu, input_buffer=limits, setup_timeout=1.0)
        rec = await connected_and_answered(transport)
        emu.faults.hang_next(1)
        emu.faults.drop()
        await rec.wait_for("on_move_started")
        for seq in range(1, 21):
            transport.send_audio(user_audio(seq, speech=False))
        transport.send_content([ContentTurn("user", "note this")], turn_complete=False)
        for seq in range(21, 41):
            transport.send_audio(user_audio(seq, speech=False))
        stats = transport.get_diagnostics().input
        assert stats is not None and stats.audio_chunks_dropped == 30
        await rec.wait_for("on_move")
        await transport.disconnect()

    (move,) = rec.moves
    assert move.outcome is MoveOutcome.RESUMED
    assert move.audio_chunks_dropped == 30
    assert move.audio_seconds_dropped == pytest.approx(0.6)
    assert move.messages_buffered == 11
    new = only_session(emu).connections[-1]
    kinds = [m.kind for m in new.client_messages[1:]]
    assert kinds == ["client_content"] + ["audio"] * 10
    summary = emu.ledger.summary().sessions[only_session(emu).session_id]
    assert summary.audio_consumed == tuple(range(31, 41))
    diagnostics = transport.get_diagnostics()
    assert diagnostics.moves is not None and diagnostics.moves.recent == (move,)
    assert diagnostics.moves.counts[MoveOutcome.RESUMED] == 1
