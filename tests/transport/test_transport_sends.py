"""What the transport sends, as the emulator's ledger saw it."""

from __future__ import annotations

import pytest

from realtime_resumption.testing.emulator import Emulator, user_audio
from realtime_resumption.testing.emulator.ledger import ConnectionRecord
from realtime_resumption.transport import (
    ContentTurn,
    GenerationOverrides,
    RetainedUserTurn,
    SessionUpdate,
    ToolResult,
    TransportError,
    UnknownToolCallError,
)

from .transport_helpers import Recorder, make_transport

HELLO = [ContentTurn("user", "hello there")]


def _connection(emu: Emulator, index: int = 0) -> ConnectionRecord:
    (session,) = emu.ledger.sessions.values()
    return session.connections[index]


async def test_diagnostics_count_what_was_sent(emu: Emulator) -> None:
    transport = make_transport(emu)
    rec = Recorder(transport)
    await transport.connect()
    for seq in range(1, 6):
        transport.send_audio(user_audio(seq, speech=False))
    transport.commit_audio()
    transport.send_file(b"\xff\xd8jpeg", "image/jpeg")
    assert transport.send_live_text(HELLO)
    await rec.wait_for("on_turn_complete")
    diagnostics = transport.get_diagnostics()
    await transport.disconnect()

    sends = diagnostics.sends
    assert (sends["audio"].attempted, sends["audio"].sent) == (5, 5)
    assert sends["audio"].bytes == 5 * len(user_audio(1, speech=False))
    assert (sends["audio_stream_end"].sent, sends["video"].sent, sends["text"].sent) == (1, 1, 1)
    assert sends["text"].bytes == len(b"hello there")
    assert all(c.refused == 0 and c.failed == 0 for c in sends.values())
    assert diagnostics.total_sends == sends
    assert (diagnostics.transport_generation, diagnostics.dial_gen) == (1, 1)
    messages = _connection(emu).client_messages
    assert [m.index for m in messages] == list(range(9))
    kinds = [m.kind for m in messages[1:]]
    assert kinds == ["audio"] * 5 + ["audio_stream_end", "video", "text"]


async def test_counters_of_the_current_connection_restart_with_a_new_one(emu: Emulator) -> None:
    transport = make_transport(emu)
    await transport.connect()
    transport.send_audio(user_audio(1, speech=False))
    await transport.reconnect()
    transport.send_audio(user_audio(2, speech=False))
    await transport.disconnect()
    diagnostics = transport.get_diagnostics()
    assert diagnostics.sends["audio"].attempted == 1
    assert diagnostics.total_sends["audio"].attempted == 2
    # The first chunk is written again to the new connection: the session it resumed (from
    # a handle that came before the chunk) lacks it.
    assert diagnostics.total_sends["audio"].sent == 3


async def test_a_tool_result_for_a_call_never_issued_is_refused(emu: Emulator) -> None:
    transport = make_transport(emu, tools=[{"name": "lookup"}])
    await transport.connect()
    with pytest.raises(UnknownToolCallError, match="no tool call"):
        transport.send_tool_result(ToolResult("fc-made-up", "lookup", {"x": 1}))
    await transport.disconnect()
    assert [m.kind for m in _connection(emu).client_messages] == ["setup"]
    sends = transport.get_diagnostics().total_sends["tool_response"]
    assert (sends.attempted, sends.refused, sends.sent) == (1, 1, 0)


async def test_tool_calls_are_answered_on_the_wire_with_their_id(emu: Emulator) -> None:
    transport = make_transport(emu, tools=[{"name": "lookup", "description": "Looks up."}])
    rec = Recorder(transport)
    await transport.connect()
    transport.send_content([ContentTurn("user", "lookup please")])
    await rec.wait_for("on_tool_call")
    ((calls,),) = rec.of("on_tool_call")
    (call,) = calls
    assert call.name == "lookup"
    transport.send_tool_result(ToolResult(call.id, call.name, {"answer": 42}, "when_idle"))
    await rec.wait_for("on_turn_complete")
    await transport.disconnect()
    tool_messages = [m for m in _connection(emu).client_messages if m.kind == "tool_response"]
    assert [m.tool_response_ids for m in tool_messages] == [(call.id,)]


def test_send_audio_refuses_other_formats() -> None:
    from realtime_resumption.gemini import GeminiLiveTransport

    transport = GeminiLiveTransport(api_key="k")
    with pytest.raises(ValueError, match="16 kHz mono"):
        transport.send_audio(b"\0\0" * 10, sample_rate=48_000)
    with pytest.raises(ValueError, match="16 kHz mono"):
        transport.send_audio(b"\0\0" * 10, channels=2)
    with pytest.raises(ValueError, match="even number"):
        transport.send_audio(b"\0\0\0")
    transport.send_audio(b"")  # an empty chunk sends nothing, even unconnected
    with pytest.raises(ValueError, match="send_inline_file"):
        transport.send_file(b"%PDF", "application/pdf")
    with pytest.raises(ValueError, match="content-less"):
        transport.send_content([])


async def test_inline_files_and_live_text_reach_the_session(emu: Emulator) -> None:
    transport = make_transport(emu)
    rec = Recorder(transport)
    await transport.connect()
    transport.send_inline_file(b"%PDF-1.7", "application/pdf")
    assert transport.send_live_text([ContentTurn("user", "a"), ContentTurn("model", "b")])
    assert not transport.send_live_text([ContentTurn("user", "")])
    await rec.wait_for("on_turn_complete")
    await transport.disconnect()
    messages = _connection(emu).client_messages
    assert [m.kind for m in messages] == ["setup", "client_content", "text"]
    assert messages[2].text == "user: a\nmodel: b"


async def test_replay_user_turn_sends_inline_audio_with_turn_complete(emu: Emulator) -> None:
    transport = make_transport(emu)
    rec = Recorder(transport)
    assert not transport.replay_user_turn(RetainedUserTurn(user_audio(1), 16_000, 1, 0.0))
    await transport.connect()
    assert not transport.replay_user_turn(RetainedUserTurn(b"", 16_000, 1, 0.0))
    assert transport.replay_user_turn(RetainedUserTurn(user_audio(1), 16_000, 1, 0.0))
    await rec.wait_for("on_generation_end")
    await transport.disconnect()
    assert [m.kind for m in _connection(emu).client_messages] == ["setup", "client_content"]


async def test_trigger_generation_with_instructions_elicits_an_answer(emu: Emulator) -> None:
    transport = make_transport(emu)
    rec = Recorder(transport)
    await transport.connect()
    transport.trigger_generation()  # nothing to send: Gemini rejects content-less requests
    transport.trigger_generation("greet the user")
    await rec.wait_for("on_generation_end")
    await transport.disconnect()
    messages = _connection(emu).client_messages
    assert [(m.kind, m.text) for m in messages[1:]] == [("client_content", "greet the user")]


async def test_trigger_generation_refuses_overrides_gemini_cannot_honour(emu: Emulator) -> None:
    # Gemini Live takes no per-response settings (its thinking is the session's): a reasoning
    # effort is refused, naming it, and nothing is sent; overrides that set nothing are taken.
    transport = make_transport(emu)
    rec = Recorder(transport)
    await transport.connect()
    assert not transport.capabilities.reasoning_effort
    with pytest.raises(ValueError, match=r"reasoning_effort='high'.*per-response"):
        transport.trigger_generation("greet the user", GenerationOverrides(reasoning_effort="high"))
    with pytest.raises(TypeError, match="GenerationOverrides"):
        transport.trigger_generation("greet the user", {"reasoning_effort": "low"})  # type: ignore[arg-type]
    transport.trigger_generation("greet the user", GenerationOverrides())
    await rec.wait_for("on_generation_end")
    await transport.disconnect()
    messages = _connection(emu).client_messages
    assert [(m.kind, m.text) for m in messages[1:]] == [("client_content", "greet the user")]


async def test_update_session_before_connect_shapes_the_setup(emu: Emulator) -> None:
    transport = make_transport(emu, system_instruction="be brief")
    rec = Recorder(transport)
    await transport.update_session(SessionUpdate(instructions="be kind"))
    await transport.update_session(SessionUpdate(voice="Puck"))
    await transport.connect()
    assert not transport.pending_setup_change
    (session,) = emu.ledger.sessions.values()
    assert session.state is not None and session.state.system_instruction == "be kind"

    assert rec.count("on_cache_bust") == 0  # nothing cached before the first connection
    await transport.update_session(SessionUpdate(instructions="be kind", tools=[]))
    assert not transport.pending_setup_change  # nothing changed
    assert rec.count("on_cache_bust") == 0
    await transport.update_session(SessionUpdate(instructions="be terse", tools=[{"name": "f"}]))
    assert transport.pending_setup_change
    assert rec.of("on_cache_bust") == [("instructions_changed",), ("tools_changed",)]
    # The next connection carries it.
    await transport.reconnect()
    assert not transport.pending_setup_change
    await transport.disconnect()


async def test_history_after_realtime_input_is_refused_for_gemini_3(emu: Emulator) -> None:
    from realtime_resumption.transport import ReplayItem

    transport = make_transport(emu, initial_history_in_client_content=True)
    await transport.connect()
    transport.replay_history([ReplayItem("user", text="earlier")])
    transport.send_audio(user_audio(1, speech=False))
    with pytest.raises(TransportError, match="before the connection's first realtime input"):
        transport.replay_history([ReplayItem("user", text="too late")])
    await transport.disconnect()
