"""Moves on the service's terms, as teams measured the live service in 2026: a resume refused
while the old connection is open (1011 right after the setup frame, or after setupComplete).

The emulator's defaults are that service; each test names the setting it varies. What must
hold: the session resumes with the same handle (context kept, never rebuilt), nothing the user
said is lost or heard twice, and the process remembers the endpoint, so later moves and
sessions close the old connection first without a refused dial.
"""

from __future__ import annotations

import asyncio

import pytest

from realtime_resumption.gemini import GeminiLiveTransport, preopen
from realtime_resumption.move_reports import MoveOutcome, MoveReport
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig
from realtime_resumption.transport import ContentTurn, GenerationEndReason

from ..transport.transport_helpers import handle_after_the_answer
from .rotation_helpers import TIME_SCALE, Recorder, make_transport, only_session, say

WHEN = ["before_setup_complete", "after_setup_complete"]
QUESTION = ("what", "is", "the", "time")


def strict(profile: str, **changes: object) -> EmulatorConfig:
    """The emulator's defaults (the service as measured), at the tests' time scale."""
    changes.setdefault("time_scale", TIME_SCALE)
    return EmulatorConfig(profile=profile, **changes)  # type: ignore[arg-type]


async def answered_once(transport: GeminiLiveTransport, rec: Recorder) -> None:
    """A first answer, and the handle that follows it (the service issues none before)."""
    start = len(rec.events)
    transport.send_live_text([ContentTurn("user", "hello there")])
    await rec.wait(handle_after_the_answer(start))


async def moved_once(emu: Emulator) -> tuple[GeminiLiveTransport, Recorder]:
    """A connected transport that answered once, then moved at a goAway."""
    transport = make_transport(emu)
    rec = Recorder(transport)
    await transport.connect()
    await answered_once(transport, rec)
    emu.faults.go_away(20.0)
    await rec.wait_for("on_move")
    return transport, rec


async def speak(transport: GeminiLiveTransport, first: int) -> int:
    """The question as speech at a microphone's pace (2 ms per 20 ms chunk at this time
    scale), then silence; returns the next seq."""
    return await say(transport, QUESTION, first, silence_after=30, every=0.001)


@pytest.mark.parametrize("profile", ["gemini", "vertex"])
@pytest.mark.parametrize("when", WHEN)
async def test_a_resume_refused_while_open_resumes_with_the_same_handle(
    profile: str, when: str
) -> None:
    async with Emulator(strict(profile, refuse_resume_while_open_when=when)) as emu:
        transport, rec = await moved_once(emu)
        # The user asks right after the move: the session that answers has the context.
        await speak(transport, 1)
        await rec.wait_for("on_generation_end", 2)
        await transport.disconnect()
        await emu.wait_disconnected()

    (move,) = rec.moves
    assert move.outcome is MoveOutcome.RESUMED, "a refusal while open is no refused handle"
    assert move.attempts == 2
    session = only_session(emu)  # one server session: never rebuilt
    assert [c.refused for c in session.connections] == [None, "open-session", None]
    final = session.connections[-1]
    assert final.resumed_handle_index is not None
    assert session.connections[1].resumed_handle_index == final.resumed_handle_index, (
        "the refused dial and the one after it carry the same handle"
    )
    summary = emu.ledger.summary().sessions[session.session_id]
    assert summary.speech_lost == () and summary.speech_duplicates == ()
    assert summary.answers_cut == ()
    assert rec.ends() == [GenerationEndReason.GENERATION_COMPLETE] * 2


@pytest.mark.parametrize("profile", ["gemini", "vertex"])
async def test_the_endpoint_is_remembered_by_later_moves_and_sessions(profile: str) -> None:
    async with Emulator(strict(profile)) as emu:
        first, _ = await moved_once(emu)
        await first.disconnect()
        second, rec = await moved_once(emu)
        await second.disconnect()
        await emu.wait_disconnected()

    (move,) = rec.moves
    assert (move.outcome, move.attempts) == (MoveOutcome.RESUMED, 1)
    sessions = list(emu.ledger.sessions.values())
    assert [c.refused for c in sessions[0].connections] == [None, "open-session", None]
    assert [c.refused for c in sessions[1].connections] == [None, None], (
        "the second session closes the old connection first: no refused dial"
    )


async def test_a_kind_service_keeps_make_before_break() -> None:
    async with Emulator(EmulatorConfig.kind(time_scale=TIME_SCALE)) as emu:
        transport, rec = await moved_once(emu)
        await transport.disconnect()
        await emu.wait_disconnected()

    (move,) = rec.moves
    assert (move.outcome, move.attempts, move.gap_ms) == (MoveOutcome.RESUMED, 1, 0.0)
    session = only_session(emu)
    assert [c.refused for c in session.connections] == [None, None]
    first, second = session.connections
    assert first.closed_at is not None and second.opened_at < first.closed_at, "overlap"


LONG_CALL_SCALE = 0.004
"""A 40-minute call in under 10 s of wall time: 15 minutes are 3.6 s, a 50 s notice 0.2 s."""


async def long_call(compression: bool) -> tuple[Emulator, list[MoveReport], int]:
    """A 40-minute call (on the emulator's clock) with a rotation every 10 minutes and a
    spoken question every few minutes; returns the emulator, the moves that ended before the
    caller hung up (one the hang-up stops is reported lost) and the questions asked."""
    # Answers take 0.2 s of wall time, as a real one takes seconds: one that came within the
    # replay's margin of its question would place the question in that margin.
    config = strict(
        "gemini",
        time_scale=LONG_CALL_SCALE,
        rotate_every=600.0,
        answer_chunks=5,
        chunk_interval=10.0,
    )
    options = {} if compression else {"context_window_compression": None}
    async with Emulator(config) as emu:
        transport = make_transport(emu, **options)
        rec = Recorder(transport)
        await transport.connect()
        await answered_once(transport, rec)
        seq, asked = 1, 0
        loop = asyncio.get_running_loop()
        end = loop.time() + 40 * 60 * LONG_CALL_SCALE
        while loop.time() < end:
            seq = await speak(transport, seq)
            asked += 1
            await rec.wait_for("on_generation_end", asked + 1, timeout=10.0)
            await asyncio.sleep(180 * LONG_CALL_SCALE)
        hung_up = loop.time()
        await transport.disconnect()
        await emu.wait_disconnected()
    ends = rec.ends()
    complete = ends.count(GenerationEndReason.GENERATION_COMPLETE)
    assert complete + ends.count(GenerationEndReason.MOVED) >= asked + 1, "every question answered"
    if compression:
        assert complete >= asked + 1, "no answer cut"
    return emu, [m for m in rec.moves if m.finished_at < hung_up], asked


async def test_a_long_call_has_no_session_cap_by_default() -> None:
    emu, moves, asked = await long_call(compression=True)
    assert asked >= 5
    assert len(emu.ledger.sessions) == 1, "one server session for the whole call"
    (session,) = emu.ledger.sessions.values()
    assert session.capped_at is None
    assert {m.outcome for m in moves} == {MoveOutcome.RESUMED}
    assert len(moves) >= 3
    summary = emu.ledger.summary().sessions[session.session_id]
    assert summary.speech_lost == () and summary.speech_duplicates == ()


async def test_a_session_that_reaches_the_cap_is_rebuilt_with_nothing_said_lost() -> None:
    """Compression off (the user's choice): at 15 minutes the service ends the session and
    refuses to resume it. Its goAway looks like a rotation's, so the move resumes once; the
    resumed connection's goAway at once, with the same deadline, says the session is ending,
    and the transport rebuilds it from the history there and then: one resume and one rebuild
    per cap, no resume refused, and the user's words all reach a session."""
    emu, moves, asked = await long_call(compression=False)
    assert asked >= 5
    outcomes = [m.outcome for m in moves]
    assert MoveOutcome.REBUILT in outcomes and MoveOutcome.LOST not in outcomes
    sessions = list(emu.ledger.sessions.values())
    assert len(sessions) >= 2
    for rebuild in (m for m in moves if m.outcome is MoveOutcome.REBUILT):
        # One resume into the ending session (its goAway looked like a rotation's), not one
        # per goAway it sends at each setup: 7 to 22 within the notice before.
        notice = 50 * LONG_CALL_SCALE
        into_it = [
            m
            for m in moves
            if m.outcome is MoveOutcome.RESUMED
            and rebuild.started_at - notice < m.started_at < rebuild.started_at
        ]
        assert len(into_it) == 1, [(m.reason, m.outcome) for m in moves]
    refused = [c.refused for s in sessions for c in s.connections if c.refused]
    assert "session-ended" not in refused, "rebuilt before the cap, not after a refused resume"
    summary = emu.ledger.summary()
    # A session the cap ends may lack what a resume was still replaying to it: the rebuild
    # carries those words to the next session, which must hold them.
    later: set[int] = set()
    for session in reversed(sessions):
        figures = summary.sessions[session.session_id]
        if figures.speech_lost:
            assert session.capped_at is not None, f"{session.session_id} lost speech"
            assert set(figures.speech_lost) <= later, "the words the cap cut reach a session"
        later.update(figures.audio_consumed)
    # The rebuild carries the conversation: a rebuilt session starts from the history, and
    # that history holds every question an earlier session answered (the first of them the
    # greeting), however many moves came before the rebuild.
    for i, rebuilt in enumerate(sessions[1:], start=1):
        answered = sum(
            turn.outcome == "complete"
            for earlier in sessions[:i]
            for turn in earlier.turns.values()
        )
        first = rebuilt.connections[0]
        assert first.resumed_from is None, "a rebuilt session starts fresh"
        seed = next((m for m in first.client_messages if m.kind == "client_content"), None)
        assert seed is not None and seed.index == 1, f"{rebuilt.session_id} was seeded with nothing"
        said = [text for role, text in seed.turns if role == "user"]
        assert said[:1] == ["hello there"] and len(said) >= answered, (
            f"{rebuilt.session_id} was seeded with {len(said)} of the {answered} questions "
            f"answered before it: {seed.turns}"
        )


async def test_without_a_way_to_hold_the_setup_the_move_closes_first_then_dials(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A google-genai without the name ``gemini.preopen`` wraps: the old connection closes
    before the replacement dials, so the resume is not refused a second time."""
    monkeypatch.setattr(preopen, "install", lambda: False)
    async with Emulator(strict("gemini")) as emu:
        transport, rec = await moved_once(emu)
        await transport.disconnect()
        await emu.wait_disconnected()

    (move,) = rec.moves
    assert (move.outcome, move.attempts) == (MoveOutcome.RESUMED, 2)
    assert [c.refused for c in only_session(emu).connections] == [None, "open-session", None]
