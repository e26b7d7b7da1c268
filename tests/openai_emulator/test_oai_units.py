"""The pure pieces: the input buffer's server VAD, the session configuration, the answers."""

from __future__ import annotations

import pytest

from realtime_resumption.testing.openai_emulator import reply
from realtime_resumption.testing.openai_emulator.input_buffer import InputBuffer, VadStep
from realtime_resumption.testing.openai_emulator.protocol import (
    DEFAULT_TURN_DETECTION,
    ProtocolError,
    SessionConfig,
    spelt,
)

VAD = {**DEFAULT_TURN_DETECTION, "silence_duration_ms": 100, "prefix_padding_ms": 40}


def _feed(buffer: InputBuffer, loud: bool, seq: int, scale: float = 1.0) -> VadStep | None:
    return buffer.append(20, (seq,) if loud else (), (), loud=loud, detection=VAD, scale=scale)


def test_speech_starts_at_its_first_loud_audio_and_stops_after_the_silence() -> None:
    buffer = InputBuffer()
    steps = [_feed(buffer, False, 0), _feed(buffer, True, 1), _feed(buffer, True, 2)]
    # The start is that of the audio the buffer holds: the quiet frame before is padding.
    assert steps == [None, VadStep("started", 0), None]
    silent = [_feed(buffer, False, 0) for _ in range(5)]
    # The end is that of the audio committed: the 100 ms of silence that ended it included.
    assert silent == [None, None, None, None, VadStep("stopped", 160)]
    assert buffer.take() == ((1, 2), "")
    assert not buffer.speaking and buffer.buffered_ms == 0


def test_the_silence_is_scaled_with_the_clock() -> None:
    buffer = InputBuffer()
    _feed(buffer, True, 1, scale=0.1)
    assert _feed(buffer, False, 0, scale=0.1) == VadStep("stopped", 40)


def test_a_silence_of_0_ms_ends_the_speech_at_the_first_quiet_frame() -> None:
    buffer = InputBuffer()
    vad = {**VAD, "silence_duration_ms": 0}
    assert buffer.append(20, (1,), (), loud=True, detection=vad, scale=1) == VadStep("started", 0)
    assert buffer.append(20, (), (), loud=False, detection=vad, scale=1) == VadStep("stopped", 40)


def test_before_speech_only_the_prefix_padding_is_kept_and_the_start_includes_it() -> None:
    buffer = InputBuffer()
    for _ in range(10):
        _feed(buffer, False, 0)
    assert buffer.buffered_ms == 40
    # 200 ms of audio, the last 40 ms of it kept: speech at 200 ms starts them at 160 ms.
    assert _feed(buffer, True, 1) == VadStep("started", 160)


def test_without_turn_detection_the_buffer_only_fills() -> None:
    buffer = InputBuffer()
    steps = [buffer.append(20, (i,), (), loud=True, detection=None, scale=1) for i in range(5)]
    assert steps == [None] * 5 and buffer.speech == (0, 1, 2, 3, 4)
    assert buffer.clear() == (0, 1, 2, 3, 4) and buffer.speech == ()


def _session() -> SessionConfig:
    return SessionConfig(id="sess_1", model="gpt-realtime", expires_at=0)


def test_a_ga_update_nests_audio_and_a_beta_update_is_flat() -> None:
    session = _session()
    session.update(
        {
            "type": "realtime",
            "audio": {"output": {"voice": "marin"}, "input": {"turn_detection": None}},
        },
        "ga",
    )
    assert session.voice == "marin" and session.turn_detection is None
    wire = session.to_wire("beta")
    assert wire["voice"] == "marin" and "audio" not in wire
    session.update({"voice": "ash", "input_audio_transcription": {"model": "whisper-1"}}, "beta")
    ga = session.to_wire("ga")
    assert ga["audio"]["output"]["voice"] == "ash"
    assert ga["audio"]["input"]["transcription"] == {"model": "whisper-1"}


@pytest.mark.parametrize(
    "body",
    [
        {"audio": {}},
        {"type": "transcription"},
        {"type": "realtime", "tools": [{"description": "no name"}]},
        {"type": "realtime", "instructions": 5},
        {"type": "realtime", "audio": {"input": {"turn_detection": {"type": "push_to_talk"}}}},
        {"type": "realtime", "modalities": ["audio"]},
    ],
)
def test_a_bad_update_is_refused_whole(body: dict[str, object]) -> None:
    session = _session()
    with pytest.raises(ProtocolError):
        session.update(body, "ga")
    assert session == _session()


def test_the_beta_surface_refuses_a_ga_shaped_update() -> None:
    session = _session()
    with pytest.raises(ProtocolError, match=r"Unknown parameter: 'session\.type'"):
        session.update({"type": "realtime", "instructions": "x"}, "beta")
    assert session == _session()


def test_beta_spells_the_renamed_events_and_drops_item_done() -> None:
    assert spelt("response.output_audio.delta", "beta") == "response.audio.delta"
    assert spelt("conversation.item.added", "beta") == "conversation.item.created"
    assert spelt("conversation.item.done", "beta") is None
    assert spelt("conversation.item.done", "ga") == "conversation.item.done"


def test_the_answer_depends_on_what_the_conversation_holds() -> None:
    assert reply("hello", [], []) == "heard hello"
    assert reply("please recall", ["pineapple", "mango"], []) == (
        "heard please recall, recall pineapple mango"
    )
    assert reply("", [], ["sunny"]) == "heard nothing, result sunny"
