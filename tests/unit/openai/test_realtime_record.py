"""``RealtimeRecordCodec``: an OpenAI Realtime call's record to stored bytes and back."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet

from realtime_resumption.move_reports import HandleKind
from realtime_resumption.openai import FunctionTool, InputTranscription, SemanticVad, SessionConfig
from realtime_resumption.openai.conversation_state import HeldItem
from realtime_resumption.openai.realtime_record import (
    RealtimeInput,
    RealtimeRecord,
    RealtimeRecordCodec,
    RecordError,
)
from realtime_resumption.transport import ToolCall

SPEECH = bytes(range(256)) * 8


def record() -> RealtimeRecord:
    return RealtimeRecord(
        handle=None,
        handle_kind=HandleKind.NONE,
        handle_issued_at=None,
        input=(
            RealtimeInput.append(SPEECH),
            RealtimeInput({"type": "conversation.item.create", "item": {"id": "rr_1"}}),
        ),
        tool_calls=(ToolCall("call_1", "lookup", {"city": "Oslo"}),),
        conversation=(),
        setup=SessionConfig(
            instructions="Be brief.",
            tools=(FunctionTool("lookup", "Look it up."),),
            voice="marin",
            turn_detection=SemanticVad(eagerness="low"),
            transcription=InputTranscription("whisper-1", language="en"),
            temperature=0.7,
        ),
        saved_at=1234.5,
        items=(
            HeldItem("item_1", "user", text="pineapple", has_audio=True),
            HeldItem("item_2", "user", has_audio=True, transcript_pending=True, audio=SPEECH),
            HeldItem("item_3", "assistant", text="heard pine", response_id="r1", heard_ms=400),
            HeldItem("item_4", "function_call", call_id="call_1", name="lookup", arguments="{}"),
        ),
        answer=True,
    )


@pytest.mark.parametrize("key", [None, Fernet.generate_key()])
def test_a_record_comes_back_as_it_was_written(key: bytes | None) -> None:
    codec = RealtimeRecordCodec(key, session_key="call-1", writer="w1")
    stored = codec.encode(record())
    assert codec.decode(stored) == record()
    assert codec.writer([stored]) == "w1"
    assert (SPEECH in stored) is (key is None)  # encrypted: no speech in clear


def test_input_appended_as_parts_goes_on_the_record() -> None:
    codec = RealtimeRecordCodec(session_key="call-1")
    more = (RealtimeInput.append(b"\x01\x02"), RealtimeInput({"type": "response.create"}))
    parts = [codec.encode(record()), codec.encode_part(more, 2000.0)]
    decoded = codec.decode(parts)
    assert decoded.input == record().input + more and decoded.saved_at == 2000.0
    assert decoded.audio == SPEECH + b"\x01\x02"


def test_another_keys_record_and_a_bad_item_are_refused() -> None:
    stored = RealtimeRecordCodec(session_key="call-1").encode(record())
    with pytest.raises(RecordError, match="another session key"):
        RealtimeRecordCodec(session_key="call-2").decode(stored)
    bad = stored.replace(b'"kind":"assistant"', b'"kind":"wizard"')
    with pytest.raises(RecordError, match="corrupt"):
        RealtimeRecordCodec(session_key="call-1").decode(bad)


def test_an_append_is_sent_with_its_audio_in_base64() -> None:
    assert RealtimeInput.append(b"\x00\x01").wire() == {
        "type": "input_audio_buffer.append",
        "audio": "AAE=",
    }
    assert "x01" not in repr(RealtimeInput.append(b"\x00\x01"))  # the user's audio stays out
