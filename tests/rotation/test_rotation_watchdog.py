"""Resumed but dead: a resumed connection that never answers gets the user's turn once more,
then the session is rebuilt. Over the real SDK against the emulator, whose resumed connection
is set up and then answers nothing (``faults.dead_after_resume``); the watchdog's own timing on
fast-forwarded loop time."""

from __future__ import annotations

import asyncio

import pytest

from realtime_resumption.gemini.watchdog import ResumeWatchdog, UserTurnRetainer, is_speech
from realtime_resumption.move_reports import HandleKind, MoveOutcome, MoveReason
from realtime_resumption.testing.emulator import Emulator, user_audio
from realtime_resumption.testing.emulator.ledger import ClientMessageRecord, ConnectionRecord
from realtime_resumption.transport import (
    ContentTurn,
    GenerationEndReason,
    ReconnectState,
    ReplayItem,
)

from .rotation_helpers import (
    Recorder,
    answered_with_handle,
    emulator_config,
    established,
    make_transport,
)

HISTORY = [ReplayItem("user", text="my name is Ada"), ReplayItem("model", text="Hello Ada")]
PCM = "audio/pcm;rate=16000"


def _sent(conn: ConnectionRecord) -> list[ClientMessageRecord]:
    """What the client sent on ``conn`` after its setup."""
    return conn.client_messages[1:]


async def test_a_dead_resumed_session_gets_the_turn_again_then_is_rebuilt() -> None:
    async with Emulator(emulator_config("gemini")) as emu:
        emu.faults.dead_after_resume()
        transport = make_transport(emu, resume_watchdog=0.2)
        rec = Recorder(transport)
        await transport.connect()
        transport.replay_history(HISTORY)
        # The service's first handle follows the first answer: the move resumes from it.
        await answered_with_handle(transport, rec)
        await emu.faults.go_away()
        await rec.wait_for("on_move")
        assert transport.send_live_text([ContentTurn("user", "are you there?")])
        await rec.wait_for("on_move", 2, timeout=5)
        # The rebuilt session is alive: it answers the question the dead one never did.
        await rec.wait(lambda r: r.ends().count(GenerationEndReason.GENERATION_COMPLETE) == 2)
        await transport.disconnect()
        await emu.wait_disconnected()

    planned, rebuilt = rec.moves
    assert (planned.reason, planned.outcome) == (MoveReason.PLANNED, MoveOutcome.RESUMED)
    assert (rebuilt.reason, rebuilt.handle_kind, rebuilt.outcome) == (
        MoveReason.LOST,
        HandleKind.NONE,
        MoveOutcome.REBUILT,
    )
    dead_session, fresh_session = emu.ledger.sessions.values()
    first, resumed = established(dead_session)
    assert not first.dead and resumed.dead
    assert resumed.setup is not None and resumed.setup.with_handle
    assert resumed.resumed_handle_index is not None
    handle = dead_session.handles[resumed.resumed_handle_index]
    assert handle.connection == first.index
    # The handle it resumed from followed the answered turn, so the session had the history
    # and that turn: neither is replayed. The new turn, then the same turn once more as a
    # complete turn.
    assert handle.issued_at > first.client_messages[-1].time
    typed, replayed = _sent(resumed)
    assert (typed.kind, typed.text) == ("text", "are you there?")
    assert replayed.kind == "client_content" and replayed.turn_complete
    assert replayed.turns == (("user", "are you there?"),)
    # The rebuilt session is fresh and starts from the history, then answers.
    (rebuilt_conn,) = fresh_session.connections
    assert rebuilt_conn.setup is not None
    assert rebuilt_conn.setup.resumption and not rebuilt_conn.setup.with_handle
    # The history once (what the client replayed itself and the answered turn), then the
    # unanswered turn once: the watchdog's restatement of the turn does not go again.
    seeded, asked = _sent(rebuilt_conn)
    assert seeded.kind == "client_content" and not seeded.turn_complete
    assert seeded.turns[:3] == (
        ("user", "my name is Ada"),
        ("model", "Hello Ada"),
        ("user", "hello there"),
    )
    assert [role for role, _ in seeded.turns] == ["user", "model", "user", "model"]
    assert (asked.kind, asked.text) == ("text", "are you there?")
    (answered,) = fresh_session.turns.values()
    assert answered.outcome == "complete"
    assert answered.user_text.endswith("are you there?")
    assert answered.delivered == answered.planned
    # The dead connection answered nothing: the session's only turn is the first one's.
    assert [t.connection for t in dead_session.turns.values()] == [first.index]


async def test_a_dead_resumed_session_with_nothing_to_rebuild_from_is_lost() -> None:
    """The call was answered by an earlier process; this one resumed it from the handle
    alone (the service issues none before an answer, and an answer puts a turn in the
    history), so it holds no conversation to rebuild from."""
    async with Emulator(emulator_config("gemini")) as emu:
        earlier = make_transport(emu)
        await earlier.connect()
        await answered_with_handle(earlier, Recorder(earlier))
        handle = earlier.resumption_handle
        await earlier.disconnect()
        transport = make_transport(emu, resume_watchdog=0.1)
        rec = Recorder(transport)
        await transport.reconnect(ReconnectState(resumption_handle=handle))
        emu.faults.dead_after_resume()  # the move's resume, not the one above
        # The resumed connection issues no handle before an answer, so the move waits for
        # the deadline's fallback: a short notice brings it at once.
        await emu.faults.go_away(20.0)
        await rec.wait_for("on_move")
        for seq in range(1, 4):
            transport.send_audio(user_audio(seq))  # speech: the watchdog's sign
        await rec.wait_for("on_close", timeout=5)
        await transport.disconnect()
        await emu.wait_disconnected()

    assert [m.outcome for m in rec.moves] == [MoveOutcome.RESUMED, MoveOutcome.LOST]
    assert rec.names("on_error", "on_close") == ["on_error", "on_close"]
    (session,) = emu.ledger.sessions.values()  # nothing was rebuilt
    taken_over, resumed = established(session)[1:]
    assert not taken_over.dead and taken_over.setup is not None and taken_over.setup.with_handle
    assert resumed.dead and resumed.setup is not None and resumed.setup.with_handle
    # The retained audio went back once, as one complete turn of inline audio.
    sent = _sent(resumed)
    assert [m.audio_seqs for m in sent if m.kind == "audio"] == [(1,), (2,), (3,)]
    (replay,) = [m for m in sent if m.kind == "client_content"]
    assert replay.turn_complete and replay.mime_types == (PCM,)
    assert replay.audio_seqs == (1, 2, 3)
    assert sent[-1] is replay


@pytest.mark.looptime
async def test_the_watchdog_bound_restarts_with_each_sign_and_stops_at_an_answer() -> None:
    expired: list[tuple[float, bool]] = []
    loop = asyncio.get_running_loop()
    dog = ResumeWatchdog(8.0, lambda first: expired.append((loop.time(), first)))
    start = loop.time()
    dog.user_turn()  # not watching yet: nothing runs
    assert not dog.armed
    dog.watch()
    dog.user_turn()
    await asyncio.sleep(5)
    dog.user_turn()  # the user still speaks: the bound starts again
    await asyncio.sleep(7.9)
    assert expired == []
    await asyncio.sleep(0.2)
    assert expired == [(pytest.approx(start + 13.0), True)]
    dog.user_turn()
    await asyncio.sleep(8.0)
    assert [first for _, first in expired] == [True, False]
    dog.watch()
    dog.user_turn()
    dog.answered()
    await asyncio.sleep(60)
    assert len(expired) == 2 and not dog.watching and not dog.armed
    off = ResumeWatchdog(None, lambda first: expired.append((loop.time(), first)))
    off.watch()
    off.user_turn()
    assert not off.watching and not off.armed
    with pytest.raises(ValueError, match="resume_watchdog"):
        ResumeWatchdog(0, lambda first: None)


def test_the_retained_turn_keeps_the_newest_audio_and_prefers_text() -> None:
    retainer = UserTurnRetainer(16_000, max_seconds=0.05)  # two and a half 20 ms chunks
    for seq in range(1, 6):
        retainer.audio(user_audio(seq))
    turn = retainer.audio_turn(3.0)
    assert turn is not None and turn.pcm == user_audio(4) + user_audio(5)
    assert (turn.sample_rate, turn.sealed_at) == (16_000, 3.0)
    assert retainer.text_turn is None
    retainer.text("hello")
    assert retainer.text_turn == "hello"
    retainer.clear()
    assert retainer.audio_turn(4.0) is None and retainer.text_turn is None
    assert is_speech(user_audio(1)) and not is_speech(user_audio(1, speech=False))
    assert not is_speech(b"")
