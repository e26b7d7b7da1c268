"""SessionConfig: checked when built, rendered in the GA and the beta spelling with the field
names the ``openai`` SDK's own types declare, and read back from a reported session."""

from __future__ import annotations

from typing import Any

import pytest
from openai.types.beta.realtime.session_update_event_param import Session as BetaSession
from openai.types.realtime.realtime_audio_config_input_param import RealtimeAudioConfigInputParam
from openai.types.realtime.realtime_audio_config_output_param import (
    RealtimeAudioConfigOutputParam,
)
from openai.types.realtime.realtime_session_create_request_param import (
    RealtimeSessionCreateRequestParam,
)

from realtime_resumption.openai.session_config import (
    AudioFormat,
    FunctionTool,
    InputTranscription,
    SemanticVad,
    ServerVad,
    SessionConfig,
)

FULL = SessionConfig(
    instructions="Be brief.",
    tools=(FunctionTool("lookup", "Find a record.", {"type": "object", "required": ["id"]}),),
    tool_choice="required",
    voice="marin",
    speed=1.25,
    input_format=AudioFormat("pcmu"),
    output_format=AudioFormat("pcma"),
    turn_detection=ServerVad(threshold=0.7, silence_duration_ms=800, idle_timeout_ms=6000),
    transcription=InputTranscription("gpt-4o-transcribe", language="de"),
    noise_reduction="far_field",
    output_modality="audio",
    max_output_tokens=1024,
)


def test_the_ga_session_nests_the_audio_settings_under_the_sdks_names() -> None:
    body = FULL.ga_session()
    assert set(body) <= set(RealtimeSessionCreateRequestParam.__annotations__)
    assert set(body["audio"]["input"]) <= set(RealtimeAudioConfigInputParam.__annotations__)
    assert set(body["audio"]["output"]) <= set(RealtimeAudioConfigOutputParam.__annotations__)
    assert body["type"] == "realtime"
    assert body["output_modalities"] == ["audio"]
    assert body["audio"]["input"]["format"] == {"type": "audio/pcmu"}
    assert body["audio"]["output"] == {
        "format": {"type": "audio/pcma"},
        "voice": "marin",
        "speed": 1.25,
    }
    assert body["audio"]["input"]["turn_detection"]["threshold"] == 0.7
    assert body["audio"]["input"]["transcription"] == {
        "model": "gpt-4o-transcribe",
        "language": "de",
    }
    assert body["audio"]["input"]["noise_reduction"] == {"type": "far_field"}
    assert body["tools"] == [
        {
            "type": "function",
            "name": "lookup",
            "description": "Find a record.",
            "parameters": {"type": "object", "required": ["id"]},
        }
    ]
    assert FULL.session_update("ga") == {"type": "session.update", "session": body}


def test_the_beta_session_is_flat_under_the_beta_names() -> None:
    config = SessionConfig(temperature=0.7, turn_detection=SemanticVad(eagerness="low"))
    body = config.beta_session()
    assert set(body) <= set(BetaSession.__annotations__)
    assert body["modalities"] == ["audio", "text"]
    assert body["input_audio_format"] == body["output_audio_format"] == "pcm16"
    assert body["temperature"] == 0.7
    assert body["turn_detection"] == {
        "type": "semantic_vad",
        "eagerness": "low",
        "create_response": True,
        "interrupt_response": True,
    }
    assert config.session_update("beta")["session"] == body


def test_turn_detection_and_transcription_turned_off_are_sent_as_null() -> None:
    """A new session has server VAD on: leaving the field out would not turn it off."""
    body = SessionConfig(turn_detection=None).ga_session()
    assert body["audio"]["input"]["turn_detection"] is None
    assert body["audio"]["input"]["transcription"] is None
    assert "turn_detection" in SessionConfig(turn_detection=None).beta_session()


def test_a_ga_session_with_a_temperature_is_refused() -> None:
    with pytest.raises(ValueError, match="GA session has no temperature"):
        SessionConfig(temperature=0.8).ga_session()
    with pytest.raises(ValueError, match="flavour"):
        SessionConfig().session_update("v2")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: SessionConfig(speed=2.0), "speed"),
        (lambda: SessionConfig(max_output_tokens=5000), "max_output_tokens"),
        (lambda: SessionConfig(max_output_tokens=0), "max_output_tokens"),
        (lambda: SessionConfig(temperature=0.2), "temperature"),
        (lambda: SessionConfig(tool_choice="always"), "tool_choice"),  # type: ignore[arg-type]
        (lambda: SessionConfig(voice=""), "voice"),
        (lambda: SessionConfig(output_modality="both"), "output_modality"),  # type: ignore[arg-type]
        (lambda: SessionConfig(noise_reduction="near"), "noise_reduction"),  # type: ignore[arg-type]
        (lambda: SessionConfig(tools=(FunctionTool("a"), FunctionTool("a"))), "share a name"),
        (lambda: ServerVad(threshold=1.5), "threshold"),
        (lambda: ServerVad(silence_duration_ms=-1), "silence_duration_ms"),
        (lambda: ServerVad(prefix_padding_ms=12.5), "prefix_padding_ms"),  # type: ignore[arg-type]
        (lambda: ServerVad(idle_timeout_ms=0), "idle_timeout_ms"),
        (lambda: SemanticVad(eagerness="eager"), "eagerness"),  # type: ignore[arg-type]
        (lambda: FunctionTool("get weather"), "function name"),
        (lambda: FunctionTool("x" * 65), "function name"),
        (lambda: FunctionTool("f", parameters=[]), "JSON Schema"),  # type: ignore[arg-type]
        (lambda: InputTranscription(""), "transcription model"),
        (lambda: AudioFormat("opus"), "audio encoding"),  # type: ignore[arg-type]
    ],
)
def test_invalid_values_are_refused_when_built(build: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build()


def test_audio_formats_in_both_spellings_and_their_byte_rates() -> None:
    assert AudioFormat.from_wire({"type": "audio/pcm", "rate": 24000}) == AudioFormat("pcm")
    assert AudioFormat.from_wire("g711_ulaw") == AudioFormat("pcmu")
    assert AudioFormat("pcm").bytes_per_ms == 48 and AudioFormat("pcma").bytes_per_ms == 8
    assert AudioFormat("pcmu").sample_rate == 8000
    with pytest.raises(ValueError, match="rate of 24000"):
        AudioFormat.from_wire({"type": "audio/pcm", "rate": 16000})
    with pytest.raises(ValueError, match="unknown audio format"):
        AudioFormat.from_wire("mp3")


@pytest.mark.parametrize("flavour", ["ga", "beta"])
def test_a_rendered_session_reads_back_as_the_same_configuration(flavour: Any) -> None:
    config = (
        FULL
        if flavour == "ga"
        else SessionConfig(
            instructions="x", temperature=1.0, turn_detection=SemanticVad(create_response=False)
        )
    )
    body = config.ga_session() if flavour == "ga" else config.beta_session()
    assert SessionConfig.from_session(body, flavour) == config


def test_a_reported_session_with_a_value_it_does_not_model_is_refused() -> None:
    body = SessionConfig().ga_session()
    body["audio"]["input"]["turn_detection"] = {"type": "push_to_talk"}
    with pytest.raises(ValueError, match="unknown turn detection"):
        SessionConfig.from_session(body, "ga")
    body = SessionConfig().ga_session() | {"tools": [{"type": "mcp", "server_label": "x"}]}
    with pytest.raises(ValueError, match="only function tools"):
        SessionConfig.from_session(body, "ga")


def test_tools_given_as_a_list_are_held_as_a_tuple() -> None:
    tools = [FunctionTool("a")]
    config = SessionConfig(tools=tools)  # type: ignore[arg-type]
    tools.append(FunctionTool("b"))
    assert config.tools == (FunctionTool("a"),)
    with pytest.raises(ValueError, match="FunctionTool values"):
        SessionConfig(tools=({"name": "a"},))  # type: ignore[arg-type]


def test_a_rendered_body_shares_nothing_with_the_configuration() -> None:
    body = FULL.ga_session()
    body["tools"][0]["parameters"]["required"].append("name")
    assert FULL.ga_session()["tools"][0]["parameters"] == {"type": "object", "required": ["id"]}
