"""``OpenAIRealtimeTransport`` on one session: the ``openai`` SDK's realtime client over real
WebSockets (TLS) to the bundled emulator, whose ledger says what the service received. On loop
time (looptime, the emulator in the same loop): every wait is bounded on that clock."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from realtime_resumption.generation import TOOL_CALL_GRACE
from realtime_resumption.openai import (
    FunctionTool,
    InputTranscription,
    OpenAIRealtimeOptions,
    OpenAIRealtimeTransport,
    SessionConfig,
)
from realtime_resumption.testing.openai_emulator import OpenAIEmulator, answer_chunk_ids
from realtime_resumption.transport import (
    CancelResponseOptions,
    ConnectError,
    ContentTurn,
    GenerationEndReason,
    MessageTooLargeError,
    NotConnectedError,
    SessionUpdate,
    SetupOk,
    ToolResult,
    TransportError,
    UnknownToolCallError,
)
from tests.openai.transport_helpers import Recorder, transport
from tests.openai_emulator.oai_helpers import TIMEOUT, config, speech

pytestmark = pytest.mark.looptime

WEATHER = FunctionTool(
    "weather",
    description="The weather where the caller is.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
HEARD = SessionConfig(instructions="Answer briefly.", transcription=InputTranscription("whisper-1"))


def say(t: OpenAIRealtimeTransport, chunks: list[bytes]) -> None:
    for chunk in chunks:
        t.send_audio(chunk)


async def test_a_spoken_question_is_answered_with_audio_transcripts_and_one_paired_generation() -> (
    None
):
    async with OpenAIEmulator(config(answer_chunks=4)) as emu:
        t = transport(emu, HEARD)
        rec = Recorder(t)
        await t.connect()
        assert t.is_connected
        say(t, speech(0, 6, ["pineapple", "here"]))
        await rec.ended(1)
        await rec.until(lambda r: bool(r.named("on_input_transcription")))
        await t.disconnect()

    starts = [a[0] for a in rec.named("on_generation_start")]
    assert len(starts) == 1 and rec.ends == [(starts[0], GenerationEndReason.GENERATION_COMPLETE)]
    # The model-turn start carries the generation id; first audio fires once.
    assert rec.named("on_model_turn_start") == [(starts[0],)]
    assert len(rec.named("on_first_audio_chunk")) == 1
    # Every audio chunk of the answer reached the framework, in order.
    assert answer_chunk_ids(bytes(rec.audio)) == [(1, k) for k in range(4)]
    assert "heard pineapple here" in rec.transcript
    assert rec.named("on_input_transcription") == [("pineapple here",)]
    assert rec.named("on_speech_started") and rec.named("on_user_speech_stopped")
    assert len(rec.named("on_turn_complete")) == 1
    assert rec.named("on_realtime_llm_usage")
    assert rec.named("on_session_ready")[0][0] == emu.ledger.sessions[0].id
    lifecycle = [a[0] for a in rec.named("on_connection_lifecycle")]
    assert [e.kind for e in lifecycle] == ["attempt", "setup-ok", "generation-close"]
    assert rec.named("on_close") == [(1000, "disconnect")]
    record = emu.ledger.sessions[0]
    assert record.closed_by == "client" and record.answers[0].outcome == "complete"


async def test_a_tool_call_and_its_result_are_one_generation_and_the_answer_uses_the_result() -> (
    None
):
    async with OpenAIEmulator(config(answer_chunks=3)) as emu:
        t = transport(emu, SessionConfig(tools=(WEATHER,)))
        rec = Recorder(t)
        await t.connect()
        say(t, speech(0, 5, ["weather", "please"]))
        await rec.until(lambda r: bool(r.tool_calls))
        (call,) = rec.tool_calls
        assert call.name == "weather"
        # Waiting for the result, the answer stays open, past the grace a late call gets (on
        # loop time).
        await asyncio.sleep(TOOL_CALL_GRACE * 2)
        assert rec.ends == []
        t.send_tool_result(ToolResult(call.id, call.name, {"sky": "sunny"}))
        await rec.ended(1)
        # The same call answered twice is refused, and nothing is sent.
        with pytest.raises(UnknownToolCallError):
            t.send_tool_result(ToolResult(call.id, call.name, {"sky": "rain"}))
        await t.disconnect()

    assert len(rec.named("on_generation_start")) == 1
    assert rec.ends[0][1] is GenerationEndReason.GENERATION_COMPLETE
    assert "sunny" in rec.transcript
    outputs = [i for i in emu.ledger.sessions[0].items if i.type == "function_call_output"]
    assert len(outputs) == 1 and "sunny" in outputs[0].text


async def test_cancel_response_with_truncate_cuts_the_answer_where_playback_stopped() -> None:
    async with OpenAIEmulator(config(answer_chunks=20, chunk_ms=100)) as emu:
        t = transport(emu)
        rec = Recorder(t)
        await t.connect()
        say(t, speech(0, 5, ["long", "story"]))
        await rec.until(lambda r: len(r.audio) >= 3 * 4800)
        await t.cancel_response(CancelResponseOptions(truncate=0.15, wait_for_done=True))
        delivered = len(rec.audio)
        await rec.ended(1)
        # Idempotent, and no callback of the framework's fires (it finalises the turn).
        before = len(rec.calls)
        await t.cancel_response(CancelResponseOptions(truncate="generated"))
        assert len(rec.calls) == before
        # A later question, answered whole: nothing of the cancelled answer reached the
        # framework after the cancel, before it or among it.
        say(t, speech(20, 5, ["next"]))
        await rec.ended(2)
        await t.disconnect()
    # The second cancel cut nothing more: a truncate past what the first left is refused.
    assert not rec.named("on_error")

    assert answer_chunk_ids(bytes(rec.audio[delivered:])) == [(2, k) for k in range(20)]
    assert rec.ends[0][1] is GenerationEndReason.CANCELLED
    assert rec.named("on_interrupted") == []
    answer = emu.ledger.sessions[0].answers[0]
    assert answer.outcome in ("cancelled", "truncated") and answer.heard_ms == 150


async def test_the_servers_vad_interrupting_an_answer_ends_it_as_interrupted() -> None:
    async with OpenAIEmulator(config(answer_chunks=30, chunk_ms=100)) as emu:
        t = transport(emu)
        rec = Recorder(t)
        await t.connect()
        say(t, speech(0, 5, ["long", "story"]))
        await rec.until(lambda r: bool(r.named("on_first_audio_chunk")))
        say(t, speech(10, 10, ["stop"]))
        await rec.ended(1)
        await t.disconnect()

    assert rec.ends[0][1] is GenerationEndReason.INTERRUPTED
    assert len(rec.named("on_interrupted")) == 1


async def test_clear_input_audio_empties_the_services_input_buffer() -> None:
    async with OpenAIEmulator(config()) as emu:
        t = transport(emu)
        rec = Recorder(t)
        await t.connect()
        say(t, speech(0, 4, ["oops"], silence=0))
        await rec.until(lambda r: bool(r.named("on_speech_started")))
        t.clear_input_audio()
        # The next words make a turn of their own: the cleared ones reached no item.
        say(t, speech(20, 5, ["fine"]))
        await rec.ended(1)
        await t.disconnect()
    record = emu.ledger.sessions[0]
    assert record.cleared_speech == list(range(4))
    assert [i.speech for i in record.items if i.role == "user"] == [tuple(range(20, 25))]
    assert len(record.answers) == 1 and "heard fine [" in rec.transcript
    assert record.client_events["input_audio_buffer.clear"] == 1


async def test_text_turns_and_instructions_reach_the_session_and_a_tools_change_busts_the_cache() -> (
    None
):
    async with OpenAIEmulator(config(answer_chunks=2)) as emu:
        t = transport(emu)
        rec = Recorder(t)
        await t.connect(SessionUpdate(instructions="Be terse."))
        t.send_content([ContentTurn("user", "pineapple")])
        await rec.ended(1)
        await t.update_session(SessionUpdate(tools=[{"name": "weather"}]))
        await t.update_session(SessionUpdate(voice="verse"))
        await t.disconnect()
    assert "heard pineapple" in rec.transcript
    assert rec.named("on_cache_bust") == [("tools_changed",)]
    assert t.config.voice == "verse" and t.config.tools[0].name == "weather"
    assert emu.ledger.sessions[0].client_events["session.update"] == 3


async def test_bad_input_is_refused_with_a_clear_error_and_sends_nothing() -> None:
    async with OpenAIEmulator(config()) as emu:
        t = transport(emu)
        with pytest.raises(NotConnectedError):
            t.send_audio(b"\0\0")
        await t.connect()
        with pytest.raises(TypeError):
            t.send_audio("not audio")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="even"):
            t.send_audio(b"\0")
        with pytest.raises(MessageTooLargeError):
            t.send_audio(bytes(12 * 1024 * 1024))
        with pytest.raises(UnknownToolCallError):
            t.send_tool_result(ToolResult("nope", "weather"))
        with pytest.raises(TypeError):
            t.send_content("hello")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="images"):
            t.send_file(b"%PDF", "application/pdf")
        with pytest.raises(ValueError, match="top_k"):
            await t.update_session(SessionUpdate(generation=_top_k()))
        with pytest.raises(ValueError, match="function name"):
            await t.update_session(SessionUpdate(tools=[{"name": "bad name!"}]))
        # An update the service answers: what was sent before it reached the service first.
        await t.update_session(SessionUpdate(voice="verse"))
        await t.disconnect()
    # Nothing of it reached the service: only the setup's update and the last one.
    assert dict(emu.ledger.sessions[0].client_events) == {"session.update": 2}
    with pytest.raises(TypeError):
        OpenAIRealtimeTransport(object())
    with pytest.raises(ValueError):
        OpenAIRealtimeOptions(session_cap=-1)


def _top_k() -> object:
    from realtime_resumption.transport import GenerationSettings

    return GenerationSettings(top_k=3)


async def test_a_callback_that_raises_is_logged_and_the_call_goes_on() -> None:
    async with OpenAIEmulator(config(answer_chunks=3)) as emu:
        t = transport(emu)
        rec = Recorder(t)

        def broken(_: bytes) -> None:
            raise RuntimeError("framework bug")

        t.on_audio_output = broken
        await t.connect()
        say(t, speech(0, 5, ["one"]))
        await rec.ended(1)
        say(t, speech(20, 5, ["two"]))
        await rec.ended(2)
        await t.disconnect()
    assert [r for _, r in rec.ends] == [GenerationEndReason.GENERATION_COMPLETE] * 2
    assert [a.outcome for a in emu.ledger.sessions[0].answers] == ["complete", "complete"]


async def test_a_refused_dial_is_a_connect_error_without_the_api_key() -> None:
    key = "sk-test-0123456789abcdefghijklmnop"
    async with OpenAIEmulator(config()) as emu:
        emu.faults.refuse_dials(429)
        t = transport(emu, client=emu.client(api_key=key), retry_delays=(0.0,))  # one dial
        rec = Recorder(t)
        with pytest.raises(ConnectError) as caught:
            await t.connect()
        assert caught.value.failure.code == 429
        failed = rec.named("on_connection_lifecycle")[-1][0]
        assert failed.kind == "setup-failed"
        assert key not in repr(t) and key not in str(caught.value)
        assert key not in repr(caught.value.failure)
        # The next dial is served.
        await t.connect()
        assert t.is_connected
        kinds = [a[0].kind for a in rec.named("on_connection_lifecycle")]
        assert kinds[-1] == "setup-ok" and isinstance(
            rec.named("on_connection_lifecycle")[-1][0], SetupOk
        )
        await t.disconnect()


async def test_disconnect_leaves_no_task_behind() -> None:
    async with OpenAIEmulator(config()) as emu:
        before = asyncio.all_tasks()
        t = transport(emu)
        await t.connect()
        say(t, speech(0, 3, ["hi"]))
        await t.disconnect()
        await t.disconnect()  # idempotent
        left = {task for task in asyncio.all_tasks() - before if not task.done()}
        assert not [task for task in left if "oai-conn" in task.get_name()]
        assert not t.is_connected
        with pytest.raises(NotConnectedError):
            t.send_audio(b"\0\0")
        await asyncio.wait_for(emu.wait_disconnected(TIMEOUT), TIMEOUT)


def test_without_the_sdk_the_import_says_which_extra_to_install() -> None:
    # A process where ``import openai`` fails, as in an install without the extra.
    code = (
        "import sys; sys.modules['openai'] = None\n"
        "try:\n"
        "    import realtime_resumption.openai\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert "pip install 'realtime-resumption[openai]'" in out.stdout


async def test_an_update_the_service_refuses_raises_and_the_configuration_stays() -> None:
    async with OpenAIEmulator(config()) as emu:
        t = transport(emu, SessionConfig(voice="alloy"))
        await t.connect()
        with pytest.raises(TransportError, match="refused the session update"):
            await t.update_session(SessionUpdate(voice="no-such-voice"))
        assert t.config.voice == "alloy"
        await t.update_session(SessionUpdate(voice="verse"))
        assert t.config.voice == "verse"
        await t.disconnect()
    assert emu.ledger.sessions[0].errors[0][0] is not None


async def test_truncate_answer_cuts_the_last_answer_where_playback_stopped_and_never_past_it() -> (
    None
):
    async with OpenAIEmulator(config(answer_chunks=5, chunk_ms=100)) as emu:
        t = transport(emu)
        rec = Recorder(t)
        await t.connect()
        say(t, speech(0, 5, ["story"]))
        await rec.ended(1)
        t.truncate_answer(0.25)  # the framework's playback stopped there
        t.truncate_answer(9.0)  # a later, longer time cuts nothing more
        say(t, speech(20, 5, ["next"]))  # on the same socket, after the cuts
        await rec.ended(2)  # the session goes on, answering whole
        await t.disconnect()
    record = emu.ledger.sessions[0]
    assert record.client_events["conversation.item.truncate"] == 1
    assert record.answers[0].heard_ms == 250
    assert not rec.named("on_error")
