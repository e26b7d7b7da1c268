"""A ``goAway`` that reaches a connection right after a resume, before that connection has
issued a handle of its own.

The helper (``SessionResumption``) keeps its rule for its own users: the handle a move resumed
from is no resumable point, so a planned move waits for the new connection's first one. The
transport knows more. While nothing has been said since the switch, the point after the
resume is as good as one (the handle and the replay the new connection got are all the
session holds), so an idle session moves at once. And with compression off, a ``goAway`` whose
deadline is no later than the one the last move answered says that the server session, not
the connection, is ending (the 15-minute cap): the session is rebuilt from its history rather
than resumed into a session the service is about to end.
"""

from __future__ import annotations

import pytest

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.move_reports import HandleKind, MoveOutcome, MoveReason
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig, user_audio
from realtime_resumption.transport import ContentTurn, GenerationEndReason

from ..ledger_checks import assert_nothing_said_lost
from ..transport.transport_helpers import connected_and_answered
from .rotation_helpers import (
    TIME_SCALE,
    Recorder,
    answered_with_handle,
    emulator_config,
    make_transport,
    only_session,
    stream_silence,
)

NOTICE = 60.0
"""The goAway notice (emulated seconds): its deadline fallback (59 s with the tests' 1 s
margin) comes 2.95 s of wall time after it."""


async def moved_once(emu: Emulator, **options: object) -> tuple[GeminiLiveTransport, Recorder]:
    """A transport that answered once, then moved at a goAway (from the handle after the
    answer, at once): the new connection has issued no handle yet."""
    transport = make_transport(emu, **options)
    rec = await connected_and_answered(transport)
    emu.faults.go_away(NOTICE)
    await rec.wait_for("on_move")
    return transport, rec


@pytest.mark.parametrize("profile", ["gemini", "vertex"])
async def test_an_idle_session_moves_at_once_on_a_go_away_right_after_a_resume(
    profile: str,
) -> None:
    async with Emulator(emulator_config(profile)) as emu:
        transport, rec = await moved_once(emu)
        emu.faults.go_away(NOTICE)
        await rec.wait_for("on_move", 2)
        # The session still serves after the second move.
        start = len(rec.events)
        transport.send_content([ContentTurn("user", "still there?")])
        await rec.wait(lambda r: "on_generation_end" in r.names()[start:], timeout=5.0)
        await transport.disconnect()
        await emu.wait_disconnected()

    first, second = rec.moves
    assert (first.reason, first.outcome) == (MoveReason.PLANNED, MoveOutcome.RESUMED)
    # Before: the move waited for the deadline fallback and was reported as a deadline move.
    assert (second.reason, second.handle_kind) == (MoveReason.PLANNED, HandleKind.AFTER_TURN)
    assert second.outcome is MoveOutcome.RESUMED and not second.turn_cut
    assert second.go_away_to_switch_ms is not None
    assert second.go_away_to_switch_ms < NOTICE * TIME_SCALE * 1000 / 2, (
        "it moved at once, not at the fallback"
    )
    session = only_session(emu)
    assert_nothing_said_lost(emu.ledger.summary().sessions[session.session_id])


async def test_a_session_the_user_spoke_to_after_the_resume_waits_for_the_end_of_the_turn() -> None:
    """The user starts speaking right after the resume, and the goAway comes before the
    service has said anything of it (no transcription yet): the point after the resume is no
    longer the session's, so the move waits for the handle the answer ends with, and the
    answer is heard whole on the resumed connection."""
    async with Emulator(emulator_config("gemini")) as emu:
        # Without the resume watchdog, which counts speech for its own reasons.
        transport, rec = await moved_once(emu, resume_watchdog=None)
        for seq, word in enumerate(("what", "is", "the", "time"), start=1):
            transport.send_audio(user_audio(seq, word=word))
        emu.faults.go_away(NOTICE)
        await stream_silence(transport, 5, 30)
        await rec.wait_for("on_move", 2)
        await transport.disconnect()
        await emu.wait_disconnected()

    second = rec.moves[1]
    assert (second.reason, second.outcome) == (MoveReason.PLANNED, MoveOutcome.RESUMED)
    assert not second.turn_cut
    assert second.go_away_to_switch_ms is not None
    names = rec.names()
    moved = [i for i, name in enumerate(names) if name == "on_move"][1]
    go_away = max(i for i, name in enumerate(names[:moved]) if name == "on_go_away")
    assert "on_generation_end" in names[go_away:moved], (
        "the answer to what the user said ended before the move"
    )
    # (A third answer may follow on the new connection: under load the replay reaches back
    # past the handle and the question is heard again; the replay window's rule, not this.)
    assert rec.ends()[:2] == [GenerationEndReason.GENERATION_COMPLETE] * 2
    assert_nothing_said_lost(emu.ledger.summary().sessions[only_session(emu).session_id])


async def test_a_rebuilt_session_is_rebuilt_again_at_once_on_a_go_away_before_its_first_handle() -> (
    None
):
    """Every resume is refused (handles expire at once), so the first move rebuilds; the
    rebuilt session has issued no handle when its goAway comes. Nothing was said since, so it
    is rebuilt again at once, a planned move, instead of letting the notice lapse into a lost
    connection at the deadline."""
    async with Emulator(emulator_config("gemini", handle_lifetime=0.0)) as emu:
        transport, rec = await moved_once(emu)
        emu.faults.go_away(NOTICE)
        await rec.wait_for("on_move", 2)
        await transport.disconnect()
        await emu.wait_disconnected()

    assert [(m.reason, m.outcome) for m in rec.moves] == [
        (MoveReason.PLANNED, MoveOutcome.REBUILT)
    ] * 2
    assert not rec.moves[1].turn_cut
    *_, last = emu.ledger.sessions.values()
    seed = last.connections[0].client_messages[1]
    assert seed.kind == "client_content" and ("user", "hello there") in seed.turns


CAP = 60.0
"""The session cap (emulated seconds; 3 s of wall time)."""
CAP_NOTICE = 10.0
"""The cap's goAway comes this long before it (0.5 s of wall time)."""


def capped(**changes: object) -> EmulatorConfig:
    return emulator_config("gemini", session_cap=CAP, notice=CAP_NOTICE, **changes)


async def test_a_session_at_its_cap_is_rebuilt_at_once_instead_of_resumed_again() -> None:
    """Compression off: the cap's goAway reaches the first connection; the move resumes (the
    transport cannot tell a cap from a rotation), and the resumed connection gets a goAway at
    once, with the same deadline. That session is ending: the transport rebuilds it from
    its history at once, instead of resuming into it again and again until the service
    refuses the handle."""
    async with Emulator(capped()) as emu:
        transport = make_transport(emu, context_window_compression=None)
        rec = Recorder(transport)
        await transport.connect()
        await answered_with_handle(transport, rec, "my name is Ada")
        # The cap's goAway, at the first connection.
        await rec.wait(lambda r: any(m.outcome is MoveOutcome.REBUILT for m in r.moves), 10.0)
        start = len(rec.events)
        transport.send_content([ContentTurn("user", "what is my name?")])
        await rec.wait(lambda r: "on_generation_end" in r.names()[start:], timeout=5.0)
        await transport.disconnect()
        await emu.wait_disconnected()

    moves = [(m.reason, m.outcome) for m in rec.moves]
    # Before: resume after resume into the ending session (one per goAway it sends at each
    # setup), until the cap and a refused handle.
    assert moves == [
        (MoveReason.PLANNED, MoveOutcome.RESUMED),
        (MoveReason.PLANNED, MoveOutcome.REBUILT),
    ], moves
    capped_session, rebuilt = emu.ledger.sessions.values()
    assert [c.refused for c in capped_session.connections if c.refused] == ["open-session"]
    # The rebuilt session's first message is the history: the earlier turn is in it.
    first = rebuilt.connections[0].client_messages[1]
    assert first.kind == "client_content" and ("user", "my name is Ada") in first.turns
    assert_nothing_said_lost(emu.ledger.summary().sessions[rebuilt.session_id])


async def test_with_compression_a_go_away_with_no_later_deadline_resumes() -> None:
    """Compression on, there is no cap: a second goAway right after a resume, with a deadline
    no later than the first's, is a connection's end like any other, and the session
    resumes (at once: it is idle)."""
    async with Emulator(emulator_config("gemini")) as emu:
        transport, rec = await moved_once(emu)
        emu.faults.go_away(NOTICE / 2)
        await rec.wait_for("on_move", 2)
        await transport.disconnect()
        await emu.wait_disconnected()

    assert [(m.reason, m.outcome) for m in rec.moves] == [
        (MoveReason.PLANNED, MoveOutcome.RESUMED)
    ] * 2
    only_session(emu)
