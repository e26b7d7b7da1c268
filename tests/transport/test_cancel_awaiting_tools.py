"""``cancel_response`` while the answer waits for its tool results: the answer ends as
cancelled at once, and if the result is sent anyway, the model's answer to it is the cancelled
answer's continuation, suppressed: neither a new generation nor played. The next question is
answered as usual. Over the real SDK, against the emulator, in both profiles; the emulator keeps
the turn open while a call waits, so the provider's ``turnComplete`` after the ``toolCall`` (the
answer then spans two provider turns) is sent as a raw frame."""

from __future__ import annotations

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.testing.emulator import Emulator, answer_chunk_id
from realtime_resumption.transport import ContentTurn, GenerationEndReason, ToolCall, ToolResult

from .transport_helpers import Recorder, emulator_config, make_transport

TURN_COMPLETE = '{"serverContent": {"turnComplete": true}}'


async def _awaiting_its_tool_result(emu: Emulator) -> tuple[GeminiLiveTransport, Recorder]:
    """A transport whose answer called ``lookup`` and, its provider turn complete, now waits
    for the result."""
    transport = make_transport(emu, tools=[{"name": "lookup"}])
    rec = Recorder(transport)
    await transport.connect()
    transport.send_content([ContentTurn("user", "please lookup flights")])
    await rec.wait_for("on_tool_call")
    await emu.faults.send_raw(TURN_COMPLETE)
    await rec.wait_for("on_turn_complete")
    return transport, rec


async def test_the_answer_to_a_result_sent_after_cancel_is_suppressed(profile: str) -> None:
    async with Emulator(emulator_config(profile)) as emu:
        transport, rec = await _awaiting_its_tool_result(emu)
        ((calls,),) = rec.of("on_tool_call")
        (call,) = calls
        assert isinstance(call, ToolCall)

        await transport.cancel_response()
        await rec.wait_for("on_generation_end")
        heard = rec.count("on_audio_output")
        # The tool ran anyway (a framework sends what its handler returned).
        transport.send_tool_result(ToolResult(call.id, call.name, {"flights": 3}))
        await rec.wait_for("on_turn_complete", 2)  # the model answered the result
        continuation = rec.count("on_audio_output") - heard

        transport.send_content([ContentTurn("user", "hello there")])
        await rec.wait(
            lambda r: (
                r.count("on_turn_complete") >= 3
                and r.count("on_generation_end") == r.count("on_generation_start")
            )
        )
        await transport.disconnect()

    rec.assert_paired()
    assert rec.of("on_generation_end")[0][1] is GenerationEndReason.CANCELLED
    assert rec.count("on_generation_start") == 2, "the continuation opened a generation"
    assert continuation == 0, "the continuation was played"
    # The next question's answer is whole (the emulator's turn 1; turn 0 was the cancelled one).
    played = [answer_chunk_id(args[0]) for args in rec.of("on_audio_output")[heard:]]
    assert played == [(1, k) for k in range(emu.config.answer_chunks)]
    assert rec.ends()[1] is GenerationEndReason.GENERATION_COMPLETE


async def test_a_user_turn_after_cancel_is_answered_and_played(profile: str) -> None:
    """The suppression waits only for the cancelled answer's continuation: a user who speaks
    (here, a text turn) before any result is sent gets an answer, delivered as usual."""
    async with Emulator(emulator_config(profile)) as emu:
        transport, rec = await _awaiting_its_tool_result(emu)
        await transport.cancel_response()
        await rec.wait_for("on_generation_end")
        heard = rec.count("on_audio_output")

        transport.send_content([ContentTurn("user", "hello there")])
        await rec.wait_for("on_generation_end", 2)
        await transport.disconnect()

    rec.assert_paired()
    assert rec.ends() == [GenerationEndReason.CANCELLED, GenerationEndReason.GENERATION_COMPLETE]
    played = [answer_chunk_id(args[0]) for args in rec.of("on_audio_output")[heard:]]
    assert played == [(1, k) for k in range(emu.config.answer_chunks)]
