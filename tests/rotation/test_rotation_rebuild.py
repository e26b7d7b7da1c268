"""Refused or expired handles rebuild the session from the kept history; with nothing to
rebuild from, or no attempts left, the session is lost through the fatal path."""

from __future__ import annotations

import pytest

from realtime_resumption.move_reports import HandleKind, MoveOutcome, MoveReason
from realtime_resumption.testing.emulator import Emulator
from realtime_resumption.transport import (
    ContentTurn,
    NotConnectedError,
    SessionLostError,
)

from ..transport.transport_helpers import connected_and_answered
from .rotation_helpers import HELLO, Recorder, emulator_config, make_transport


async def _converse(transport: object, rec: Recorder) -> None:
    """One completed turn, and the handle that follows it."""
    transport.send_content(HELLO)  # type: ignore[attr-defined]
    await rec.wait_for("on_generation_end")
    await rec.wait(lambda r: r.of("on_resumption_update")[-1][1])


@pytest.mark.parametrize("after_setup", [False, True])
async def test_an_expired_handle_rebuilds_the_session_from_its_history(after_setup: bool) -> None:
    config = emulator_config("gemini", refuse_after_setup_complete=after_setup)
    async with Emulator(config) as emu:
        transport = make_transport(emu)
        rec = Recorder(transport)
        await transport.connect()
        await _converse(transport, rec)
        emu.faults.expire_handles()
        emu.faults.drop()
        await rec.wait_for("on_move")
        transport.send_content([ContentTurn("user", "and now?")])
        await rec.wait_for("on_generation_end", 2)
        await transport.disconnect()

    (move,) = rec.moves
    assert (move.reason, move.outcome, move.handle_kind, move.attempts) == (
        MoveReason.LOST,
        MoveOutcome.REBUILT,
        HandleKind.NONE,
        2,
    )
    old, new = emu.ledger.sessions.values()
    assert [c.refused for c in old.connections] == [None, "handle"]
    (fresh,) = new.connections
    assert fresh.resumed_from is None
    seeded = fresh.client_messages[1]
    assert seeded.kind == "client_content"
    assert seeded.text is not None and "hello there" in seeded.text and "[0.0]" in seeded.text
    assert fresh.client_messages[2].text == "and now?"
    assert rec.count("on_error") == 0
    assert rec.count("on_close") == 1


async def test_a_handle_refused_twice_with_1011_rebuilds() -> None:
    async with Emulator(emulator_config("gemini")) as emu:
        transport = make_transport(emu)
        rec = Recorder(transport)
        await transport.connect()
        await _converse(transport, rec)
        emu.faults.refuse_next(2, how="close1011")
        emu.faults.drop()
        await rec.wait_for("on_move")
        await transport.disconnect()

    (move,) = rec.moves
    assert (move.outcome, move.attempts) == (MoveOutcome.REBUILT, 3)
    assert len(emu.ledger.sessions) == 2


async def test_no_handle_and_no_history_loses_the_session_through_the_fatal_path() -> None:
    async with Emulator(emulator_config("gemini")) as emu:
        transport = make_transport(emu)
        rec = Recorder(transport)
        emu.faults.refuse_next(1, how="close1011")  # set up, then closed: no handle ever came
        await transport.connect()
        await rec.wait_for("on_close")
        assert not transport.is_connected
        with pytest.raises(NotConnectedError):
            transport.send_content(HELLO)
        await transport.disconnect()

    assert rec.names("on_move_started", "on_move", "on_error", "on_close") == [
        "on_move_started",
        "on_move",
        "on_error",
        "on_close",
    ]
    (move,) = rec.moves
    assert (move.reason, move.outcome, move.attempts) == (MoveReason.LOST, MoveOutcome.LOST, 0)
    assert move.error is not None and "no resumption handle" in move.error
    ((event,),) = rec.of("on_error")
    assert isinstance(event.error, SessionLostError) and not event.recoverable
    assert rec.of("on_close") == [(1011, "Internal error encountered.")]


@pytest.mark.parametrize("budget", [2, None])
async def test_spent_attempts_lose_the_session_once(budget: int | None) -> None:
    async with Emulator(emulator_config("gemini")) as emu:
        options = {"retry_budget": budget} if budget else {}
        transport = make_transport(emu, **options)
        rec = await connected_and_answered(transport)
        emu.faults.refuse_next(10, how="http503")
        emu.faults.drop()
        await rec.wait_for("on_close")
        await transport.disconnect()

    assert rec.names("on_move", "on_error", "on_close") == ["on_move", "on_error", "on_close"]
    (move,) = rec.moves
    assert move.outcome is MoveOutcome.LOST
    # The session-wide budget (2) ends it before the helper's three attempts do.
    assert move.attempts == (budget or 3)
    ((event,),) = rec.of("on_error")
    assert isinstance(event.error, SessionLostError) and not event.recoverable
    if budget:
        assert "retry budget" in str(event.error)
    assert rec.of("on_close") == [(1006, rec.of("on_close")[0][1])]
    assert not transport.is_connected
    assert len(rec.lifecycle("setup-failed")) == move.attempts
