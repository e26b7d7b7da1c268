"""A hostile caller and a hostile server, against the real SDK and the emulator (a cancelled
disconnect: ``test_disconnect_cancelled.py``): an oversized message is refused at the call or
dropped from the replay, tool results are checked at the call, a call without an id blocks
nothing, odd model audio stays whole samples, a close reason never shows a secret; and an answer
ends at turnComplete unless a tool call may still finish it."""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
import logging
from typing import Any

import pytest

from realtime_resumption.gemini import GeminiLiveTransport, messages
from realtime_resumption.generation import TOOL_CALL_GRACE
from realtime_resumption.move_reports import MoveOutcome
from realtime_resumption.testing.emulator import Emulator
from realtime_resumption.transport import (
    ContentTurn,
    GenerationEndReason,
    MessageTooLargeError,
    ToolCall,
    ToolResult,
)

from .transport_helpers import (
    MODEL,
    TIME_SCALE,
    Recorder,
    ScriptedServer,
    connected_and_answered,
    emulator_config,
    make_transport,
)

HELLO = [ContentTurn("user", "hello there")]


# --- tool results checked at the call ---------------------------------------------------------


async def _asked_lookup(emu: Emulator, **options: Any) -> tuple[GeminiLiveTransport, Recorder]:
    transport = make_transport(emu, tools=[{"name": "lookup"}], **options)
    rec = Recorder(transport)
    await transport.connect()
    transport.send_content([ContentTurn("user", "please lookup flights")])
    await rec.wait_for("on_tool_call")
    return transport, rec


def _call(rec: Recorder) -> ToolCall:
    ((calls,),) = rec.of("on_tool_call")
    (call,) = calls
    assert isinstance(call, ToolCall)
    return call


async def test_a_result_json_cannot_carry_is_refused_at_the_call_and_a_retry_is_sent() -> None:
    async with Emulator(emulator_config()) as emu:
        transport, rec = await _asked_lookup(emu)
        call = _call(rec)
        for bad in ({"flights": {1, 2}}, {"flights": object()}, {"ratio": float("nan")}):
            with pytest.raises(TypeError, match="JSON"):
                transport.send_tool_result(ToolResult(call.id, call.name, bad))
        assert transport.pending_tool_calls == (call.id,)
        # What the SDK carries besides JSON goes as the SDK sends it.
        when = datetime.datetime(2026, 1, 2, 3, 4, 5)
        transport.send_tool_result(ToolResult(call.id, call.name, {"at": when, "raw": b"\xff"}))
        await rec.wait_for("on_generation_end")
        await transport.disconnect()
    assert rec.ends() == [GenerationEndReason.GENERATION_COMPLETE]
    assert rec.count("on_error") == 0
    (session,) = emu.ledger.summary().sessions.values()
    assert session.stranded_tool_responses == ()


# --- oversized messages -----------------------------------------------------------------------

MESSAGE_BOUND = 15 * 2**20
"""The README's bound on a client message on the wire (Limits): the service closed with 1009 on
17-20 MB. The README's figure, not ``messages.MAX_MESSAGE_BYTES``: a bound raised past what the
service takes must fail here."""
_TOO_BIG = MESSAGE_BOUND + 1


async def test_a_message_larger_than_the_service_takes_is_refused_at_the_call() -> None:
    async with Emulator(emulator_config()) as emu:
        transport, rec = await _asked_lookup(emu)
        call = _call(rec)
        with pytest.raises(MessageTooLargeError):
            transport.send_tool_result(ToolResult(call.id, call.name, {"text": "x" * _TOO_BIG}))
        with pytest.raises(ValueError, match="MiB"):
            transport.send_content([ContentTurn("user", "x" * _TOO_BIG)])
        # Escaped on the wire: a control character takes six bytes there.
        with pytest.raises(ValueError, match="MiB"):
            transport.send_content([ContentTurn("user", "\x01" * (_TOO_BIG // 6 + 1))])
        with pytest.raises(ValueError, match="MiB"):
            transport.send_file(b"\0" * (_TOO_BIG * 3 // 4 + 3), "image/jpeg")
        assert not transport.send_live_text([ContentTurn("user", "x" * _TOO_BIG)])
        # The call is still open: a result that fits is sent.
        transport.send_tool_result(ToolResult(call.id, call.name, {"flights": 2}))
        await rec.wait_for("on_generation_end")
        await transport.disconnect()
    assert rec.ends() == [GenerationEndReason.GENERATION_COMPLETE]
    assert transport.get_diagnostics().total_sends["content"].refused == 2


@pytest.fixture
def no_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """Messages go out whatever their size, as if the bound were above the service's: the
    emulator refuses frames over 16 MiB (close 1009), as websockets does."""
    monkeypatch.setattr(messages, "MAX_MESSAGE_BYTES", 64 * 2**20)


_REFUSED = 17 * 2**20


@pytest.mark.usefixtures("no_bound")
async def test_a_message_the_service_refuses_as_too_big_is_dropped_not_replayed() -> None:
    async with Emulator(emulator_config()) as emu:
        transport = make_transport(emu)
        rec = await connected_and_answered(transport)
        transport.send_content([ContentTurn("user", "x" * _REFUSED)], turn_complete=False)
        await rec.wait_for("on_error")
        await rec.wait(lambda r: len(r.moves) == 1)
        transport.send_content(HELLO)
        await rec.wait_for("on_generation_end", 2)
        assert transport.is_connected
        await transport.disconnect()
    ((event,),) = rec.of("on_error")
    assert isinstance(event.error, MessageTooLargeError) and event.recoverable
    assert "1009" in str(event.error)
    assert [m.outcome for m in rec.moves] == [MoveOutcome.RESUMED]
    assert rec.ends() == [GenerationEndReason.GENERATION_COMPLETE] * 2
    (session,) = emu.ledger.summary().sessions.values()
    assert session.connections == 2
    # Never replayed: the resumed connection got the second turn, not the refused message.
    (state,) = (s.state for s in emu.ledger.sessions.values())
    assert state is not None and all("x" * 100 not in t.user_text for t in state.history)


@pytest.mark.usefixtures("no_bound")
async def test_a_tool_result_refused_as_too_big_ends_its_answer_and_the_call_goes_on(
    profile: str,
) -> None:
    async with Emulator(emulator_config(profile)) as emu:
        transport = make_transport(emu, tools=[{"name": "lookup"}])
        rec = await connected_and_answered(transport)
        transport.send_content([ContentTurn("user", "please lookup flights")])
        await rec.wait_for("on_tool_call")
        call = _call(rec)
        transport.send_tool_result(ToolResult(call.id, call.name, {"text": "x" * _REFUSED}))
        await rec.wait_for("on_error")
        await rec.wait(lambda r: len(r.moves) == 1)
        # The close cut the answer: a resumed session does not continue it, so its call is
        # orphaned (the framework is told) and the model may ask again.
        assert rec.ends()[1:] == [GenerationEndReason.TOOL_CALL_ORPHANED]
        assert rec.of("on_tool_call_cancel") == [([call.id],)]
        transport.send_content(HELLO)
        await rec.wait_for("on_generation_end", 3)
        await transport.disconnect()
    ((event,),) = rec.of("on_error")
    assert isinstance(event.error, MessageTooLargeError) and event.recoverable
    assert rec.ends()[2] == GenerationEndReason.GENERATION_COMPLETE
    assert [m.outcome for m in rec.moves] == [MoveOutcome.RESUMED]
    (session,) = emu.ledger.summary().sessions.values()
    assert session.connections == 2


# --- a tool call without an id ----------------------------------------------------------------

_NO_ID_CALL = json.dumps({"toolCall": {"functionCalls": [{"name": "lookup", "args": {}}]}})


async def test_a_call_without_an_id_on_the_gemini_api_blocks_neither_turns_nor_moves() -> None:
    async with Emulator(emulator_config()) as emu:
        transport = make_transport(emu, tools=[{"name": "lookup"}])
        rec = Recorder(transport)
        await transport.connect()
        await emu.faults.send_raw(_NO_ID_CALL)
        await rec.wait_for("on_error")
        assert transport.pending_tool_calls == ()
        transport.send_content(HELLO)
        await rec.wait_for("on_generation_end")
        # A goAway moves the session at the next resumable point, not at its deadline.
        started = asyncio.get_running_loop().time()
        await emu.faults.go_away(60.0, close_at_deadline=False)
        await rec.wait(lambda r: len(r.moves) == 1)
        waited = asyncio.get_running_loop().time() - started
        await transport.disconnect()
    assert rec.count("on_tool_call") == 0
    ((event,),) = rec.of("on_error")
    assert event.recoverable and "without an id" in str(event.error)
    assert "lookup" in str(event.error)
    assert rec.ends() == [GenerationEndReason.GENERATION_COMPLETE]
    assert [m.outcome for m in rec.moves] == [MoveOutcome.RESUMED]
    assert waited < 60.0 * TIME_SCALE / 2


# --- odd model audio --------------------------------------------------------------------------


def _audio_frame(data: bytes) -> str:
    part = {"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": base64.b64encode(data)}}
    return json.dumps(
        {"serverContent": {"modelTurn": {"parts": [part]}}},
        default=lambda raw: raw.decode("ascii"),
    )


async def test_model_audio_reaches_the_framework_as_whole_samples() -> None:
    async with Emulator(emulator_config()) as emu:
        transport = make_transport(emu)
        rec = Recorder(transport)
        await transport.connect()
        # A sample split between chunks, then a lone byte the turn leaves without its half.
        for chunk in (b"\1\2\3", b"\4\5\6", b"\7\x08", b"\x09"):
            await emu.faults.send_raw(_audio_frame(chunk))
        await emu.faults.send_raw(json.dumps({"serverContent": {"turnComplete": True}}))
        await rec.wait_for("on_turn_complete")
        # The next turn starts on a sample boundary again.
        await emu.faults.send_raw(_audio_frame(b"\x0a\x0b\x0c"))
        await emu.faults.send_raw(json.dumps({"serverContent": {"turnComplete": True}}))
        await rec.wait_for("on_turn_complete", 2)
        await transport.disconnect()
    delivered = [pcm for (pcm,) in rec.of("on_audio_output")]
    assert delivered == [b"\1\2", b"\3\4\5\6", b"\7\x08", b"\x0a\x0b"]
    assert rec.count("on_first_audio_chunk") == 2


# --- secrets in websockets' own DEBUG lines ---------------------------------------------------


async def test_websockets_debug_lines_never_show_a_handle_or_key(
    caplog: pytest.LogCaptureFixture,
) -> None:
    key = "AIzaSy-not-a-real-key-0123456789"
    caplog.set_level(logging.DEBUG, logger="websockets.client")
    async with Emulator(emulator_config()) as emu:
        transport = GeminiLiveTransport(api_key=key, http_options=emu.http_options(), model=MODEL)
        rec = await connected_and_answered(transport)
        handle = transport.resumption_handle
        assert handle is not None
        # A server that echoes what it was given in its close reason.
        await emu.faults.close(1008, f"bad {handle} for {key}")
        await rec.wait(lambda r: len(r.moves) == 1)
        await transport.disconnect()
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("websockets")]
    for line in lines:
        # A redacted value shows its first four characters, nothing after them.
        for value in (handle, key):
            assert value[4:12] not in line and value[-8:] not in line, line
    assert any(line.startswith("< CLOSE 1008 (policy violation) bad ") for line in lines)
    assert any("withheld: it holds a resumption handle" in line for line in lines)


# --- the answer's end -------------------------------------------------------------------------


async def _answer_end_delays(emu: Emulator, **options: Any) -> tuple[float, float]:
    """Seconds from the answer's last audio to ``on_turn_complete`` and to
    ``on_generation_end``, on the event loop's clock."""
    transport = make_transport(emu, tool_call_grace=TOOL_CALL_GRACE, **options)
    rec = Recorder(transport)
    clock = asyncio.get_running_loop().time
    at: dict[str, float] = {}
    for name in ("on_audio_output", "on_turn_complete", "on_generation_end"):
        recorded = getattr(transport, name)

        def timed(*args: Any, name: str = name, recorded: Any = recorded) -> None:
            at[name] = clock()
            recorded(*args)

        setattr(transport, name, timed)
    await transport.connect()
    transport.send_content(HELLO)
    await rec.wait_for("on_generation_end")
    await transport.disconnect()
    rec.assert_paired()
    last_audio = at["on_audio_output"]
    return at["on_turn_complete"] - last_audio, at["on_generation_end"] - last_audio


async def test_an_answer_ends_at_turn_complete_when_no_tool_call_can_follow() -> None:
    async with Emulator(emulator_config()) as emu:
        turn_complete, end = await _answer_end_delays(emu)
        # With a function declared, a tool call may still finish the answer: the generation
        # waits the grace window, the turn's end is reported at once.
        tools_turn_complete, tools_end = await _answer_end_delays(emu, tools=[{"name": "lookup"}])
    # Both come from the one turnComplete message, a few microseconds apart.
    assert abs(end - turn_complete) < 0.01
    assert turn_complete < TOOL_CALL_GRACE / 3
    assert tools_turn_complete < TOOL_CALL_GRACE / 3
    assert tools_end >= tools_turn_complete + TOOL_CALL_GRACE


async def test_a_tool_call_after_a_new_question_is_not_the_old_answers(
    scripted: ScriptedServer,
) -> None:
    transport = GeminiLiveTransport(
        api_key="k",
        model=MODEL,
        http_options=scripted.http_options(),
        tools=[{"name": "lookup"}],
    )
    rec = Recorder(transport)
    await transport.connect()
    audio = _audio_frame(b"\1\2")
    await scripted.send_raw(audio)
    await scripted.send({"serverContent": {"turnComplete": True}})
    await rec.wait_for("on_turn_complete")
    # The user asks again within the grace window: the first answer is over at once.
    transport.send_content([ContentTurn("user", "please lookup flights")])
    assert rec.of("on_generation_end") == [("gen_1", GenerationEndReason.GENERATION_COMPLETE)]
    await scripted.send({"toolCall": {"functionCalls": [{"id": "fc-1", "name": "lookup"}]}})
    await rec.wait_for("on_tool_call")
    await transport.disconnect()
    assert [args[0] for args in rec.of("on_generation_start")] == ["gen_1", "gen_2"]
    rec.assert_paired()
