"""The 3.8 live model's setup changes and history in the session, through the transport: an
update the model takes goes to the live connection (no move, no input held); where it cannot
(an SDK without ``send_context_update``, a model that refuses it) the session moves."""

from __future__ import annotations

import pytest
from google.genai import live, types

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.testing.emulator import Emulator, user_audio
from realtime_resumption.transport import ContentTurn, ReplayItem, SessionUpdate

from .transport_helpers import (
    MODEL_38,
    Recorder,
    answered_with_handle,
    connected_and_answered,
    established,
    live38_config,
    make_transport,
    only_session,
    sends_context_updates,
)

TOOL = types.FunctionDeclaration(name="lookup", description="Looks things up.")


async def _answered_once_told_updates_go_in_session(
    emu: Emulator,
) -> tuple[GeminiLiveTransport, Recorder]:
    """A 3.8 transport told its model takes setup changes in the session (``be kind`` at
    first), connected, after its first answer."""
    transport = make_transport(
        emu, model=MODEL_38, system_instruction="be kind", in_session_updates=True
    )
    return transport, await connected_and_answered(transport)


@sends_context_updates
async def test_an_instructions_update_the_model_takes_opens_no_connection() -> None:
    # Vertex AI: gemini-3.8-live takes the change in the session, by its documented traits.
    async with Emulator(live38_config("vertex", answer_chunks=4)) as emu:
        transport = make_transport(emu, model=MODEL_38, system_instruction="be kind")
        rec = await connected_and_answered(transport)
        await transport.update_session(SessionUpdate(instructions="be terse", tools=[TOOL]))
        assert not transport.pending_setup_change
        for seq in range(1, 11):
            transport.send_audio(user_audio(seq, speech=True))
        assert not transport.moving  # the input flows on: nothing is held for a setup
        transport.send_content([ContentTurn("user", "lookup the weather")])
        await rec.wait_for("on_tool_call")
        diagnostics = transport.get_diagnostics()
        await transport.disconnect()

    session = only_session(emu)
    assert len(session.connections) == 1
    assert [
        (u.connection, u.system_instruction, u.functions, u.outcome)
        for u in session.context_updates
    ] == [(0, "be terse", ("lookup",), "applied")]
    assert session.state is not None and session.state.system_instruction == "be terse"
    assert rec.moves == [] and rec.count("on_move_started") == 0
    # Nothing was written twice.
    assert diagnostics.input is not None and diagnostics.input.replayed == 0
    assert diagnostics.total_sends["context_update"].sent == 1
    assert emu.ledger.summary().sessions[session.session_id].audio_lost == ()
    assert rec.of("on_cache_bust") == [("instructions_changed",), ("tools_changed",)]


@sends_context_updates
async def test_a_later_connection_is_set_up_with_the_update_and_is_not_sent_it_again() -> None:
    async with Emulator(live38_config(answer_chunks=4, in_session_updates=True)) as emu:
        transport, rec = await _answered_once_told_updates_go_in_session(emu)
        await transport.update_session(SessionUpdate(instructions="be terse"))
        await answered_with_handle(transport, rec, "and now")
        emu.faults.go_away(20.0)
        await rec.wait_for("on_move")
        await answered_with_handle(transport, rec, "and then")
        await transport.disconnect()

    session = only_session(emu)
    first, second = established(session)
    assert second.setup is not None and second.setup.system_instruction == "be terse"
    kinds = [[m.kind for m in c.client_messages] for c in (first, second)]
    assert kinds[0].count("context_update") == 1
    assert "context_update" not in kinds[1]
    assert [u.outcome for u in session.context_updates] == ["applied"]


async def test_without_send_context_update_in_the_sdk_the_update_moves_the_session(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # google-genai 2.30 has no send_context_update: without it here, as there.
    monkeypatch.delattr(live.AsyncSession, "send_context_update", raising=False)
    async with Emulator(live38_config(answer_chunks=4, in_session_updates=True)) as emu:
        transport, rec = await _answered_once_told_updates_go_in_session(emu)
        await transport.update_session(SessionUpdate(instructions="be terse"))
        assert transport.pending_setup_change
        await answered_with_handle(transport, rec, "and now")
        await rec.wait_for("on_move")
        await transport.disconnect()

    session = only_session(emu)
    assert session.context_updates == []
    last = established(session)[-1]
    assert last.setup is not None and last.setup.system_instruction == "be terse"
    (move,) = rec.moves
    assert move.reason.value == "config"


@sends_context_updates
async def test_a_model_that_refuses_the_update_gets_it_through_a_move() -> None:
    # The transport is told the model takes it; the service refuses (1007), as a model or
    # endpoint that does not would.
    async with Emulator(live38_config(answer_chunks=4, in_session_updates=False)) as emu:
        transport, rec = await _answered_once_told_updates_go_in_session(emu)
        await transport.update_session(SessionUpdate(instructions="be terse"))
        await rec.wait_for("on_move")
        await answered_with_handle(transport, rec, "and now")
        # Refused once: the next change goes by a move straight away.
        await transport.update_session(SessionUpdate(instructions="be brief"))
        assert transport.pending_setup_change
        await answered_with_handle(transport, rec, "and then")
        await rec.wait_for("on_move", 2)
        await transport.disconnect()

    session = only_session(emu)
    assert [(u.system_instruction, u.outcome) for u in session.context_updates] == [
        ("be terse", "refused")
    ]
    setups = [c.setup.system_instruction for c in established(session) if c.setup]
    assert setups == ["be kind", "be terse", "be brief"]
    summary = emu.ledger.summary().sessions[session.session_id]
    assert summary.answers_cut == ()
    assert [t.user_text for t in session.turns.values()] == ["hello there", "and now", "and then"]


async def test_history_with_roles_goes_mid_session_where_the_model_takes_it() -> None:
    async with Emulator(live38_config(answer_chunks=2)) as emu:
        transport = make_transport(emu, model=MODEL_38, initial_history_in_client_content=True)
        rec = Recorder(transport)
        await transport.connect()
        transport.send_audio(user_audio(1, speech=False))
        transport.replay_history(
            [ReplayItem("user", text="my name is Ada"), ReplayItem("model", text="hi Ada")]
        )
        await answered_with_handle(transport, rec, "what is my name")
        await transport.disconnect()

    session = only_session(emu)
    (conn,) = session.connections
    seeded = [m.turns for m in conn.client_messages if m.kind == "client_content"]
    assert seeded[0] == (("user", "my name is Ada"), ("model", "hi Ada"))
    assert conn.close_code != 1007
    assert rec.moves == []
