"""Our service on the emulator, frame by frame: settings and tool updates move the session,
manual activity (server VAD disabled) across a move, malformed input, a lost session, the
EndFrame hold, input resampling, and the lifecycle frames' secrets."""

from __future__ import annotations

import asyncio

from loguru import logger
from pipecat.frames.frames import (
    EndFrame,
    ErrorFrame,
    FunctionCallInProgressFrame,
    FunctionCallResultFrame,
    InputAudioRawFrame,
    InputImageRawFrame,
    InputTextRawFrame,
    InterruptionFrame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMMessagesAppendFrame,
    LLMSetToolsFrame,
    LLMUpdateSettingsFrame,
    TTSAudioRawFrame,
    TTSStoppedFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.services.google.gemini_live.llm import GeminiVADParams
from pipecat.services.llm_service import FunctionCallParams

from realtime_resumption import OutboxLimits
from realtime_resumption.frames import (
    GenerationEndedFrame,
    SessionLostFrame,
    SessionMovedFrame,
    SessionResumptionUpdateFrame,
)
from realtime_resumption.move_reports import MoveOutcome, MoveReason
from realtime_resumption.pipecat import GeminiLiveLLMService
from realtime_resumption.pipecat.gemini.output import search_response, token_usage
from realtime_resumption.resumption import ResumptionOptions
from realtime_resumption.testing.emulator import Emulator, user_audio
from realtime_resumption.transport import GenerationEndReason

from ..ledger_checks import assert_nothing_said_lost
from ..transport.transport_helpers import only_session
from . import services
from .rig import TIME_SCALE, PushLog, Rig, emulator_config, until


async def _first_turn(rig: Rig) -> None:
    """A question answered, and the resumption handle that follows it."""
    await rig.queue(InputTextRawFrame("hello there"))
    await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 1)
    await rig.wait(lambda: rig.count(SessionResumptionUpdateFrame) >= 1)


def _kinds(connection) -> list[str]:  # type: ignore[no-untyped-def]
    return [m.kind for m in connection.client_messages if m.kind != "setup"]


async def _speak(rig: Rig, first: int, words: list[str], *, speech: bool = True) -> int:
    for seq, word in enumerate(words, start=first):
        audio = user_audio(seq, speech=speech, word=word or None)
        await rig.queue(InputAudioRawFrame(audio=audio, sample_rate=16_000, num_channels=1))
        await asyncio.sleep(0.02 * TIME_SCALE)
    return first + len(words)


async def test_a_settings_update_mid_call_moves_the_session_to_the_new_setup() -> None:
    async with Emulator(emulator_config()) as emu:
        service = services.ours(emu)
        async with Rig([service]) as rig:
            # A first turn: the handle after it is a resumable point to move from.
            await _first_turn(rig)
            delta = GeminiLiveLLMService.Settings(
                system_instruction="Be brief.", voice="Puck", temperature=0.3
            )
            await rig.queue(LLMUpdateSettingsFrame(delta=delta))
            await rig.wait(lambda: rig.count(SessionMovedFrame) >= 1)
            await rig.queue(InputTextRawFrame("hello there"))
            await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 2)
            await rig.queue(LLMSetToolsFrame(tools=services.LOOKUP))
            await rig.wait(lambda: rig.count(SessionMovedFrame) >= 2)
            await rig.queue(InputTextRawFrame("hello there"))
            await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 3)
        session = only_session(emu)
    reports = [f.report for f in rig.of(SessionMovedFrame)]
    assert [(r.reason, r.outcome) for r in reports] == [
        (MoveReason.CONFIG, MoveOutcome.RESUMED),
        (MoveReason.CONFIG, MoveOutcome.RESUMED),
    ]
    # Connections the service refused while the old one was open carry no setup of note.
    first, second, third = (c.setup for c in session.connections if c.refused is None)
    assert first is not None and second is not None and third is not None
    assert (first.system_instruction, first.voice, first.tools) == ("", "Charon", ())
    assert (second.system_instruction, second.voice, second.tools) == ("Be brief.", "Puck", ())
    # Generation settings as stock sends them: its default token limit, then the new temperature.
    assert first.generation == {"max_output_tokens": 4096}
    assert second.generation == third.generation == {"max_output_tokens": 4096, "temperature": 0.3}
    assert (third.system_instruction, third.voice, third.tools) == (
        "Be brief.",
        "Puck",
        ("lookup",),
    )
    served = [c.index for c in session.connections if c.refused is None]
    assert [t.connection for t in session.turns.values()] == served  # each on its setup
    assert rig.of(ErrorFrame, up=True) == []


async def test_manual_activity_survives_a_move_with_the_onset_kept() -> None:
    vad = GeminiVADParams(disabled=True)
    async with Emulator(emulator_config()) as emu:
        service = services.ours(emu, settings={"vad": vad})
        async with Rig([service]) as rig:
            await rig.context()
            # A first turn, for a handle to resume from.
            await rig.queue(UserStartedSpeakingFrame())
            seq = await _speak(rig, 1, ["hello", ""])
            await rig.queue(UserStoppedSpeakingFrame())
            await rig.wait(lambda: rig.count(GenerationEndedFrame) >= 1)
            await rig.wait(lambda: rig.count(SessionResumptionUpdateFrame) >= 1)
            # Before the pipeline's VAD says the user speaks: kept as the onset.
            seq = await _speak(rig, seq, ["are"])
            await rig.queue(UserStartedSpeakingFrame())
            seq = await _speak(rig, seq, ["you", ""])
            assert emu.faults.drop() == 1
            await rig.wait(lambda: rig.count(SessionMovedFrame) >= 1)
            seq = await _speak(rig, seq, ["there", ""])
            await rig.queue(UserStoppedSpeakingFrame())
            await rig.wait(lambda: rig.count(GenerationEndedFrame) >= 2)
        session = only_session(emu)
    (moved,) = rig.of(SessionMovedFrame)
    assert (moved.report.reason, moved.report.outcome) == (MoveReason.LOST, MoveOutcome.RESUMED)
    assert [t.user_text for t in session.turns.values()] == ["hello", "are you there"]
    reasons = [f.reason for f in rig.of(GenerationEndedFrame)]
    assert reasons == [GenerationEndReason.GENERATION_COMPLETE] * 2
    summary = emu.ledger.summary().sessions[session.session_id]
    assert_nothing_said_lost(summary)
    assert summary.answers_cut == ()
    # The new connection opened the activity again before the activity's audio replayed to it.
    replayed = [(m.kind, m.audio_seqs) for m in session.connections[1].client_messages]
    kinds = [kind for kind, _ in replayed]
    assert kinds.count("activity_start") == 1 and kinds[-1] == "activity_end"
    assert kinds.index("activity_start") < replayed.index(("audio", (3,)))
    assert rig.of(ErrorFrame, up=True) == []


async def test_malformed_input_frames_get_a_clear_non_fatal_error() -> None:
    async with Emulator(emulator_config()) as emu:
        service = services.ours(emu)
        async with Rig([service]) as rig:
            await rig.context()
            await rig.queue(
                InputAudioRawFrame(audio=b"\x00\x01\x02", sample_rate=16_000, num_channels=1)
            )
            for rate in (0, 1, 7, 100, 96_000):
                await rig.queue(
                    InputAudioRawFrame(audio=b"\x00\x00", sample_rate=rate, num_channels=1)
                )
            await rig.queue(InputAudioRawFrame(audio=b"\x00\x00", sample_rate=True, num_channels=1))
            await rig.queue(InputImageRawFrame(image=b"\x00" * 5, size=(4, 4), format="RGB"))
            await rig.wait(lambda: rig.count(ErrorFrame, up=True) >= 8)
            # The service goes on.
            await rig.queue(InputTextRawFrame("hello there"))
            await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 1)
    errors = rig.of(ErrorFrame, up=True)
    assert [e.fatal for e in errors] == [False] * 8
    assert "not whole PCM16 frames" in errors[0].error
    for error, rate in zip(errors[1:6], (0, 1, 7, 100, 96000), strict=True):
        assert f"sample_rate must be 8000..48000 Hz, not {rate}" in error.error
    assert "sample_rate must be an int (Hz), not bool" in errors[6].error
    assert "does not hold a RGB image of size (4, 4)" in errors[7].error
    # Nothing of the refused frames reached the model.
    (session,) = emu.ledger.sessions.values()
    assert not [m for c in session.connections for m in c.client_messages if m.kind == "audio"]


async def test_an_audio_frame_longer_than_the_input_buffer_gets_a_non_fatal_error() -> None:
    async with Emulator(emulator_config()) as emu:
        service = services.ours(emu, input_buffer=OutboxLimits(max_audio_seconds=1.0))
        async with Rig([service]) as rig:
            await rig.context()
            two_seconds = b"\x00\x00" * 32_000
            await rig.queue(
                InputAudioRawFrame(audio=two_seconds, sample_rate=16_000, num_channels=1)
            )
            await rig.wait(lambda: rig.count(ErrorFrame, up=True) >= 1)
            await rig.queue(InputTextRawFrame("hello there"))
            await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 1)
    (error,) = rig.of(ErrorFrame, up=True)
    assert not error.fatal and "audio frame not sent" in error.error


async def test_audio_at_any_rate_reaches_the_model_as_16_khz_mono() -> None:
    async with Emulator(emulator_config()) as emu:
        service = services.ours(emu)
        async with Rig([service]) as rig:
            await rig.context()
            # 200 ms of 48 kHz stereo in 20 ms frames (samples doubled for each channel).
            mono = user_audio(1, speech=True, ms=200)
            stereo = bytes(b for i in range(0, len(mono), 2) for b in mono[i : i + 2] * 2)
            upsampled = bytes(b for i in range(0, len(stereo), 4) for b in stereo[i : i + 4] * 3)
            for i in range(0, len(upsampled), 3840):
                chunk = upsampled[i : i + 3840]
                await rig.queue(InputAudioRawFrame(audio=chunk, sample_rate=48_000, num_channels=2))
            await rig.queue(InputTextRawFrame("hello there"))
            await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 1)
        session = only_session(emu)
    (connection,) = session.connections
    audio = [m for m in connection.client_messages if m.kind == "audio"]
    assert audio and all(t == "audio/pcm;rate=16000" for m in audio for t in m.mime_types)


async def test_a_refused_first_dial_is_retried_and_the_call_goes_on() -> None:
    """The first connection is retried as a move's attempts are (``resumption``'s delays):
    the refused dial is a non-fatal ErrorFrame, and the call goes on on the next one."""
    async with Emulator(emulator_config()) as emu:
        emu.faults.refuse_next(1)
        service = services.ours(emu)
        async with Rig([service]) as rig:
            await _first_turn(rig)
    assert len(emu.ledger.attempts) == 2
    (error,) = rig.of(ErrorFrame, up=True)
    assert "503" in error.error and service.is_usable
    assert rig.of(SessionLostFrame) == []


async def test_a_lost_session_pushes_session_lost_and_one_fatal_error() -> None:
    options = ResumptionOptions(deadline_margin=1.0, retry_delays=(0.0, 0.01), attempt_timeout=1.0)
    async with Emulator(emulator_config()) as emu:
        service = services.ours(emu, resumption=options, retry_budget=2)
        async with Rig([service]) as rig:
            await _first_turn(rig)
            emu.faults.refuse_next(10)
            emu.faults.drop()
            await rig.wait(lambda: rig.count(ErrorFrame, up=True) >= 1)
    assert rig.count(SessionLostFrame) == 1
    (error,) = rig.of(ErrorFrame, up=True)
    assert "session lost" in error.error
    assert rig.of(SessionMovedFrame) == []


async def test_end_frame_waits_for_the_answer_in_progress() -> None:
    async with Emulator(emulator_config(answer_chunks=30)) as emu:
        service = services.ours(emu)
        async with Rig([service]) as rig:
            await rig.queue(InputTextRawFrame("hello there"))
            await rig.wait(lambda: rig.count(TTSAudioRawFrame) >= 1)
            await rig.queue(EndFrame())
            await rig.wait(lambda: rig.count(EndFrame) >= 1)
        session = only_session(emu)
    (turn,) = session.turns.values()
    assert (turn.outcome, turn.delivered) == ("complete", 30)
    kinds = [type(f) for f in rig.down.frames]
    assert kinds.index(LLMFullResponseEndFrame) < kinds.index(EndFrame)


def test_the_resumption_frame_never_shows_its_handle() -> None:
    handle = "CiQ0ZjVmYjY4My1lNzQ0LTRmYTktOWVkNy1kZTI2Y2U5MjE0ZWUSC2F1ZGlvLWNoYXQ"
    frame = SessionResumptionUpdateFrame(resumable=True, handle=handle)
    assert handle not in repr(frame) and handle not in str(frame)
    assert frame.handle == handle


async def test_images_go_as_jpeg_at_most_once_a_second_and_appends_as_live_text() -> None:
    async with Emulator(emulator_config()) as emu:
        service = services.ours(emu)
        async with Rig([service]) as rig:
            await rig.context()
            image = bytes(range(48))  # 4 x 4 RGB
            for _ in range(3):
                await rig.queue(InputImageRawFrame(image=image, size=(4, 4), format="RGB"))
            messages = [{"role": "user", "content": "hello there"}]
            await rig.queue(LLMMessagesAppendFrame(messages=messages, run_llm=True))
            await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 1)
        session = only_session(emu)
    (connection,) = session.connections
    assert _kinds(connection) == ["video", "text"]
    (video,) = [m for m in connection.client_messages if m.kind == "video"]
    assert video.mime_types == ("image/jpeg",)
    assert [t.user_text for t in session.turns.values()] == ["hello there"]
    assert rig.of(ErrorFrame, up=True) == []


def test_grounding_metadata_becomes_a_search_response() -> None:
    metadata = {
        "search_entry_point": {"rendered_content": "<div>chips</div>"},
        "grounding_chunks": [{"web": {"uri": "https://example.org", "title": "Example"}}],
        "grounding_supports": [
            {
                "segment": {"text": "Sunny in Paris."},
                "grounding_chunk_indices": [0],
                "confidence_scores": [0.9],
            }
        ],
    }
    frame = search_response(metadata, "Sunny in Paris today.")
    assert frame.search_result == "Sunny in Paris today."
    assert frame.rendered_content == "<div>chips</div>"
    (origin,) = frame.origins
    assert (origin.site_uri, origin.site_title) == ("https://example.org", "Example")
    assert [(r.text, r.confidence) for r in origin.results] == [("Sunny in Paris.", [0.9])]


def test_usage_counts_tool_prompts_as_input_and_thoughts_as_output() -> None:
    usage = token_usage(
        {
            "prompt_token_count": 10,
            "tool_use_prompt_token_count": 2,
            "response_token_count": 5,
            "thoughts_token_count": 3,
            "prompt_tokens_details": [{"modality": "AUDIO", "token_count": 7}],
        }
    )
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (12, 8, 20)
    assert (usage.reasoning_tokens, usage.input_audio_tokens, usage.output_audio_tokens) == (
        3,
        7,
        None,
    )


async def test_a_system_message_in_the_first_context_is_in_the_setup_that_answers() -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hello there"},
    ]
    async with Emulator(emulator_config()) as emu:
        service = services.ours(emu)
        async with Rig([service]) as rig:
            await rig.queue(LLMContextFrame(LLMContext(messages=messages)))
            await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 1)
        sessions = list(emu.ledger.sessions.values())
    # Nothing had been said: the session moved to the new setup before the first turn.
    (moved,) = rig.of(SessionMovedFrame)
    assert moved.report.reason is MoveReason.CONFIG
    answered = [(s, t) for s in sessions for t in s.turns.values()]
    assert len(answered) == 1
    session, turn = answered[0]
    assert turn.user_text == "hello there"
    setup = session.connections[turn.connection].setup
    assert setup is not None and setup.system_instruction == "Be brief."
    assert rig.of(ErrorFrame, up=True) == []


async def test_without_inference_on_the_first_context_it_is_seeded_quietly() -> None:
    history = [
        {"role": "user", "content": "my name is Ada"},
        {"role": "assistant", "content": "hello Ada"},
    ]
    async with Emulator(emulator_config()) as emu:
        service = services.ours(emu, inference_on_context_initialization=False)
        async with Rig([service]) as rig:
            await rig.queue(LLMContextFrame(LLMContext(messages=history)))
            await rig.queue(InputTextRawFrame("hello there"))
            await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 1)
        session = only_session(emu)
    (connection,) = session.connections
    (seed,) = [m for m in connection.client_messages if m.kind == "client_content"]
    assert seed.turns == (("user", "my name is Ada"), ("model", "hello Ada"))
    assert not seed.turn_complete
    assert [t.user_text for t in session.turns.values()] == ["hello there"]


async def test_a_pipeline_interruption_stops_the_bots_audio_once() -> None:
    async with Emulator(emulator_config(answer_chunks=40)) as emu:
        service = services.ours(emu)
        log = PushLog()
        log.source = service
        async with Rig([service], observers=[log]) as rig:
            await rig.queue(InputTextRawFrame("hello there"))
            await rig.wait(lambda: rig.count(TTSAudioRawFrame) >= 2)
            await rig.queue(InterruptionFrame())
            await rig.wait(lambda: rig.count(GenerationEndedFrame) >= 1)
    kinds = [type(f) for f in log.frames()]
    # Stopped as the interruption passes (as stock), not again when the answer ends.
    assert kinds.count(TTSStoppedFrame) == 1
    assert kinds.index(TTSStoppedFrame) == kinds.index(InterruptionFrame) - 1
    assert kinds.count(LLMFullResponseEndFrame) == 1


async def test_a_result_for_a_call_a_move_orphaned_is_logged_not_raised() -> None:
    release = asyncio.Event()

    async def slow_lookup(params: FunctionCallParams) -> None:
        await release.wait()
        await params.result_callback({"flight": "LH 123"})

    async with Emulator(emulator_config()) as emu:
        service = services.ours(emu, tools=True)
        service.register_function("lookup", slow_lookup)
        async with Rig([service]) as rig:
            await rig.queue(InputTextRawFrame("please lookup flights"))
            await rig.wait(lambda: rig.count(FunctionCallInProgressFrame) >= 1)
            # The handles expire and the connection drops: the session is rebuilt, and the
            # call it issued is gone with the old server session.
            emu.faults.expire_handles()
            emu.faults.drop()
            await rig.wait(lambda: rig.count(SessionMovedFrame) >= 1)
            release.set()
            await rig.wait(lambda: rig.count(FunctionCallResultFrame) >= 1)
            await rig.queue(InputTextRawFrame("hello there"))
            await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 1)
        sessions = list(emu.ledger.sessions.values())
    (moved,) = rig.of(SessionMovedFrame)
    assert moved.report.outcome is MoveOutcome.REBUILT
    assert len(sessions) == 2  # the rebuilt one is a fresh server session
    (ended, *_) = rig.of(GenerationEndedFrame)
    assert ended.reason is GenerationEndReason.TOOL_CALL_ORPHANED
    # The orphaned result went nowhere; the rebuilt session asked again and was answered.
    old, new = sessions
    assert not any(m.kind == "tool_response" for c in old.connections for m in c.client_messages)
    assert all(s.stranded_tool_responses == [] for s in sessions)
    assert new.tool_calls_issued and new.unawaited_tool_responses == []
    assert rig.of(ErrorFrame, up=True) == []


async def test_a_settings_update_gemini_cannot_take_is_refused_and_the_session_goes_on() -> None:
    Settings = GeminiLiveLLMService.Settings
    refused = [
        (Settings(voice=123), "voice must be a voice name"),  # type: ignore[arg-type]
        (Settings(system_instruction="x" * 20_000_000), "over the 15728640 a setup carries"),
        (Settings(system_instruction=[1, 2]), "system_instruction must be a str, not list"),  # type: ignore[arg-type]
        (Settings(modalities="smell"), "modalities must be a GeminiModalities"),  # type: ignore[arg-type]
        (Settings(language="klingon"), "language must be a Language or a BCP-47 tag"),
        (Settings(temperature="hot"), "the setup would not build"),  # type: ignore[arg-type]
    ]
    warnings: list[str] = []
    sink = logger.add(lambda m: warnings.append(m.record["message"]), level="WARNING")
    try:
        async with Emulator(emulator_config()) as emu:
            service = services.ours(emu)
            async with Rig([service]) as rig:
                await _first_turn(rig)
                for delta, _ in refused:
                    await rig.queue(LLMUpdateSettingsFrame(delta=delta))
                await rig.wait(lambda: rig.count(ErrorFrame, up=True) >= len(refused))
                # Fixed for the session: warned once each, not applied.
                for model in ("models/other-model", "models/another-model"):
                    await rig.queue(LLMUpdateSettingsFrame(delta=Settings(model=model)))
                await rig.queue(LLMUpdateSettingsFrame(delta=Settings(language="fr-FR")))
                # A good update still moves the session to its setup, which answers.
                await rig.queue(LLMUpdateSettingsFrame(delta=Settings(temperature=0.3)))
                await rig.wait(lambda: rig.count(SessionMovedFrame) >= 1)
                await rig.queue(InputTextRawFrame("hello there"))
                await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 2)
            session = only_session(emu)
    finally:
        logger.remove(sink)
    errors = rig.of(ErrorFrame, up=True)
    assert [e.fatal for e in errors] == [False] * len(refused)
    for error, (_, text) in zip(errors, refused, strict=True):
        assert "settings update refused, the session keeps its setup" in error.error
        assert text in error.error, error.error
    assert rig.of(SessionLostFrame) == []
    assert sum("model=" in w and "not applied" in w for w in warnings) == 1
    assert sum("language='fr-FR' not applied" in w for w in warnings) == 1
    assert (service.settings.model, service.settings.language) == (services.MODEL, "en-US")
    first, second = (c.setup for c in session.connections if c.refused is None)
    assert first is not None and second is not None
    assert (second.model, second.voice, second.system_instruction) == (
        first.model,
        first.voice,
        first.system_instruction,
    )
    assert second.generation == {"max_output_tokens": 4096, "temperature": 0.3}
    served = [c.index for c in session.connections if c.refused is None]
    assert [t.connection for t in session.turns.values()] == served


async def test_a_setup_the_service_refuses_is_rolled_back_with_a_non_fatal_error() -> None:
    # A voice name the up-front checks cannot know is wrong: the service refuses the setup.
    async with Emulator(emulator_config()) as emu:
        service = services.ours(emu)
        async with Rig([service]) as rig:
            await _first_turn(rig)
            delta = GeminiLiveLLMService.Settings(voice="Klingon")
            await rig.queue(LLMUpdateSettingsFrame(delta=delta))
            await rig.wait(lambda: rig.count(SessionMovedFrame) >= 1)
            await rig.queue(InputTextRawFrame("hello there"))
            await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 2)
        (session, _refused_fresh) = emu.ledger.sessions.values()
    (error,) = rig.of(ErrorFrame, up=True)
    assert not error.fatal
    assert "refused the updated setup" in error.error and "previous one" in error.error
    assert rig.of(SessionLostFrame) == []
    (report,) = [f.report for f in rig.of(SessionMovedFrame)]
    assert (report.reason, report.outcome) == (MoveReason.CONFIG, MoveOutcome.RESUMED)
    served = [c for c in session.connections if c.refused is None]
    assert [c.setup.voice for c in served if c.setup is not None] == ["Charon", "Charon"]
    assert [t.outcome for t in session.turns.values()] == ["complete", "complete"]


async def test_cancelling_the_pipeline_while_it_dials_is_no_error() -> None:
    logged: list[tuple[str, str]] = []
    sink = logger.add(
        lambda m: logged.append((m.record["level"].name, m.record["message"])), level="DEBUG"
    )
    try:
        async with Emulator(emulator_config()) as emu:
            emu.faults.hang_next(1)  # the first dial gets no setupComplete
            service = services.ours(emu)
            async with Rig([service]) as rig:
                await until(lambda: len(emu.ledger.attempts) >= 1)
                await rig.cancel()
    finally:
        logger.remove(sink)
    assert rig.of(ErrorFrame, up=True) == []
    assert not [m for level, m in logged if level in ("ERROR", "CRITICAL")]
    assert any("connecting stopped by the pipeline's end" in m for _, m in logged)


async def test_an_instruction_the_service_refuses_on_resume_rebuilds_the_session() -> None:
    # Some models refuse a resume whose setup changes the instruction (1007): the session is
    # rebuilt with the new one (its conversation replayed), not lost.
    async with Emulator(emulator_config(instruction_change="refuse")) as emu:
        service = services.ours(emu)
        async with Rig([service]) as rig:
            await _first_turn(rig)
            delta = GeminiLiveLLMService.Settings(system_instruction="Be brief.")
            await rig.queue(LLMUpdateSettingsFrame(delta=delta))
            await rig.wait(lambda: rig.count(SessionMovedFrame) >= 1)
            await rig.queue(InputTextRawFrame("hello there"))
            await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 2)
        sessions = list(emu.ledger.sessions.values())
    (moved,) = rig.of(SessionMovedFrame)
    assert (moved.report.reason, moved.report.outcome) == (MoveReason.CONFIG, MoveOutcome.REBUILT)
    assert rig.of(SessionLostFrame) == [] and rig.of(ErrorFrame, up=True) == []
    _, new = sessions
    setup = new.connections[-1].setup
    assert setup is not None and setup.system_instruction == "Be brief."
    assert [t.user_text for t in new.turns.values()][-1].endswith("hello there")
