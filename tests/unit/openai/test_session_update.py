"""``apply_update``: the provider-neutral session update on an OpenAI session configuration."""

from __future__ import annotations

import pytest

from realtime_resumption.openai.session_config import (
    FunctionTool,
    InputTranscription,
    SessionConfig,
)
from realtime_resumption.openai.session_update import apply_update, cache_busts, function_tool
from realtime_resumption.transport import GenerationSettings, SessionUpdate


def test_each_setting_given_replaces_its_own_and_none_leaves_it() -> None:
    base = SessionConfig(instructions="a", voice="alloy", temperature=0.8)
    new = apply_update(
        base,
        SessionUpdate(
            voice="verse",
            response_modality="text",
            tools=[{"name": "weather", "description": "d"}],
            generation=GenerationSettings(temperature=0.7, max_output_tokens=100),
        ),
    )
    assert new.instructions == "a" and new.voice == "verse" and new.output_modality == "text"
    assert new.tools == (FunctionTool("weather", "d"),)
    assert new.temperature == 0.7 and new.max_output_tokens == 100
    assert apply_update(new, SessionUpdate()) == new


def test_input_transcription_turns_on_with_a_default_model_and_keeps_a_chosen_one() -> None:
    on = apply_update(SessionConfig(), SessionUpdate(input_transcription=True))
    assert on.transcription == InputTranscription("whisper-1")
    chosen = SessionConfig(transcription=InputTranscription("gpt-4o-transcribe"))
    assert apply_update(chosen, SessionUpdate(input_transcription=True)) == chosen
    assert apply_update(chosen, SessionUpdate(input_transcription=False)).transcription is None


def test_settings_openai_lacks_are_refused_not_dropped() -> None:
    with pytest.raises(ValueError, match="top_p, seed"):
        apply_update(SessionConfig(), SessionUpdate(generation=GenerationSettings(top_p=1, seed=2)))
    with pytest.raises(ValueError, match="transcribes"):
        apply_update(SessionConfig(), SessionUpdate(output_transcription=False))
    with pytest.raises(TypeError):
        apply_update(SessionConfig(), "instructions")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        apply_update(SessionConfig(), SessionUpdate(tools="weather"))


def test_a_tool_is_a_function_tool_or_a_mapping_naming_a_function() -> None:
    assert function_tool({"type": "function", "name": "f"}) == FunctionTool("f")
    with pytest.raises(ValueError, match="function tools"):
        function_tool({"type": "web_search", "name": "f"})
    with pytest.raises(TypeError):
        function_tool(42)
    with pytest.raises(ValueError):
        function_tool({"description": "no name"})


def test_cache_busts_name_what_changed_of_the_prompt_prefix() -> None:
    a = SessionConfig(instructions="a")
    assert cache_busts(a, a) == []
    assert cache_busts(a, SessionConfig(instructions="b")) == ["instructions_changed"]
    both = SessionConfig(instructions="b", tools=(FunctionTool("f"),))
    assert cache_busts(a, both) == ["instructions_changed", "tools_changed"]
    assert cache_busts(a, SessionConfig(instructions="a", voice="verse")) == []
