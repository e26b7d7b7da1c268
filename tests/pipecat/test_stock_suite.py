"""Pipecat's own tests and examples for its Gemini Live service, run against the stock service
and ours side by side, on the emulator, through real pipelines.

The scenarios are ported from pipecat-ai/pipecat (not copied): its tests drive the stock
service's private members, so each port keeps the scenario and checks what reaches the wire
(the emulator's ledger) or what the pipeline sees, through public API only. Every test runs
once per service and asserts the same thing of both.

Which of Pipecat's tests touch private members:

- ``tests/test_gemini_live_user_audio.py``, all 9 tests: they set ``service._session`` (a fake)
  and ``_ready_for_realtime_input``, call ``_send_user_audio``,
  ``_handle_user_started_speaking``/``_stopped_speaking`` and ``_handle_speech_control_params``,
  and read ``_user_audio_preroll_buffer``. Ported below (``test_manual_vad_*``,
  ``test_server_vad_*``) to frames in and the wire out.
- ``tests/test_realtime_service_tool_sync.py`` (the Gemini Live case, 6 tests): they call
  ``_sync_registered_tool_handlers`` and read ``_functions``. Ported below
  (``test_service_tools_*``) to a tool call answered by the handler the schema carries.
- ``tests/test_ttfat_metrics.py``: ``GeminiLiveLLMService(api_key=...).reports_ttfat is
  False`` uses public API only; run here as is.
- ``tests/test_gemini_live_tracing.py`` and ``tests/test_tracing_system_instruction.py`` use
  stand-ins, not the service; ``tests/test_get_llm_invocation_params.py`` tests the adapter,
  which both services share. Nothing to compare.

Pipecat's examples (``examples/realtime/realtime-gemini-live*.py``,
``examples/update-settings/llm/llm-gemini-live.py``) are ported as ``test_example_*``: the
same services, settings, tools, context and frames, with the emulator in place of the user's
device and of Google. The ones that need Google itself (google search, the Files API) are left
out: the emulator has neither.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from pipecat.adapters.llm.schemas.direct_function import tool_options
from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
from pipecat.audio.vad.vad_analyzer import VADParams
from pipecat.frames.frames import (
    EndFrame,
    EndWorkerFrame,
    FunctionCallInProgressFrame,
    FunctionCallResultFrame,
    InputAudioRawFrame,
    InputTextRawFrame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMRunFrame,
    LLMUpdateSettingsFrame,
    SpeechControlParamsFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.google.gemini_live.llm import (
    AUTOSIZED_USER_AUDIO_PREROLL_MARGIN_SECS,
    GeminiVADParams,
)
from pipecat.services.llm_service import FunctionCallParams

from realtime_resumption.frames import SessionMovedFrame
from realtime_resumption.testing.emulator import Emulator, user_audio

from . import services
from .rig import TIME_SCALE, PushLog, Rig, emulator_config, until

SERVICES = pytest.mark.parametrize("make", [services.stock, services.ours], ids=["stock", "ours"])
Make = Callable[..., Any]
_WIRE_KINDS = ("audio", "activity_start", "activity_end")


def _hello() -> LLMContextFrame:
    return LLMContextFrame(LLMContext(messages=[{"role": "user", "content": "hello there"}]))


async def _answered_context(rig: Rig) -> None:
    """The first context, answered: both services send user input from then on."""
    await rig.queue(_hello())
    await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 1)


def _wire(emu: Emulator) -> list[tuple[str, tuple[int, ...], int]]:
    """Audio and activity messages on the session's first connection: (kind, user audio seqs,
    audio bytes)."""
    (session,) = emu.ledger.sessions.values()
    return [
        (m.kind, m.audio_seqs, m.audio_bytes)
        for m in session.connections[0].client_messages
        if m.kind in _WIRE_KINDS
    ]


def _kinds(emu: Emulator) -> list[str]:
    return [kind for kind, _, _ in _wire(emu)]


async def _until_kinds(emu: Emulator, count: int) -> list[str]:
    await until(lambda: len(_wire(emu)) >= count)
    return _kinds(emu)


def _chunk(seq: int) -> InputAudioRawFrame:
    """20 ms of 16 kHz silence carrying ``seq``."""
    return InputAudioRawFrame(
        audio=user_audio(seq, speech=False), sample_rate=16_000, num_channels=1
    )


def _long(seconds: float, *, ms_per_frame: int | None = None) -> list[InputAudioRawFrame]:
    """``seconds`` of 16 kHz audio in one frame, or in frames of ``ms_per_frame``."""
    size = int(16_000 * seconds) * 2
    step = size if ms_per_frame is None else 32 * ms_per_frame
    return [
        InputAudioRawFrame(audio=bytes(min(step, size - i)), sample_rate=16_000, num_channels=1)
        for i in range(0, size, step)
    ]


def _manual(make: Make, emu: Emulator, **options: Any) -> Any:
    return make(emu, settings={"vad": GeminiVADParams(disabled=True)}, **options)


# --- tests/test_gemini_live_user_audio.py: server VAD disabled -----------------------------


@SERVICES
async def test_manual_vad_buffers_audio_until_turn_starts(make: Make) -> None:
    async with Emulator(emulator_config()) as emu:
        async with Rig([_manual(make, emu)]) as rig:
            await _answered_context(rig)
            await rig.queue(_chunk(1), _chunk(2))
            await rig.queue(UserStartedSpeakingFrame(), UserStoppedSpeakingFrame())
            kinds = await _until_kinds(emu, 3)
    # Nothing before the activity opened: the idle audio was held.
    assert kinds == ["activity_start", "audio", "activity_end"]


@SERVICES
async def test_manual_vad_flushes_preroll_after_activity_start(make: Make) -> None:
    async with Emulator(emulator_config()) as emu:
        async with Rig([_manual(make, emu)]) as rig:
            await _answered_context(rig)
            await rig.queue(_chunk(1), _chunk(2))
            await rig.queue(UserStartedSpeakingFrame())
            await _until_kinds(emu, 2)
            wire = _wire(emu)
    # activity_start, then the whole onset in one message.
    assert wire == [("activity_start", (), 0), ("audio", (1, 2), 1280)]


@SERVICES
async def test_manual_vad_streams_audio_during_turn(make: Make) -> None:
    async with Emulator(emulator_config()) as emu:
        async with Rig([_manual(make, emu)]) as rig:
            await _answered_context(rig)
            await rig.queue(UserStartedSpeakingFrame())
            assert await _until_kinds(emu, 1) == ["activity_start"]
            await rig.queue(_chunk(1), _chunk(2))
            await _until_kinds(emu, 3)
            wire = _wire(emu)
    assert wire == [("activity_start", (), 0), ("audio", (1,), 640), ("audio", (2,), 640)]


@SERVICES
async def test_manual_vad_sends_activity_end_on_turn_stop(make: Make) -> None:
    async with Emulator(emulator_config()) as emu:
        async with Rig([_manual(make, emu)]) as rig:
            await _answered_context(rig)
            await rig.queue(UserStartedSpeakingFrame())
            await _until_kinds(emu, 1)
            await rig.queue(_chunk(1))
            await _until_kinds(emu, 2)
            await rig.queue(UserStoppedSpeakingFrame())
            kinds = await _until_kinds(emu, 3)
    assert kinds == ["activity_start", "audio", "activity_end"]


async def _preroll_bytes(rig: Rig, emu: Emulator, frames: list[Any]) -> int:
    """Audio bytes the onset carried after ``frames`` (idle) and the user's turn start."""
    await rig.queue(*frames)
    await rig.queue(UserStartedSpeakingFrame())
    await _until_kinds(emu, 2)
    wire = _wire(emu)
    assert [kind for kind, _, _ in wire] == ["activity_start", "audio"]
    return wire[1][2]


@SERVICES
async def test_manual_vad_preroll_capped_to_default_window(make: Make) -> None:
    async with Emulator(emulator_config()) as emu:
        async with Rig([_manual(make, emu)]) as rig:
            await _answered_context(rig)
            kept = await _preroll_bytes(rig, emu, _long(1.0))
    assert kept == 16_000  # the last 0.5 s of a frame longer than the window


@SERVICES
async def test_manual_vad_preroll_keeps_the_window_of_frames_that_do_not_divide_it(
    make: Make,
) -> None:
    async with Emulator(emulator_config()) as emu:
        async with Rig([_manual(make, emu)]) as rig:
            await _answered_context(rig)
            kept = await _preroll_bytes(rig, emu, _long(1.024, ms_per_frame=256))
    assert kept == 16_000  # 500 ms of 256 ms frames: one whole and part of the one before


@SERVICES
async def test_manual_vad_preroll_sized_from_vad_start_secs(make: Make) -> None:
    start_secs = 0.5
    async with Emulator(emulator_config()) as emu:
        async with Rig([_manual(make, emu)]) as rig:
            await _answered_context(rig)
            params = SpeechControlParamsFrame(vad_params=VADParams(start_secs=start_secs))
            kept = await _preroll_bytes(rig, emu, [params, *_long(2.0)])
    assert kept == int(16_000 * 2 * (start_secs + AUTOSIZED_USER_AUDIO_PREROLL_MARGIN_SECS))


@SERVICES
async def test_manual_vad_preroll_override_pins_value_and_ignores_vad_params(make: Make) -> None:
    async with Emulator(emulator_config()) as emu:
        async with Rig([_manual(make, emu, user_audio_preroll_secs=0.1)]) as rig:
            await _answered_context(rig)
            params = SpeechControlParamsFrame(vad_params=VADParams(start_secs=0.5))
            kept = await _preroll_bytes(rig, emu, [params, *_long(1.0)])
    assert kept == 3_200


# --- tests/test_gemini_live_user_audio.py: server VAD enabled ------------------------------


@SERVICES
async def test_server_vad_streams_audio_when_idle(make: Make) -> None:
    async with Emulator(emulator_config()) as emu:
        async with Rig([make(emu)]) as rig:
            await _answered_context(rig)
            await rig.queue(_chunk(1), _chunk(2))
            await _until_kinds(emu, 2)
            wire = _wire(emu)
    assert wire == [("audio", (1,), 640), ("audio", (2,), 640)]


@SERVICES
async def test_server_vad_does_not_send_activity_markers(make: Make) -> None:
    async with Emulator(emulator_config()) as emu:
        async with Rig([make(emu)]) as rig:
            await _answered_context(rig)
            await rig.queue(UserStartedSpeakingFrame(), UserStoppedSpeakingFrame(), _chunk(1))
            kinds = await _until_kinds(emu, 1)
    assert kinds == ["audio"]


# --- the model hears nothing before the first context --------------------------------------


@SERVICES
async def test_no_user_audio_reaches_the_model_before_the_first_context(make: Make) -> None:
    async with Emulator(emulator_config()) as emu:
        async with Rig([make(emu)]) as rig:
            # The session is up, the context has not come yet.
            await until(
                lambda: any(
                    c.established for s in emu.ledger.sessions.values() for c in s.connections
                )
            )
            await rig.queue(_chunk(1), _chunk(2))
            await _answered_context(rig)
            await rig.queue(_chunk(3))
            await _until_kinds(emu, 1)
            wire = _wire(emu)
    assert wire == [("audio", (3,), 640)]


# --- tests/test_realtime_service_tool_sync.py: the Gemini Live case ------------------------


async def _sample(params: FunctionCallParams) -> None:
    await params.result_callback({})


@tool_options(cancel_on_interruption=False)
async def _sample_async(params: FunctionCallParams) -> None:
    await params.result_callback({})


def _schema(name: str = "sample", handler: Any = _sample) -> FunctionSchema:
    return FunctionSchema(
        name=name, description="A sample tool.", properties={}, required=[], handler=handler
    )


async def _ask_for(make: Make, tools: Any, text: str, context: LLMContext | None = None) -> Any:
    """The service built with ``tools`` (no ``register_function``), asked ``text`` after its
    first context is answered. Returns (service, the pipeline's frames)."""
    async with Emulator(emulator_config()) as emu:
        service = make(emu, tools=False if tools is None else tools)
        async with Rig([service]) as rig:
            first = context or LLMContext()
            first.add_message({"role": "user", "content": "hello there"})
            await rig.queue(LLMContextFrame(first))
            await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 1)
            await rig.queue(InputTextRawFrame(text))
            await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 2)
    return service, rig


@SERVICES
async def test_service_tools_schema_handler_registers(make: Make) -> None:
    service, rig = await _ask_for(make, ToolsSchema(standard_tools=[_schema()]), "please sample it")
    assert service.has_function("sample")
    (result,) = rig.of(FunctionCallResultFrame)
    assert result.function_name == "sample"


@SERVICES
async def test_service_tools_as_a_list_register(make: Make) -> None:
    service, rig = await _ask_for(make, [_schema()], "please sample it")
    assert service.has_function("sample")
    assert [r.function_name for r in rig.of(FunctionCallResultFrame)] == ["sample"]


@SERVICES
async def test_service_tools_async_option_honored(make: Make) -> None:
    _service, rig = await _ask_for(
        make, ToolsSchema(standard_tools=[_schema(handler=_sample_async)]), "please sample it"
    )
    (in_progress,) = rig.of(FunctionCallInProgressFrame)
    assert in_progress.cancel_on_interruption is False


@SERVICES
async def test_service_tools_none_is_safe(make: Make) -> None:
    service, rig = await _ask_for(make, None, "please sample it")
    assert not service.has_function("sample")
    assert rig.of(FunctionCallResultFrame) == []


@SERVICES
async def test_service_tools_raw_dicts_register_nothing(make: Make) -> None:
    service, _rig = await _ask_for(make, [{"function_declarations": []}], "please sample it")
    assert not service.has_function("sample")


@SERVICES
async def test_service_tools_context_tools_take_precedence(make: Make) -> None:
    context = LLMContext(tools=ToolsSchema(standard_tools=[_schema("from_context")]))
    service, rig = await _ask_for(
        make,
        ToolsSchema(standard_tools=[_schema("from_init")]),
        "please from_context and from_init",
        context,
    )
    assert service.has_function("from_context") and not service.has_function("from_init")
    assert [r.function_name for r in rig.of(FunctionCallResultFrame)] == ["from_context"]


# --- tests/test_ttfat_metrics.py -----------------------------------------------------------


@SERVICES
def test_a_realtime_service_reports_no_ttfat(make: Make) -> None:
    cls = services.StockService if make is services.stock else services.GeminiLiveLLMService
    assert cls(api_key="test-key").reports_ttfat is False


# --- examples/realtime/realtime-gemini-live*.py, examples/update-settings -------------------

_INSTRUCTION = "You are a helpful assistant who can answer questions and use tools."


async def _say(rig: Rig, first: int, words: list[str]) -> int:
    """The user says ``words`` (a 20 ms speech chunk each), then 200 ms of silence."""
    chunks = [(w, True) for w in words] + [("", False)] * 10
    for seq, (word, speech) in enumerate(chunks, start=first):
        audio = user_audio(seq, speech=speech, word=word or None)
        await rig.queue(InputAudioRawFrame(audio=audio, sample_rate=16_000, num_channels=1))
        await asyncio.sleep(0.02 * TIME_SCALE)
    return first + len(chunks)


def _example_pipeline(service: Any, context: LLMContext) -> tuple[Rig, PushLog]:
    pair = LLMContextAggregatorPair(context)
    log = PushLog()
    log.source = service
    return Rig([pair.user(), service, pair.assistant()], observers=[log]), log


def _answers(log: PushLog) -> int:
    return log.count(LLMFullResponseEndFrame)


@SERVICES
async def test_example_realtime_gemini_live(make: Make) -> None:
    asked: list[dict[str, Any]] = []

    async def fetch_weather(params: FunctionCallParams) -> None:
        asked.append(dict(params.arguments))
        await params.result_callback({"conditions": "nice", "temperature": 24})

    tools = ToolsSchema(
        standard_tools=[
            _schema("get_current_weather", fetch_weather),
            _schema("get_restaurant_recommendation", _sample),
        ]
    )
    async with Emulator(emulator_config()) as emu:
        llm = make(
            emu, tools=tools, settings={"system_instruction": _INSTRUCTION, "voice": "Aoede"}
        )
        context = LLMContext()
        context.add_message({"role": "developer", "content": "Please introduce yourself."})
        rig, log = _example_pipeline(llm, context)
        async with rig:
            await rig.queue(LLMRunFrame())
            await rig.wait(lambda: _answers(log) >= 1)
            await _say(rig, 1, ["what", "is", "get_current_weather", "today"])
            await rig.wait(lambda: _answers(log) >= 2)
        (session,) = emu.ledger.sessions.values()
    assert len(asked) == 1
    setups = [c.setup for c in session.connections if c.setup is not None]
    assert {(s.voice, s.system_instruction) for s in setups} == {("Aoede", _INSTRUCTION)}
    assert set(setups[-1].tools) == {"get_current_weather", "get_restaurant_recommendation"}
    replies = [m for m in context.get_messages() if isinstance(m, dict)]
    assert sum(m.get("role") == "assistant" and bool(m.get("content")) for m in replies) == 2


@SERVICES
async def test_example_realtime_gemini_live_locally_driven_turns(make: Make) -> None:
    async with Emulator(emulator_config()) as emu:
        llm = make(emu, settings={"voice": "Aoede", "vad": GeminiVADParams(disabled=True)})
        context = LLMContext(
            [{"role": "user", "content": "Say hello. Then ask if I want to hear a joke."}]
        )
        rig, log = _example_pipeline(llm, context)
        async with rig:
            await rig.queue(LLMRunFrame())
            await rig.wait(lambda: _answers(log) >= 1)
            # The local VAD's turn frames around the user's words.
            seq = await _say(rig, 1, [])
            await rig.queue(UserStartedSpeakingFrame())
            await _say(rig, seq, ["yes", "please"])
            await rig.queue(UserStoppedSpeakingFrame())
            await rig.wait(lambda: _answers(log) >= 2)
        (session,) = emu.ledger.sessions.values()
    assert [t.user_text for t in session.turns.values()][1:] == ["yes please"]
    kinds = [k for k in _kinds(emu) if k != "audio"]
    assert kinds == ["activity_start", "activity_end"]


@SERVICES
async def test_example_realtime_gemini_live_graceful_end(make: Make) -> None:
    async def end_conversation(params: FunctionCallParams) -> None:
        await params.result_callback({"success": True})
        await params.llm.push_frame(EndWorkerFrame(), FrameDirection.UPSTREAM)

    tools = ToolsSchema(standard_tools=[_schema("end_conversation", end_conversation)])
    async with Emulator(emulator_config()) as emu:
        llm = make(emu, tools=tools, settings={"system_instruction": _INSTRUCTION})
        context = LLMContext([{"role": "developer", "content": "Say hello."}])
        rig, log = _example_pipeline(llm, context)
        async with rig:
            await rig.queue(LLMRunFrame())
            await rig.wait(lambda: _answers(log) >= 1)
            await rig.queue(InputTextRawFrame("please end_conversation now"))
            # The pipeline ends by itself once the goodbye is said.
            await rig.wait(lambda: rig.count(EndFrame) >= 1)
        (session,) = emu.ledger.sessions.values()
    goodbye = list(session.turns.values())[-1]
    # Stock takes the EndFrame that comes between the tool's result and the goodbye as the
    # end of the conversation and cuts the goodbye; ours holds it until the answer, which
    # the tool call is part of, ends.
    assert goodbye.outcome == ("complete" if make is services.ours else "cut")


@SERVICES
async def test_example_update_settings(make: Make) -> None:
    async with Emulator(emulator_config()) as emu:
        llm = make(emu, settings={"system_instruction": _INSTRUCTION})
        context = LLMContext()
        context.add_message({"role": "developer", "content": "Please introduce yourself."})
        rig, log = _example_pipeline(llm, context)
        async with rig:
            await rig.queue(LLMRunFrame())
            await rig.wait(lambda: _answers(log) >= 1)
            delta = type(llm).Settings(temperature=0.1)
            await rig.queue(LLMUpdateSettingsFrame(delta=delta))
            await rig.queue(InputTextRawFrame("hello there"))
            await rig.wait(lambda: _answers(log) >= 2)
            if make is services.ours:
                await rig.wait(lambda: log.count(SessionMovedFrame) >= 1)
        (session,) = emu.ledger.sessions.values()
    assert llm.settings.temperature == 0.1
    last = session.connections[-1].setup
    assert last is not None
    # Stock stores the setting and warns that it is not applied; ours moves the session to a
    # connection whose setup carries it.
    expected = 0.1 if make is services.ours else None
    assert last.generation.get("temperature") == expected
