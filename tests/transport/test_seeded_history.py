"""A rebuilt session is seeded with the conversation, tool calls and results as text (native
functionCall/functionResponse parts in seeded history get the connection closed with 1007)."""

from __future__ import annotations

from realtime_resumption.move_reports import MoveOutcome
from realtime_resumption.testing.emulator import Emulator
from realtime_resumption.transport import ContentTurn, ToolResult

from .transport_helpers import Recorder, make_transport


async def test_a_rebuilt_session_gets_tool_traffic_as_text(emu: Emulator) -> None:
    transport = make_transport(emu, tools=[{"name": "lookup"}])
    rec = Recorder(transport)
    await transport.connect()
    transport.send_content([ContentTurn("user", "please lookup flights")])
    await rec.wait_for("on_tool_call")
    ((calls,),) = rec.of("on_tool_call")
    (call,) = calls
    transport.send_tool_result(ToolResult(call.id, call.name, {"flights": 2}))
    await rec.wait_for("on_turn_complete")
    await rec.wait(lambda r: r.of("on_resumption_update")[-1][1])
    emu.faults.expire_handles()
    emu.faults.drop()
    await rec.wait_for("on_move")
    await transport.disconnect()
    assert [m.outcome for m in rec.moves] == [MoveOutcome.REBUILT]
    fresh = list(emu.ledger.sessions.values())[-1]
    (seeded,) = [m for m in fresh.connections[0].client_messages if m.kind == "client_content"]
    assert not seeded.turn_complete
    texts = [text for _, text in seeded.turns]
    assert texts[0] == "please lookup flights"
    assert f"[called lookup (call {call.id}) with {{}}]" in texts
    assert f'[lookup (call {call.id}) returned {{"flights": 2}}]' in texts
