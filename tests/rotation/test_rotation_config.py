"""Setup changes Gemini cannot apply live ride on a planned move (reason ``config``) at the
next resumable point; ``reconnect`` moves on request."""

from __future__ import annotations

import time

import pytest

from realtime_resumption.gemini import Credential, GeminiLiveTransport
from realtime_resumption.move_reports import HandleKind, MoveOutcome, MoveReason
from realtime_resumption.testing.emulator import Emulator, answer_chunk_id
from realtime_resumption.testing.emulator.ledger import ConnectionRecord, SessionRecord
from realtime_resumption.transport import (
    ContentTurn,
    GenerationEndReason,
    ReconnectState,
    SessionUpdate,
    SetupRefusedError,
)

from ..transport.transport_helpers import connected_and_answered
from .rotation_helpers import (
    FAST,
    MODEL,
    Recorder,
    answered_with_handle,
    assert_closed_first,
    emulator_config,
    established,
    make_transport,
    only_session,
)

TOOLS = [{"name": "lookup", "description": "Looks things up."}]
ASK = [ContentTurn("user", "lookup the weather")]


async def test_new_tools_move_the_session_at_once_when_idle() -> None:
    async with Emulator(emulator_config("gemini")) as emu:
        transport = make_transport(emu)
        rec = await connected_and_answered(transport)
        await transport.update_session(SessionUpdate(tools=TOOLS))
        assert transport.pending_setup_change
        await rec.wait_for("on_move")
        assert not transport.pending_setup_change
        transport.send_content(ASK)
        await rec.wait_for("on_tool_call")  # only the new setup declares the tool
        await transport.disconnect()

    (move,) = rec.moves
    assert (move.reason, move.handle_kind, move.outcome) == (
        MoveReason.CONFIG,
        HandleKind.AFTER_TURN,
        MoveOutcome.RESUMED,
    )
    assert rec.of("on_move_started") == [(MoveReason.CONFIG, HandleKind.AFTER_TURN)]
    session = only_session(emu)
    assert_closed_first(session, move, refused=True)
    old, new = _moved(session)
    assert old.setup is not None and new.setup is not None
    assert (old.setup.tools, new.setup.tools) == ((), ("lookup",))
    assert session.state is not None and session.state.functions == ("lookup",)


async def test_new_tools_on_a_fresh_connection_go_live_with_no_user_turn() -> None:
    """A connection that has answered nothing issues no handle before the user's next turn:
    the session moves to the new setup now (rebuilt: nothing was said to lose), not after
    that turn was answered with the old one."""
    async with Emulator(emulator_config("gemini")) as emu:
        transport = make_transport(emu)
        rec = Recorder(transport)
        await transport.connect()
        await transport.update_session(SessionUpdate(tools=TOOLS))
        await rec.wait_for("on_move")
        assert not transport.pending_setup_change
        transport.send_content(ASK)
        await rec.wait_for("on_tool_call")  # only the new setup declares the tool
        await transport.disconnect()

    (move,) = rec.moves
    assert (move.reason, move.handle_kind, move.outcome) == (
        MoveReason.CONFIG,
        HandleKind.NONE,
        MoveOutcome.REBUILT,
    )
    first, second = emu.ledger.sessions.values()
    (old,) = [c for c in first.connections if c.established]
    (new,) = [c for c in second.connections if c.established]
    assert old.setup is not None and new.setup is not None
    assert (old.setup.tools, new.setup.tools) == ((), ("lookup",))
    assert new.setup_at is not None and old.closed_at is not None


@pytest.mark.parametrize("profile", ["gemini", "vertex"])
async def test_a_change_mid_answer_waits_for_the_answer(profile: str) -> None:
    async with Emulator(emulator_config(profile, answer_chunks=40)) as emu:
        transport = make_transport(emu, system_instruction="be chatty")
        rec = Recorder(transport)
        await transport.connect()
        # No handle yet (the service issues the first after an answer): the move resumes
        # from the one that follows this answer.
        transport.send_content([ContentTurn("user", "hello there")])
        await rec.wait_for("on_audio_output", 3)
        await transport.transfer_session(SessionUpdate(instructions="be terse", voice="Puck"))
        await rec.wait_for("on_move")
        await transport.disconnect()

    (move,) = rec.moves
    assert (move.reason, move.handle_kind) == (MoveReason.CONFIG, HandleKind.AFTER_TURN)
    assert rec.names("on_turn_complete", "on_move_started") == [
        "on_turn_complete",
        "on_move_started",
    ]
    chunks = [answer_chunk_id(data) for (data,) in rec.of("on_audio_output")]
    assert chunks == [(0, k) for k in range(40)]
    assert rec.ends() == [GenerationEndReason.GENERATION_COMPLETE]
    # The ledger: the new connection's setup carries the new instruction and voice, the
    # session runs under them, and the answer was whole on the old connection.
    session = only_session(emu)
    old, new = _moved(session)
    assert old.setup is not None and new.setup is not None
    assert (old.setup.system_instruction, old.setup.voice) == ("be chatty", None)
    assert (new.setup.system_instruction, new.setup.voice) == ("be terse", "Puck")
    assert session.state is not None
    assert (session.state.system_instruction, session.state.voice) == ("be terse", "Puck")
    (turn,) = session.turns.values()
    assert (turn.connection, turn.outcome, turn.delivered) == (old.index, "complete", 40)
    assert emu.ledger.summary().sessions[session.session_id].answers_cut == ()


async def test_a_service_that_refuses_a_new_instruction_gets_a_rebuilt_session() -> None:
    # Gemini 3.x models are reported to refuse a new system instruction mid-session.
    async with Emulator(emulator_config("gemini", instruction_change="refuse")) as emu:
        transport = make_transport(emu, system_instruction="be chatty")
        rec = Recorder(transport)
        await transport.connect()
        transport.send_content([ContentTurn("user", "hello there")])
        await rec.wait_for("on_turn_complete")
        await transport.update_session(SessionUpdate(instructions="be terse"))
        await rec.wait_for("on_move")
        transport.send_content([ContentTurn("user", "still there")])
        await rec.wait_for("on_turn_complete", 2)
        await transport.disconnect()
        await emu.wait_disconnected()

    (move,) = rec.moves
    assert (move.reason, move.outcome) == (MoveReason.CONFIG, MoveOutcome.REBUILT)
    old_session, new_session = emu.ledger.sessions.values()
    # On the service's terms the resume beside the open connection is refused first; the
    # next dial, after the close, is refused for the instruction.
    assert [c.refused for c in old_session.connections] == [None, "open-session", "instruction"]
    refused = old_session.connections[-1]
    assert refused.refused == "instruction" and refused.setup is not None
    assert refused.setup.with_handle and refused.setup.system_instruction == "be terse"
    (rebuilt,) = new_session.connections
    assert rebuilt.setup is not None and not rebuilt.setup.with_handle
    assert rebuilt.setup.system_instruction == "be terse"
    seeded = rebuilt.client_messages[1]
    assert seeded.kind == "client_content" and seeded.turns[0] == ("user", "hello there")
    assert new_session.state is not None and new_session.state.system_instruction == "be terse"
    assert [t.outcome for t in new_session.turns.values()] == ["complete"]


@pytest.mark.parametrize("profile", ["gemini", "vertex"])
async def test_a_setup_the_service_refuses_is_rolled_back_and_the_session_goes_on(
    profile: str,
) -> None:
    async with Emulator(emulator_config(profile, refuse_unknown_voice=True)) as emu:
        transport = make_transport(emu, system_instruction="be chatty")
        rec = Recorder(transport)
        await transport.connect()
        transport.send_content([ContentTurn("user", "hello there")])
        await rec.wait_for("on_turn_complete")
        await transport.update_session(SessionUpdate(voice="Klingon"))
        await rec.wait_for("on_move")
        transport.send_content([ContentTurn("user", "still there")])
        await rec.wait_for("on_turn_complete", 2)
        assert not transport.pending_setup_change
        await transport.disconnect()
        await emu.wait_disconnected()

    (move,) = rec.moves
    assert (move.reason, move.outcome) == (MoveReason.CONFIG, MoveOutcome.RESUMED)
    (error,) = rec.of("on_error")
    assert isinstance(error[0].error, SetupRefusedError) and error[0].recoverable
    assert "previous one" in str(error[0].error)
    # On the service: the resume beside the open connection refused, then (the old one
    # closed) the resume with the new voice refused, then a fresh session with it refused
    # too; the session resumed with the voice it had, and answered on.
    session, refused_fresh = emu.ledger.sessions.values()
    assert [c.refused for c in session.connections] == [None, "open-session", "voice", None]
    _first, _beside, with_voice, resumed = session.connections
    assert with_voice.refused == "voice" and with_voice.setup is not None
    assert with_voice.setup.with_handle and with_voice.setup.voice == "Klingon"
    (fresh,) = refused_fresh.connections
    assert fresh.refused == "voice" and fresh.setup is not None and not fresh.setup.with_handle
    assert resumed.established and resumed.setup is not None and resumed.setup.with_handle
    assert resumed.setup.voice is None
    assert [t.outcome for t in session.turns.values()] == ["complete", "complete"]


def _moved(session: SessionRecord) -> tuple[ConnectionRecord, ConnectionRecord]:
    """The two connections of a session that moved once, after checking that the move
    resumed at a resumable point: from a handle the old connection issued with no answer
    running, after that answer's turnComplete, onto a connection set up with that handle."""
    old, new = established(session)
    assert new.setup is not None and new.setup.with_handle
    assert new.resumed_handle_index is not None
    handle = session.handles[new.resumed_handle_index]
    assert handle.connection == old.index and handle.snapshot.answer is None
    ends = [m.time for m in old.server_messages if m.kind == "turn_complete"]
    assert all(end <= handle.issued_at for end in ends)
    assert new.setup_at is not None and handle.issued_at <= new.setup_at
    return old, new


async def test_reconnect_moves_now_and_returns_the_outcome() -> None:
    async with Emulator(emulator_config("gemini")) as emu:
        transport = make_transport(emu)
        rec = await connected_and_answered(transport)
        await transport.reconnect(ReconnectState(resumption_handle="not-issued-by-this-session"))
        assert [(m.reason, m.outcome) for m in rec.moves] == [
            (MoveReason.REQUESTED, MoveOutcome.RESUMED)
        ]
        transport.clear_resumption()
        await transport.reconnect()
        await transport.disconnect()

    # Without a handle the request opens a fresh session.
    assert [(m.reason, m.outcome) for m in rec.moves][1] == (
        MoveReason.REQUESTED,
        MoveOutcome.REBUILT,
    )
    assert len(emu.ledger.sessions) == 2
    assert rec.count("on_close") == 1


async def test_an_expiring_credential_moves_the_session_to_a_new_one() -> None:
    async with Emulator(emulator_config("gemini")) as emu:
        issued: list[Credential] = []

        async def provide() -> Credential:
            # Long enough for the first answer and the handle after it (the service issues
            # none before), on a loaded machine: with no handle the move could only rebuild.
            credential = Credential(f"short-lived-{len(issued)}", time.time() + 1.0)
            issued.append(credential)
            return credential

        transport = GeminiLiveTransport(
            model=MODEL,
            http_options=emu.http_options(),
            credential_provider=provide,
            resumption=FAST,
        )
        rec = Recorder(transport)
        expired: list[int] = []
        transport.on_credential_expiry = lambda: expired.append(len(issued))
        await transport.connect()
        await answered_with_handle(transport, rec)  # before the credential expires
        await rec.wait_for("on_move")
        await transport.disconnect()

    assert expired[0] == 1
    (move,) = rec.moves[:1]
    assert (move.reason, move.outcome) == (MoveReason.REQUESTED, MoveOutcome.RESUMED)
    assert_closed_first(only_session(emu), move, refused=True)
    assert len(issued) >= 2  # the new connection dialled with a new credential
    assert rec.of("on_close") == [(1000, "closed by the client")]
