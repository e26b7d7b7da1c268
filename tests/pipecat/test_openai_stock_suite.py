"""Pipecat's own tests and examples for its OpenAI Realtime service, run against the stock
service and ours side by side, on the emulator, through real pipelines: every test runs once
per service and asserts the same thing of both, or says where ours differs and why.

The scenarios are ported from pipecat-ai/pipecat (not copied), read at the newest snapshot
available here (its history stops before 1.14; the members its tests touch are all in the
installed 1.14.0). Its tests drive the stock service's private members with fakes, which ours
replaces with the transport, so none runs as is; each port keeps the scenario and checks what
reaches the wire (the emulator's ledger) or what the pipeline sees, through public API only.

- ``tests/test_openai_realtime_audio_frames.py``, 5 tests: they set ``_websocket`` (a fake
  yielding scripted server events), call ``_receive_task_handler`` and
  ``_truncate_current_audio_response``, replace ``push_frame`` and ``send_client_event``, and
  read ``_current_audio_response``. The single-item answer is
  ``test_an_answer_is_one_tts_turn_around_its_audio``; the interrupted one is
  ``test_an_interrupted_answer_is_cut_where_the_user_stopped_hearing_it``, which ours fails
  (it sends no truncate: marked so, strictly). The three multi-item cases (one answer in
  several audio items, as ``gpt-realtime-2`` sends long replies) have nothing to compare: the
  emulator answers in one item.
- ``tests/test_openai_realtime_user_audio.py``, 8 tests: they replace ``send_client_event``
  and ``stop_all_metrics``, call ``_send_user_audio``, ``_handle_interruption`` and
  ``_handle_speech_control_params``, and read ``_user_audio_preroll_buffer``. Ported as
  ``test_manual_turns_*`` (turn detection off: the appends, the clear, the pre-roll replayed
  after it at its default, VAD-sized and pinned lengths, the cancel of an answer under way) and
  ``test_server_turns_*`` (server VAD: no clear, no cancel, nothing replayed). Ours sends no
  ``response.cancel`` when no answer is running (stock's is refused by the server).
- ``tests/test_openai_realtime_usage_metrics.py``: 2 tests replace
  ``start_llm_usage_metrics``, ``stop_processing_metrics``, ``push_frame`` and
  ``_call_event_handler`` and call ``_handle_evt_response_done``; ported as
  ``test_an_answers_usage_is_reported_with_its_audio_and_cached_tokens`` (the emulator always
  sends the token details, so the case without them is not compared). Its 3 tests of
  ``_add_token_usage_to_span`` test a tracing helper both services share: nothing to compare.
- ``tests/test_openai_realtime_reasoning.py``: 4 tests of ``SessionProperties`` and
  ``Reasoning`` (the events module, shared); 6 replace ``send_client_event`` and call
  ``_send_session_update`` or ``process_frame`` with ``LLMUpdateSettingsFrame``, and read
  ``_settings``. The emulator keeps no session's ``reasoning``, so the wire cannot be
  compared: ``test_reasoning_on_a_model_without_it_is_stripped_with_a_warning`` checks stock's
  warning and that a runtime update is sent. Ours sends no ``reasoning`` at all (the
  transport's session configuration has none).
- ``tests/test_realtime_service_tool_sync.py``, the OpenAI Realtime case (6 tests): they call
  ``_sync_registered_tool_handlers`` and ``_send_session_update`` and read ``_functions`` and
  ``_settings``. Ported as ``test_a_handler_on_a_session_tool_answers_its_call`` (a
  ``ToolsSchema`` and a plain list, past the session's first update); the
  ``cancel_on_interruption`` option and the no-tools case are seen only in ``_functions``.
- ``tests/test_realtime_tool_result_encoding.py``, the OpenAI Realtime case (2 tests): they
  replace ``send_client_event`` and call ``_send_tool_result``. Ported as
  ``test_a_function_result_reaches_the_model_encoded_once``; ours sends the same JSON object
  ASCII-escaped, and a result that is not an object under ``result``.
- ``tests/test_realtime_tool_sync.py``, 2 tests: they replace ``_send_session_update`` and
  ``push_frame`` and read ``_functions``. Ported as
  ``test_tools_set_mid_call_register_and_prune_direct_functions``.
- ``tests/test_settings.py`` (``OpenAIRealtimeLLMSettings``), ``tests/test_function_calling_
  adapters.py`` and ``tests/test_get_llm_invocation_params.py`` (``OpenAIRealtimeLLMAdapter``)
  test pieces both services share: nothing to compare. Pipecat has no test of its Azure
  realtime service.

Pipecat's ``examples/realtime/realtime-openai.py`` and ``realtime-openai-text.py`` are ported
as ``test_example_*``: the bot greets on ``LLMRunFrame`` through the aggregator pair, a
registered function is called and its result answered, the user's speech is heard and answered
in audio (or in text, for a TTS after the service), and the user barges in. The other OpenAI
and Azure realtime examples are not ported here.
"""

from __future__ import annotations

import io
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from loguru import logger
from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
from pipecat.audio.vad.vad_analyzer import VADParams
from pipecat.frames.frames import (
    ErrorFrame,
    InputAudioRawFrame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMSetToolsFrame,
    LLMUpdateSettingsFrame,
    MetricsFrame,
    SpeechControlParamsFrame,
    TTSAudioRawFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
    UserStoppedSpeakingFrame,
)
from pipecat.metrics.metrics import LLMUsageMetricsData
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
from pipecat.services.llm_service import FunctionCallParams
from pipecat.services.openai.realtime import events
from pipecat.services.openai.realtime.llm import OpenAIRealtimeLLMService as StockService

from realtime_resumption.pipecat.openai import OpenAIRealtimeLLMService as OurService
from realtime_resumption.testing.openai_emulator import OpenAIEmulator, user_audio
from realtime_resumption.testing.openai_emulator.conversation_ledger import SessionRecord

from ..openai_emulator.oai_helpers import RATE
from .rig import Rig, until

Make = Callable[..., StockService]


def _properties(tools: Any = None, **audio_input: Any) -> events.SessionProperties:
    return events.SessionProperties(
        instructions="You are a helpful assistant.",
        audio=events.AudioConfiguration(
            input=events.AudioInput(transcription=events.InputAudioTranscription(), **audio_input),
            output=events.AudioOutput(voice="alloy"),
        ),
        tools=tools,
    )


@pytest.fixture(params=["stock", "ours"])
def kind(request: pytest.FixtureRequest) -> str:
    """Which service the test runs on: every test runs on both."""
    return str(request.param)


@pytest.fixture
def make(kind: str) -> Make:
    service = StockService if kind == "stock" else OurService

    def build(
        emu: OpenAIEmulator,
        properties: events.SessionProperties | None = None,
        **kwargs: Any,
    ) -> StockService:
        return service(
            api_key="sk-test",
            base_url=emu.realtime_url,
            settings=service.Settings(
                model="gpt-realtime", session_properties=properties or _properties()
            ),
            **kwargs,
        )

    return build


async def _speak(rig: Rig, first: int, count: int, words: list[str]) -> None:
    for i in range(count + 3):
        word = words[i] if i < len(words) else None
        audio = user_audio(first + i, speech=i < count, word=word, rate=RATE)
        await rig.queue(InputAudioRawFrame(audio=audio, sample_rate=RATE, num_channels=1))


@pytest.mark.openai_emulator(time_scale=0.05, answer_chunks=3)
async def test_example_realtime_openai(openai_emulator_trusted: OpenAIEmulator, make: Make) -> None:
    emu = openai_emulator_trusted
    calls: list[str] = []

    async def get_current_weather(params: FunctionCallParams) -> None:
        calls.append(params.function_name)
        await params.result_callback({"conditions": "nice", "temperature": "75"})

    service = make(emu)
    service.register_function("get_current_weather", get_current_weather)
    weather = FunctionSchema(
        name="get_current_weather",
        description="Get the current weather",
        properties={"location": {"type": "string"}},
        required=["location"],
    )
    context = LLMContext(tools=ToolsSchema(standard_tools=[weather]))
    pair = LLMContextAggregatorPair(context)
    async with Rig([pair.user(), service, pair.assistant()]) as rig:
        await rig.run_bot()
        answers = lambda: emu.ledger.sessions[0].answers  # noqa: E731
        await until(
            lambda: bool(emu.ledger.sessions and answers()) and answers()[0].outcome == "complete"
        )
        await _speak(rig, 0, 6, ["get_current_weather"])
        await until(lambda: len(answers()) >= 3 and answers()[2].outcome == "complete")
        await rig.wait(lambda: rig.count(TTSStoppedFrame) >= 2)
        assert calls == ["get_current_weather"]
        assert rig.count(TTSAudioRawFrame) == 6  # the greeting and the answer to the result
        assert rig.count(TTSStartedFrame) == rig.count(TTSStoppedFrame) == 2
        # The assistant aggregator takes the answers' frames (LLMFullResponse*) and keeps the
        # call and its result in the context.
        roles = [m.get("role") for m in context.get_messages()]
        assert roles.count("tool") == 1 and "assistant" in roles
        assert not rig.of(ErrorFrame) and not rig.of(ErrorFrame, up=True)
    await emu.wait_disconnected()
    record = emu.ledger.sessions[0]
    assert record.committed_speech == list(range(6))
    assert "nice" in record.conversation_text
    assert record.errors == []


@pytest.mark.openai_emulator(time_scale=0.05, answer_chunks=40, chunk_ms=100)
async def test_example_barge_in_interrupts_the_bot(
    openai_emulator_trusted: OpenAIEmulator, make: Make
) -> None:
    """The user speaks over the greeting: the pipeline is interrupted, the greeting is cut and
    the user's turn answered."""
    emu = openai_emulator_trusted
    context = LLMContext()
    pair = LLMContextAggregatorPair(context)
    async with Rig([pair.user(), make(emu), pair.assistant()]) as rig:
        await rig.run_bot()
        await rig.wait(lambda: rig.count(TTSAudioRawFrame) >= 2)
        await _speak(rig, 0, 6, ["stop"])
        await rig.wait(lambda: rig.count(InterruptionFrame) >= 1)
        answers = lambda: emu.ledger.sessions[0].answers  # noqa: E731
        await until(lambda: len(answers()) >= 2 and answers()[1].outcome == "complete")
        assert answers()[0].outcome != "complete"
        assert not rig.of(ErrorFrame) and not rig.of(ErrorFrame, up=True)
    await emu.wait_disconnected()
    record = emu.ledger.sessions[0]
    assert record.committed_speech == list(range(6))
    assert "heard stop" in record.conversation_text


def _hello() -> LLMContext:
    return LLMContext(messages=[{"role": "user", "content": "hello there"}])


def _record(emu: OpenAIEmulator) -> SessionRecord:
    return emu.ledger.sessions[0]


def _no_errors(rig: Rig) -> None:
    assert not rig.of(ErrorFrame) and not rig.of(ErrorFrame, up=True)


# --- tests/test_openai_realtime_audio_frames.py ------------------------------------------------


@pytest.mark.openai_emulator(time_scale=0.05, answer_chunks=3)
async def test_an_answer_is_one_tts_turn_around_its_audio(
    openai_emulator_trusted: OpenAIEmulator, make: Make
) -> None:
    emu = openai_emulator_trusted
    async with Rig([make(emu)]) as rig:
        await rig.context(_hello())
        await rig.wait(lambda: rig.count(TTSStoppedFrame) >= 1)
        _no_errors(rig)
    tts = [type(f) for f in rig.of((TTSStartedFrame, TTSAudioRawFrame, TTSStoppedFrame))]
    assert tts == [TTSStartedFrame, *[TTSAudioRawFrame] * 3, TTSStoppedFrame]
    await emu.wait_disconnected()
    assert [a.outcome for a in _record(emu).answers] == ["complete"]


@pytest.mark.openai_emulator(time_scale=0.05, answer_chunks=40, chunk_ms=100)
async def test_an_interrupted_answer_is_cut_where_the_user_stopped_hearing_it(
    openai_emulator_trusted: OpenAIEmulator, make: Make
) -> None:
    """The user speaks over the greeting: stock sends ``conversation.item.truncate`` for the
    answer's item, at the wall-clock time since its first audio (at most its audio), so the
    server's conversation keeps what the user heard."""
    emu = openai_emulator_trusted
    pair = LLMContextAggregatorPair(LLMContext())
    async with Rig([pair.user(), make(emu), pair.assistant()]) as rig:
        await rig.run_bot()
        await rig.wait(lambda: rig.count(TTSAudioRawFrame) >= 2)
        await _speak(rig, 0, 6, ["stop"])
        await until(lambda: len(_record(emu).answers) >= 2)
        await until(lambda: _record(emu).answers[1].outcome == "complete")
        _no_errors(rig)
    await emu.wait_disconnected()
    record = _record(emu)
    assert record.client_events["conversation.item.truncate"] == 1
    cut = record.answers[0]
    assert cut.heard_ms is not None
    assert 0 <= cut.heard_ms <= cut.delivered * cut.chunk_ms
    assert record.errors == []


# --- tests/test_openai_realtime_user_audio.py --------------------------------------------------


def _chunks(first: int, count: int) -> list[InputAudioRawFrame]:
    """``count`` 20 ms chunks of 24 kHz speech carrying ``first`` onwards."""
    return [
        InputAudioRawFrame(audio=user_audio(seq, rate=RATE), sample_rate=RATE, num_channels=1)
        for seq in range(first, first + count)
    ]


async def _manual_rig_ready(rig: Rig, emu: OpenAIEmulator) -> None:
    """The first context, answered: both services send the user's audio from then on."""
    await rig.context(_hello())
    await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 1)
    await until(lambda: _record(emu).answers[0].outcome == "complete")


# Stock asks to cancel whether or not an answer is running, and the server refuses the request
# when none is (``response_cancel_not_active``, which stock ignores); ours cancels only a
# running answer, which the transport knows of.
_cancels = {"stock": 1, "ours": 0}
_refused = {"stock": ["response_cancel_not_active"], "ours": []}


@pytest.mark.parametrize(
    ("preroll_secs", "vad_start_secs", "sent", "replayed"),
    [
        (None, None, 10, range(10)),  # all of a short onset
        (None, None, 50, range(25, 50)),  # the default half second
        (None, 0.5, 100, range(60, 100)),  # start_secs and the margin: 0.8 s
        (0.1, 0.5, 50, range(45, 50)),  # the pinned value, whatever the VAD says
    ],
)
@pytest.mark.openai_emulator(time_scale=0.05, answer_chunks=3)
async def test_manual_turns_replay_the_preroll_after_an_interruption(
    openai_emulator_trusted: OpenAIEmulator,
    make: Make,
    kind: str,
    preroll_secs: float | None,
    vad_start_secs: float | None,
    sent: int,
    replayed: range,
) -> None:
    """With turn detection off, an interruption clears the input buffer and appends the
    speech onset again, then cancels the answer."""
    emu = openai_emulator_trusted
    service = make(emu, _properties(turn_detection=False), user_audio_preroll_secs=preroll_secs)
    async with Rig([service]) as rig:
        await _manual_rig_ready(rig, emu)
        if vad_start_secs is not None:
            await rig.queue(
                SpeechControlParamsFrame(vad_params=VADParams(start_secs=vad_start_secs))
            )
        await rig.queue(*_chunks(0, sent))
        await until(lambda: len(_record(emu).received_speech) >= sent)
        await rig.queue(InterruptionFrame())
        await until(lambda: len(_record(emu).received_speech) >= sent + len(replayed))
        await until(lambda: _record(emu).client_events["response.cancel"] >= _cancels[kind])
        _no_errors(rig)
    await emu.wait_disconnected()
    record = _record(emu)
    assert record.cleared_speech == list(range(sent))
    assert record.received_speech == [*range(sent), *replayed]
    assert record.client_events["input_audio_buffer.clear"] == 1
    assert record.client_events["response.cancel"] == _cancels[kind]
    assert [code for code, _ in record.errors] == _refused[kind]
    assert record.committed_speech == []


@pytest.mark.openai_emulator(time_scale=0.05, answer_chunks=3)
async def test_manual_turns_with_nothing_heard_clear_and_cancel_only(
    openai_emulator_trusted: OpenAIEmulator, make: Make, kind: str
) -> None:
    emu = openai_emulator_trusted
    async with Rig([make(emu, _properties(turn_detection=False))]) as rig:
        await _manual_rig_ready(rig, emu)
        await rig.queue(InterruptionFrame())
        await until(lambda: _record(emu).client_events["input_audio_buffer.clear"] >= 1)
        await until(lambda: _record(emu).client_events["response.cancel"] >= _cancels[kind])
        _no_errors(rig)
    await emu.wait_disconnected()
    record = _record(emu)
    assert record.client_events["input_audio_buffer.clear"] == 1
    assert record.client_events["response.cancel"] == _cancels[kind]
    assert record.client_events["input_audio_buffer.append"] == 0
    assert record.received_speech == record.cleared_speech == []


@pytest.mark.openai_emulator(time_scale=0.05, answer_chunks=40, chunk_ms=100)
async def test_manual_turns_cancel_the_answer_under_way_at_an_interruption(
    openai_emulator_trusted: OpenAIEmulator, make: Make
) -> None:
    """The user's turn, ended by the pipeline, is committed and answered; an interruption
    while the answer plays cancels it (both services send the cancel here)."""
    emu = openai_emulator_trusted
    async with Rig([make(emu, _properties(turn_detection=False))]) as rig:
        await _manual_rig_ready(rig, emu)
        await rig.queue(*_chunks(0, 10))
        await until(lambda: len(_record(emu).received_speech) >= 10)
        await rig.queue(UserStoppedSpeakingFrame())
        await until(lambda: len(_record(emu).answers) >= 2)
        await rig.wait(lambda: rig.count(TTSAudioRawFrame) >= 5)
        await rig.queue(InterruptionFrame())
        await until(lambda: _record(emu).answers[1].outcome != "running")
        _no_errors(rig)
    await emu.wait_disconnected()
    record = _record(emu)
    assert record.committed_speech == list(range(10))
    assert record.answers[1].outcome == "cancelled"
    assert record.client_events["response.cancel"] == 1
    assert record.errors == []


@pytest.mark.openai_emulator(time_scale=0.05, answer_chunks=3)
async def test_server_turns_leave_the_input_buffer_to_the_server_on_an_interruption(
    openai_emulator_trusted: OpenAIEmulator, make: Make
) -> None:
    emu = openai_emulator_trusted
    async with Rig([make(emu)]) as rig:
        await _manual_rig_ready(rig, emu)
        silence = [
            InputAudioRawFrame(
                audio=user_audio(seq, speech=False, rate=RATE), sample_rate=RATE, num_channels=1
            )
            for seq in range(10)
        ]
        await rig.queue(*silence, InterruptionFrame())
        await rig.processed(*_chunks(10, 2))
        await until(lambda: _record(emu).client_events["input_audio_buffer.append"] >= 1)
        _no_errors(rig)
    await emu.wait_disconnected()
    record = _record(emu)
    assert record.client_events["input_audio_buffer.clear"] == 0
    assert record.client_events["response.cancel"] == 0
    assert record.cleared_speech == []


# --- tests/test_openai_realtime_reasoning.py ---------------------------------------------------


@pytest.mark.parametrize(
    ("model", "warned"), [("gpt-realtime-1.5", True), ("gpt-realtime-2", False)]
)
@pytest.mark.openai_emulator(time_scale=0.05, answer_chunks=3)
async def test_reasoning_on_a_model_without_it_is_stripped_with_a_warning(
    openai_emulator_trusted: OpenAIEmulator, kind: str, model: str, warned: bool
) -> None:
    """The emulator keeps no session's ``reasoning``: what both show is stock's warning, given
    once however many updates, naming the model. A runtime update of the reasoning is sent as a
    ``session.update`` by both."""
    service_type = StockService if kind == "stock" else OurService
    properties = _properties()
    properties.reasoning = events.Reasoning(effort="high")
    service = service_type(
        api_key="sk-test",
        base_url=openai_emulator_trusted.realtime_url,
        settings=service_type.Settings(model=model, session_properties=properties),
    )
    emu = openai_emulator_trusted
    sink = io.StringIO()
    handler = logger.add(sink, level="WARNING", format="{message}")
    try:
        async with Rig([service]) as rig:
            await rig.context(_hello())
            await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 1)
            updates = _record(emu).client_events["session.update"]
            delta = service_type.Settings(
                session_properties=events.SessionProperties(
                    reasoning=events.Reasoning(effort="low")
                )
            )
            await rig.processed(LLMUpdateSettingsFrame(delta=delta))
            await until(lambda: _record(emu).client_events["session.update"] > updates)
            _no_errors(rig)
    finally:
        logger.remove(handler)
    await emu.wait_disconnected()
    warnings = [line for line in sink.getvalue().splitlines() if "stripping `reasoning`" in line]
    assert len(warnings) == (1 if warned else 0)
    assert all(model in line for line in warnings)


# --- tests/test_openai_realtime_usage_metrics.py -----------------------------------------------


@pytest.mark.openai_emulator(time_scale=0.05, answer_chunks=3)
async def test_an_answers_usage_is_reported_with_its_audio_and_cached_tokens(
    openai_emulator_trusted: OpenAIEmulator, make: Make
) -> None:
    emu = openai_emulator_trusted
    async with Rig([make(emu)], metrics=True) as rig:
        await rig.context(_hello())
        usage = lambda: [  # noqa: E731
            d.value
            for m in rig.of(MetricsFrame)
            for d in m.data
            if isinstance(d, LLMUsageMetricsData)
        ]
        await rig.wait(lambda: bool(usage()))
        _no_errors(rig)
    await emu.wait_disconnected()
    (answer,) = _record(emu).answers
    # The emulator's response.done: 10 input tokens (none cached, none audio), one output
    # token a chunk, given as text.
    (tokens,) = usage()
    assert (tokens.prompt_tokens, tokens.completion_tokens, tokens.total_tokens) == (
        10,
        answer.produced,
        10 + answer.produced,
    )
    assert tokens.cache_read_input_tokens == 0
    assert (tokens.input_audio_tokens, tokens.output_audio_tokens) == (0, 0)
    assert tokens.cache_read_input_audio_tokens == 0


# --- tests/test_realtime_tool_result_encoding.py, tests/test_realtime_service_tool_sync.py and
# tests/test_realtime_tool_sync.py -------------------------------------------------------------


async def _call_by_voice(rig: Rig, emu: OpenAIEmulator, first: int, name: str) -> None:
    """The user names ``name``; the answer after it (a call and its result's answer, or a
    spoken answer) complete."""
    answers = lambda: _record(emu).answers  # noqa: E731
    before = len(answers())
    await _speak(rig, first, 6, [name])
    await until(lambda: len(answers()) > before and answers()[-1].outcome == "complete")
    if answers()[-1].calls:
        await until(lambda: len(answers()) > before + 1 and answers()[-1].outcome == "complete")


def _outputs(emu: OpenAIEmulator) -> list[str]:
    return [item.text for item in _record(emu).items if item.type == "function_call_output"]


# What the aggregator gives the service for a function result (JSON, or ``COMPLETED`` for none)
# reaches the model as it is from stock. Ours gives it to the transport as a JSON object, which
# the transport encodes again: the same JSON for an object, ASCII-escaped; anything else under
# ``result``.
_OUTPUTS: dict[str, dict[str, str]] = {
    "stock": {"object": '{"temperature": 72, "unit": "°F"}', "none": "COMPLETED"},
    "ours": {
        "object": '{"temperature": 72, "unit": "\\u00b0F"}',
        "none": '{"result": "COMPLETED"}',
    },
}


@pytest.mark.parametrize("result", ["object", "none"])
@pytest.mark.openai_emulator(time_scale=0.05, answer_chunks=3)
async def test_a_function_result_reaches_the_model_encoded_once(
    openai_emulator_trusted: OpenAIEmulator, make: Make, kind: str, result: str
) -> None:
    async def weather(params: FunctionCallParams) -> None:
        await params.result_callback(
            {"temperature": 72, "unit": "°F"} if result == "object" else None
        )

    emu = openai_emulator_trusted
    service = make(emu)
    service.register_function("weather", weather)
    tool = FunctionSchema(name="weather", description="", properties={}, required=[])
    context = LLMContext(tools=ToolsSchema(standard_tools=[tool]))
    pair = LLMContextAggregatorPair(context)
    async with Rig([pair.user(), service, pair.assistant()]) as rig:
        await rig.context(context)
        await until(
            lambda: bool(_record(emu).answers) and _record(emu).answers[0].outcome == "complete"
        )
        # The output is what the test reads (whether an answer follows is the aggregator's).
        await _speak(rig, 0, 6, ["weather"])
        await until(lambda: bool(_outputs(emu)))
        _no_errors(rig)
    await emu.wait_disconnected()
    assert _outputs(emu) == [_OUTPUTS[kind][result]]


def _sample_schema(handler: Callable[[FunctionCallParams], Awaitable[None]]) -> FunctionSchema:
    return FunctionSchema(
        name="sample", description="A sample tool.", properties={}, required=[], handler=handler
    )


@pytest.mark.parametrize("form", ["schema", "list"])
@pytest.mark.openai_emulator(time_scale=0.05, answer_chunks=3)
async def test_a_handler_on_a_session_tool_answers_its_call(
    openai_emulator_trusted: OpenAIEmulator, make: Make, form: str
) -> None:
    """A handler carried by a ``FunctionSchema`` in ``session_properties.tools`` (a
    ``ToolsSchema`` or a plain list) answers the call with no ``register_function``, the
    context advertising no tools; the session's update at its start leaves it so."""
    calls: list[str] = []

    async def sample(params: FunctionCallParams) -> None:
        calls.append(params.function_name)
        await params.result_callback({"done": True})

    schema = _sample_schema(sample)
    properties = _properties(ToolsSchema(standard_tools=[schema]) if form == "schema" else [schema])
    emu = openai_emulator_trusted
    context = LLMContext()
    pair = LLMContextAggregatorPair(context)
    async with Rig([pair.user(), make(emu, properties), pair.assistant()]) as rig:
        await rig.context(context)
        await until(
            lambda: bool(_record(emu).answers) and _record(emu).answers[0].outcome == "complete"
        )
        await _call_by_voice(rig, emu, 0, "sample")
        _no_errors(rig)
    await emu.wait_disconnected()
    assert calls == ["sample"]
    assert _outputs(emu) == ['{"done": true}']


async def sample_tool(params: FunctionCallParams) -> None:
    """A sample direct function."""
    await params.result_callback({"sampled": True})


@pytest.mark.openai_emulator(time_scale=0.05, answer_chunks=3)
async def test_tools_set_mid_call_register_and_prune_direct_functions(
    openai_emulator_trusted: OpenAIEmulator, make: Make
) -> None:
    """``LLMSetToolsFrame`` with a direct function: the session is given it and its handler
    answers the call; an empty one takes it away, and naming it is then only heard."""
    emu = openai_emulator_trusted
    context = LLMContext()
    pair = LLMContextAggregatorPair(context)
    async with Rig([pair.user(), make(emu), pair.assistant()]) as rig:
        await rig.context(context)
        await until(
            lambda: bool(_record(emu).answers) and _record(emu).answers[0].outcome == "complete"
        )
        await rig.processed(LLMSetToolsFrame(tools=[sample_tool]))
        await until(lambda: _record(emu).client_events["session.update"] >= 2)
        await _call_by_voice(rig, emu, 0, "sample_tool")
        await rig.processed(LLMSetToolsFrame(tools=[]))
        await until(lambda: _record(emu).client_events["session.update"] >= 3)
        await _call_by_voice(rig, emu, 20, "sample_tool")
        _no_errors(rig)
    await emu.wait_disconnected()
    record = _record(emu)
    assert [bool(a.calls) for a in record.answers] == [False, True, False, False]
    assert len(_outputs(emu)) == 1
    assert "heard sample_tool" in record.conversation_text


@pytest.mark.openai_emulator(time_scale=0.05, answer_chunks=3)
async def test_example_realtime_openai_text(
    openai_emulator_trusted: OpenAIEmulator, make: Make
) -> None:
    """Pipecat's ``realtime-openai-text.py``: text out (for a TTS after the service), semantic
    turn detection and near-field noise reduction in, a developer message asking for the
    greeting. The greeting and the answer to the user's turn come as text, with no audio."""
    emu = openai_emulator_trusted
    properties = events.SessionProperties(
        audio=events.AudioConfiguration(
            input=events.AudioInput(
                transcription=events.InputAudioTranscription(),
                turn_detection=events.SemanticTurnDetection(),
                noise_reduction=events.InputAudioNoiseReduction(type="near_field"),
            )
        ),
        output_modalities=["text"],
    )
    context = LLMContext([{"role": "developer", "content": "Say hello!"}])
    pair = LLMContextAggregatorPair(context)
    async with Rig([pair.user(), make(emu, properties), pair.assistant()]) as rig:
        await rig.run_bot()
        answers = lambda: _record(emu).answers  # noqa: E731
        await until(
            lambda: bool(emu.ledger.sessions and answers()) and answers()[0].outcome == "complete"
        )
        await _speak(rig, 0, 6, ["weather"])
        await until(lambda: len(answers()) >= 2 and answers()[1].outcome == "complete")
        # The assistant aggregator takes the text into the context.
        said = lambda: [  # noqa: E731
            m.get("content") for m in context.get_messages() if m.get("role") == "assistant"
        ]
        await rig.wait(lambda: any("heard weather" in str(text) for text in said()))
        assert rig.count(TTSAudioRawFrame) == 0
        _no_errors(rig)
    await emu.wait_disconnected()
    record = _record(emu)
    assert record.committed_speech == list(range(6))
    assert [a.outcome for a in record.answers] == ["complete", "complete"]
    assert record.errors == []
