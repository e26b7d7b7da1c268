"""Connections whose life depends on the model: gemini-3.8-live holds a connection 58 minutes
and closes it with 1011 "Deadline expired" and no goAway, then refuses the resume with 1007
(the emulator's 3.8 profile). The session moves with nothing the user said lost, and the
refusal rebuilds it with the conversation so far. With a goAway before that close, the same
58-minute connection is moved as planned, resumed.

The emulator runs at 1/1000 here (58 minutes in 3.5 s); the transport's windows are those of
the other rotation scenarios (``arena``), which only grow relative to the emulator's time."""

from __future__ import annotations

import asyncio

import pytest

from realtime_resumption.move_reports import HandleKind, MoveOutcome, MoveReason
from realtime_resumption.testing.emulator.caller import Utterance

from .arena import (
    PROFILES,
    QUESTION,
    WAIT,
    WARM_UP,
    Arena,
    Expect,
    Profile,
    Rig,
    check_invariants,
)

LIFETIME_SCALE = 0.001
LIFETIME = 3480.0
"""gemini-3.8-live's reported connection life (58 minutes), before scaling."""
SPOKEN_OVER_THE_CLOSE = ("and", "what", "about", "the", "weather", "tomorrow", "morning")
SPEAK_BEFORE = 0.15
"""Wall seconds before the close the user starts the utterance (60 chunks: 0.3 s)."""


async def _speak_over_the_deadline(rig: Rig) -> Utterance:
    """Start an utterance just before the connection's deadline, so the close cuts it."""
    emu = rig.emu
    (conn,) = emu.ledger.sessions[rig.session_id].connections
    assert conn.setup_at is not None
    close_at = emu.started_at + conn.setup_at + emu.config.scaled(LIFETIME)
    loop = asyncio.get_running_loop()
    await asyncio.sleep(max(0.0, close_at - SPEAK_BEFORE - loop.time()))
    return rig.caller.say(SPOKEN_OVER_THE_CLOSE, speech_chunks=60)


@pytest.mark.parametrize("profile", PROFILES)
async def test_a_58_minute_connection_closed_without_notice_rebuilds_with_nothing_lost(
    arena: Arena, profile: Profile
) -> None:
    emu = await arena.emulator(profile, "gemini-3.8-live", time_scale=LIFETIME_SCALE)
    rig = arena.rig(emu)
    await rig.start()
    await rig.warm_up()
    await rig.caller.ask(QUESTION, timeout=WAIT)
    await rig.wait_idle_handle()
    utterance = await _speak_over_the_deadline(rig)
    await rig.wait_quiet(1)
    said = " ".join(SPOKEN_OVER_THE_CLOSE)

    def answered_in_the_new_session(_: object) -> bool:
        session = emu.ledger.sessions.get(rig.current_session)
        turns = session.turns.values() if session is not None else ()
        return any(said in t.user_text and t.outcome != "running" for t in turns)

    await rig.caller.wait_until(
        answered_in_the_new_session, timeout=WAIT, what="an answer to what the close cut"
    )
    await rig.alive()
    ledger = await arena.finish()
    assert ledger is not None

    (move,) = rig.record.moves
    assert (move.reason, move.outcome) == (MoveReason.LOST, MoveOutcome.REBUILT)
    old, new = (emu.ledger.sessions[s] for s in dict.fromkeys(rig.record.session_ids))
    first, refused = old.connections
    assert first.close_code == (1011 if profile == "gemini" else 1000)
    assert "go_away" not in [m.kind for m in first.server_messages], "closed without notice"
    assert first.setup_at is not None and first.closed_at is not None
    assert first.closed_at - first.setup_at == pytest.approx(emu.config.scaled(LIFETIME), rel=0.05)
    assert (refused.refused, refused.close_code) == ("deadline", 1007)
    # The user was speaking when the connection closed.
    assert utterance.started_at is not None and utterance.finished_at is not None
    closed = emu.started_at + first.closed_at
    assert utterance.started_at < closed < utterance.finished_at
    # The new session was seeded with the earlier questions, and heard the utterance the close
    # cut (replayed: the refused session's handle could not carry it) in one turn, once.
    (fresh,) = new.connections
    assert fresh.resumed_from is None
    seeded = fresh.client_messages[1]
    assert seeded.kind == "client_content" and seeded.text is not None
    assert " ".join(WARM_UP) in seeded.text and " ".join(QUESTION) in seeded.text
    assert [said in t.user_text for t in new.turns.values()].count(True) == 1
    # No speech lost (the ledger's ground truth, across both sessions); an answer in flight at
    # the close may be cut: no notice came.
    check_invariants(
        rig,
        ledger,
        Expect(
            outcomes=(MoveOutcome.REBUILT,),
            reasons=(MoveReason.LOST,),
            handle_kinds=(HandleKind.NONE,),
            cut_allowed=True,
        ),
    )


GO_AWAY_NOTICE = 2000.0
"""2 s at 1/1000: above the transport's 1 s deadline margin, as 50 s is at full time."""


async def test_a_58_minute_connection_with_a_go_away_first_is_resumed(arena: Arena) -> None:
    emu = await arena.emulator(
        "gemini",
        "gemini-3.8-live",
        time_scale=LIFETIME_SCALE,
        rotate_without_go_away=False,
        notice=GO_AWAY_NOTICE,
    )
    rig = arena.rig(emu)
    await rig.start()
    await rig.warm_up()
    await rig.wait_quiet(1)
    await rig.alive()
    ledger = await arena.finish()
    assert ledger is not None
    check_invariants(
        rig,
        ledger,
        Expect(reasons=(MoveReason.PLANNED,), handle_kinds=(HandleKind.AFTER_TURN,)),
    )
    (session,) = emu.ledger.sessions.values()
    first = session.connections[0]
    assert first.setup_at is not None
    (go_away,) = [m.time for m in first.server_messages if m.kind == "go_away"]
    lived = emu.config.scaled(LIFETIME - GO_AWAY_NOTICE)
    assert go_away - first.setup_at == pytest.approx(lived, rel=0.05)
    # The service refused the first resume beside the open connection; the transport closed
    # it and resumed with the same handle.
    assert [c.refused for c in session.connections] == [None, "open-session", None]
