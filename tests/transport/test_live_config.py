"""Construction options to the SDK's setup config, without a server."""

from __future__ import annotations

import pytest
from google.genai import types

from realtime_resumption.gemini import Credential
from realtime_resumption.gemini.live_models import non_blocking_functions
from realtime_resumption.gemini.live_options import LiveOptions, normalise_tools
from realtime_resumption.transport import ReconnectState, SessionUpdate


def test_the_default_setup_asks_for_handles_and_transcriptions() -> None:
    config = LiveOptions().live_connect_config()
    assert config.response_modalities == [types.Modality.AUDIO]
    assert config.session_resumption == types.SessionResumptionConfig()
    assert config.input_audio_transcription is not None
    assert config.output_audio_transcription is not None
    assert config.system_instruction is None and config.tools is None
    assert config.history_config is None


def test_every_option_reaches_the_setup() -> None:
    vad = types.RealtimeInputConfig(
        automatic_activity_detection=types.AutomaticActivityDetection(silence_duration_ms=300)
    )
    compression = types.ContextWindowCompressionConfig(sliding_window=types.SlidingWindow())
    options = LiveOptions(
        model="m",
        voice="Puck",
        language="en-US",
        response_modality="text",
        system_instruction="be brief",
        tools=normalise_tools([{"name": "lookup"}]),
        input_audio_transcription=False,
        realtime_input_config=vad,
        context_window_compression=compression,
        initial_history_in_client_content=True,
    )
    config = options.live_connect_config(handle="h", transparent=True)
    assert config.response_modalities == [types.Modality.TEXT]
    assert config.session_resumption == types.SessionResumptionConfig(handle="h", transparent=True)
    assert config.speech_config is not None and config.speech_config.language_code == "en-US"
    voice = config.speech_config.voice_config
    assert voice is not None and voice.prebuilt_voice_config is not None
    assert voice.prebuilt_voice_config.voice_name == "Puck"
    assert config.system_instruction == types.Content(
        role="system", parts=[types.Part(text="be brief")]
    )
    assert config.input_audio_transcription is None
    # Text responses have no audio to transcribe.
    assert config.output_audio_transcription is None
    assert config.realtime_input_config == vad
    assert config.context_window_compression == compression
    assert config.history_config == types.HistoryConfig(initial_history_in_client_content=True)
    assert config.tools is not None
    assert [d.name for d in config.tools[0].function_declarations or ()] == ["lookup"]


def test_tools_are_normalised_from_every_accepted_form() -> None:
    search = types.Tool(google_search=types.GoogleSearch())
    tools = normalise_tools(
        [
            search,
            types.FunctionDeclaration(name="a"),
            {"name": "b", "description": "B."},
            {"function_declarations": [{"name": "c"}]},
        ]
    )
    assert tools[0] == search
    assert [d.name for d in tools[1].function_declarations or ()] == ["c"]
    assert [d.name for d in tools[2].function_declarations or ()] == ["a", "b"]
    with pytest.raises(TypeError):
        normalise_tools(["lookup"])


def test_updates_change_only_what_they_name() -> None:
    options = LiveOptions(system_instruction="a", voice="Puck")
    updated = options.updated(SessionUpdate(instructions="b", tools=[{"name": "f"}]))
    assert (updated.system_instruction, updated.voice) == ("b", "Puck")
    assert len(updated.tools) == 1
    assert options.updated(SessionUpdate(tools=[])).tools == ()
    assert options.updated(SessionUpdate()) == options


def test_secrets_stay_out_of_reprs() -> None:
    credential = Credential("ya29.very-secret-token", 1.0)
    assert "very-secret" not in repr(credential)
    state = ReconnectState(resumption_handle="handle-that-is-secret")
    assert "that-is-secret" not in repr(state)


@pytest.mark.parametrize(
    ("behaviors", "blocking"),
    [
        ((), True),
        ((None, types.Behavior.BLOCKING), True),
        ((None, types.Behavior.NON_BLOCKING), False),
    ],
)
def test_a_function_declared_non_blocking_lets_the_model_talk_while_it_runs(
    behaviors: tuple[types.Behavior | None, ...], blocking: bool
) -> None:
    tools = normalise_tools(
        [types.FunctionDeclaration(name=f"f{i}", behavior=b) for i, b in enumerate(behaviors)]
    )
    # On a model whose calls block unless declared otherwise (every model before 3.8).
    non_blocking = non_blocking_functions(LiveOptions(tools=tools).tools, by_default=False)
    assert (not non_blocking) is blocking
