"""The emulator's pure parts: audio identity, the wire format, the model's rules, the config."""

from __future__ import annotations

import base64
import json

import pytest

from realtime_resumption.testing.emulator import (
    EmulatorConfig,
    answer_chunk_id,
    answer_chunk_ids,
    answer_text_ids,
    called_functions,
    user_audio,
    user_audio_seqs,
    wire,
)
from realtime_resumption.testing.emulator.audio import UserAudioDecoder, answer_audio, rms
from realtime_resumption.testing.emulator.listener import LiveConnections
from realtime_resumption.testing.emulator.snapshot import AnswerProgress, SessionState, Snapshot


def test_user_audio_carries_seq_and_word() -> None:
    data = user_audio(123456, word="weather", ms=20)
    assert len(data) == 16_000 * 20 // 1000 * 2
    chunks = UserAudioDecoder().feed(data)
    assert [(c.seq, c.word) for c in chunks] == [(123456, "weather")]
    assert user_audio_seqs(user_audio(7, speech=False)) == [7]


def test_speech_is_loud_and_silence_is_quiet() -> None:
    assert rms(user_audio(1)) > 2000
    assert rms(user_audio(1, speech=False, word="quiet")) < 20


def test_decoder_finds_chunks_split_and_joined_across_messages() -> None:
    stream = b"".join(user_audio(s, word="w" * (s % 3)) for s in range(10))
    decoder = UserAudioDecoder()
    seqs: list[int] = []
    for cut in range(0, len(stream), 333):  # odd sizes split headers and the magic itself
        seqs += [c.seq for c in decoder.feed(stream[cut : cut + 333])]
    assert seqs == list(range(10))


def test_foreign_audio_carries_nothing() -> None:
    assert user_audio_seqs(bytes(640)) == []
    assert answer_chunk_id(user_audio(3)) is None
    assert answer_chunk_id(b"\x01\x02") is None


def test_answer_chunk_ids() -> None:
    chunk = answer_audio(12, 34, ms=40)
    assert len(chunk) == 24_000 * 40 // 1000 * 2
    assert answer_chunk_id(chunk) == (12, 34)
    joined = chunk + answer_audio(12, 35, ms=40)
    assert answer_chunk_ids(joined[5:] + joined[:5]) == [(12, 35)]
    assert answer_chunk_ids(joined) == [(12, 34), (12, 35)]


def test_user_audio_rejects_what_it_cannot_carry() -> None:
    with pytest.raises(ValueError):
        user_audio(-1)
    with pytest.raises(ValueError):
        user_audio(1, word="x" * 300)
    with pytest.raises(ValueError):
        user_audio(1, ms=1, word="long enough to overflow a one millisecond chunk")


def test_tool_rule() -> None:
    functions = ["get_weather", "book", "get_weather"]
    assert called_functions("What's the GET_WEATHER like? book it", functions) == [
        "get_weather",
        "book",
    ]
    assert called_functions("bookshelf", functions) == []
    assert answer_text_ids("[3.0] [3.1] ") == [(3, 0), (3, 1)]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(50, "50s"), (0.5, "0.500s"), (1.000340012, "1.000340012s"), (0.0005, "0.000500s"), (0, "0s")],
)
def test_duration_strings(seconds: float, text: str) -> None:
    assert wire.format_duration(seconds) == text


def test_setup_in_both_spellings() -> None:
    camel = {
        "setup": {
            "model": "models/m",
            "generationConfig": {
                "responseModalities": ["TEXT"],
                "speechConfig": {"voiceConfig": {"prebuiltVoiceConfig": {"voiceName": "Puck"}}},
            },
            "systemInstruction": {"parts": [{"text": "be brief"}]},
            "tools": [{"functionDeclarations": [{"name": "f"}]}],
            "sessionResumption": {"handle": "h", "transparent": True},
            "realtimeInputConfig": {
                "automaticActivityDetection": {"disabled": True},
                "activityHandling": "NO_INTERRUPTION",
            },
            "inputAudioTranscription": {},
        }
    }
    snake = {
        "setup": {
            "model": "models/m",
            "generation_config": {
                "response_modalities": ["TEXT"],
                "speech_config": {
                    "voice_config": {"prebuilt_voice_config": {"voice_name": "Puck"}}
                },
            },
            "system_instruction": {"parts": [{"text": "be brief"}]},
            "tools": [{"function_declarations": [{"name": "f"}]}],
            "session_resumption": {"handle": "h", "transparent": True},
            "realtime_input_config": {
                "automatic_activity_detection": {"disabled": True},
                "activity_handling": "NO_INTERRUPTION",
            },
            "input_audio_transcription": {},
        }
    }
    a = wire.parse_client_message(json.dumps(camel))
    b = wire.parse_client_message(json.dumps(snake).encode())
    assert a == b
    assert isinstance(a, wire.Setup)
    assert a.text_modality and a.functions == ("f",) and a.system_instruction == "be brief"
    assert a.response_modalities == ("TEXT",) and a.voice == "Puck"
    assert a.resumption == wire.Resumption("h", True)
    assert not a.automatic_activity_detection and not a.interrupts
    assert a.input_transcription and not a.output_transcription


def test_empty_session_resumption_means_enabled_without_handle() -> None:
    setup = wire.parse_client_message('{"setup": {"model": "m", "sessionResumption": {}}}')
    assert isinstance(setup, wire.Setup) and setup.resumption == wire.Resumption(None, False)
    setup = wire.parse_client_message('{"setup": {"model": "m"}}')
    assert isinstance(setup, wire.Setup) and setup.resumption is None


def test_realtime_input_both_alphabets_and_spellings() -> None:
    raw = bytes(range(250, 256)) * 2
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        for key, blob_key in (("realtime_input", "mime_type"), ("realtimeInput", "mimeType")):
            text = encode(raw).decode().rstrip("=")
            msg = wire.parse_client_message(
                json.dumps({key: {"audio": {"data": text, blob_key: "audio/pcm;rate=16000"}}})
            )
            assert msg == wire.RealtimeInput((wire.Audio(raw, "audio/pcm;rate=16000"),))


def test_tool_response_and_context_update() -> None:
    msg = wire.parse_client_message(
        '{"toolResponse": {"function_responses": [{"id": "a", "name": "f", "response": {}}]}}'
    )
    assert msg == wire.ToolResponse((wire.FunctionResponse("a", "f"),))
    msg = wire.parse_client_message(
        '{"contextUpdate": {"systemInstruction": {"parts": [{"text": "x"}]},'
        ' "tools": {"tools": [{"functionDeclarations": [{"name": "g"}]}]}}}'
    )
    assert msg == wire.ContextUpdate("x", ("g",))


def test_client_content_turns_and_inline_audio() -> None:
    audio = base64.urlsafe_b64encode(user_audio(5)).decode()
    msg = wire.parse_client_message(
        json.dumps(
            {
                "client_content": {
                    "turns": [
                        {"role": "user", "parts": [{"text": "my name is Ada"}]},
                        {"role": "model", "parts": [{"text": "Hello"}, {"text": "Ada"}]},
                        {
                            "role": "user",
                            "parts": [
                                {"inline_data": {"data": audio, "mime_type": "audio/pcm"}},
                                {"inlineData": {"data": "AAAA", "mimeType": "image/jpeg"}},
                            ],
                        },
                    ],
                    "turnComplete": True,
                }
            }
        )
    )
    assert msg == wire.ClientContent(
        text="my name is Ada Hello Ada",
        turn_complete=True,
        turns=(("user", "my name is Ada"), ("model", "Hello Ada"), ("user", "")),
        audio=(wire.Audio(user_audio(5), "audio/pcm"),),
    )


@pytest.mark.parametrize(
    "raw",
    [
        "not json",
        b"\xff\xfe",
        "[1]",
        '{"bogus": {}}',
        '{"setup": {"model": "m"}, "client_content": {}}',
        '{"setup": {}}',
        '{"realtime_input": {"audio": {"data": "***"}}}',
        '{"realtime_input": {"unknown_field": 1}}',
        '{"client_content": {"turns": 3}}',
        '{"client_content": {"turns": [{"parts": [{"inlineData": {"data": "***"}}]}]}}',
        '{"setup": {"model": "m", "generationConfig": {"speechConfig": {"voiceConfig":'
        ' {"prebuiltVoiceConfig": {"voiceName": 7}}}}}}',
        '{"setup": {"model": "m", "tools": [{"functionDeclarations": [{}]}]}}',
    ],
)
def test_rejected_client_messages(raw: str | bytes) -> None:
    with pytest.raises(wire.WireError):
        wire.parse_client_message(raw)


def test_resumption_update_is_proto3_json() -> None:
    assert wire.resumption_update(None, False) == {"sessionResumptionUpdate": {}}
    assert wire.resumption_update("h", True, 4) == {
        "sessionResumptionUpdate": {
            "newHandle": "h",
            "resumable": True,
            "lastConsumedClientMessageIndex": "4",
        }
    }
    assert wire.go_away(None) == {"goAway": {}}


def test_restoring_a_snapshot_does_not_continue_the_answer() -> None:
    snapshot = Snapshot(
        consumed_audio=(1, 2),
        answer=AnswerProgress(turn=4, user_text="hi", planned=10, produced=3),
    )
    state = SessionState.restore(snapshot)
    assert state.answer is None
    assert state.history[-1].outcome == "cut" and state.history[-1].produced == 3
    state.consumed_audio.append(3)
    assert snapshot.consumed_audio == (1, 2)


@pytest.mark.parametrize(
    "changes",
    [
        {"profile": "other"},
        {"time_scale": 0},
        {"answer_chunks": 0},
        {"chunk_ms": 0},
        {"handle_delay": (0.5, 0.1)},
        {"refuse_close_code": 99},
        {"rotate_every": 0},
        {"notice": -1},
        {"hang_limit": 0},
        {"instruction_change": "maybe"},
    ],
)
def test_config_validation(changes: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        EmulatorConfig(**changes)  # type: ignore[arg-type]


class _Served:
    def drop(self) -> None:
        raise AssertionError("nothing drops it here")


async def test_a_connection_whose_finish_fails_is_no_longer_served() -> None:
    """A failing ``finish`` (a fault in recording the end) is the handler's error, and the
    connection still leaves the live set: ``wait_none`` returns, ``drop_all`` reaches no
    zombie."""
    live = LiveConnections[_Served]()

    async def run() -> None:
        pass

    async def finish() -> None:
        raise RuntimeError("recording the end failed")

    with pytest.raises(RuntimeError, match="recording the end failed"):
        await live.serve(_Served(), run, finish)
    await live.wait_none(1.0)
    assert list(live) == []
