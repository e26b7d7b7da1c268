"""The record a call keeps in the store: every part survives the round trip, encrypted or in
clear; what cannot be read is a clear ``RecordError``; it expires with its handle."""

from __future__ import annotations

import base64
import json

import pytest
from cryptography.fernet import Fernet
from google.genai import types

from realtime_resumption.gemini.live_options import HANDLE_VALIDITY, LiveOptions, normalise_tools
from realtime_resumption.gemini.messages import ClientMessage
from realtime_resumption.gemini.stored_session import (
    RECORD_VERSION,
    RecordCodec,
    RecordError,
    SessionSnapshot,
    Setup,
)
from realtime_resumption.move_reports import HandleKind
from realtime_resumption.transport import GenerationSettings, ReplayItem, ToolCall, ToolResult

CALL = "call-7"
HANDLE = "CiQ5ZTk3ZjVjNi1zZWNyZXQtcmVzdW1wdGlvbi1oYW5kbGUtMDAwMQ"
WORDS = "my card number is 4111"


def snapshot(handle: str | None = HANDLE, issued_at: float | None = 1000.0) -> SessionSnapshot:
    options = LiveOptions(
        model="gemini-live-2.5-flash-preview",
        voice="Puck",
        language="en-GB",
        system_instruction="be brief",
        tools=normalise_tools([{"name": "lookup", "description": "find flights"}]),
        generation=GenerationSettings(
            temperature=0.3,
            thinking=types.ThinkingConfig(thinking_budget=128),
            media_resolution=types.MediaResolution.MEDIA_RESOLUTION_LOW,
        ),
    )
    return SessionSnapshot(
        handle=handle,
        handle_kind=HandleKind.AFTER_TURN,
        handle_issued_at=issued_at,
        vertex=False,
        input=(
            ClientMessage.audio(b"\x01\x02" * 320),
            ClientMessage.text(WORDS),
            ClientMessage.content(
                (types.Content(role="user", parts=[types.Part(text="typed")]),), True
            ),
            ClientMessage.tool_response(
                (types.FunctionResponse(id="c1", name="lookup", response={"n": 2}),), 10
            ),
            ClientMessage.activity_start(),
            ClientMessage.activity_end(),
            ClientMessage.audio_stream_end(),
        ),
        tool_calls=(ToolCall("c2", "lookup", {"to": "Oslo"}),),
        conversation=(
            ReplayItem("user", text=WORDS),
            ReplayItem("model", tool_call=ToolCall("c0", "lookup", {"to": "Rome"})),
            ReplayItem("user", tool_result=ToolResult("c0", "lookup", {"flights": 1})),
            ReplayItem("model", text="one flight"),
        ),
        setup=Setup.of(options),
        saved_at=1001.5,
    )


@pytest.mark.parametrize("key", [None, Fernet.generate_key()])
def test_every_part_survives_the_round_trip(key: bytes | None) -> None:
    codec = RecordCodec(key, session_key=CALL)
    original = snapshot()
    restored = codec.decode(codec.encode(original))
    assert restored == original
    options = restored.setup.applied_to(LiveOptions())
    assert options.voice == "Puck" and options.system_instruction == "be brief"
    assert options.tools[0].function_declarations[0].name == "lookup"  # type: ignore[index]
    assert options.generation.temperature == 0.3
    assert options.live_connect_config().thinking_config == types.ThinkingConfig(
        thinking_budget=128
    )


@pytest.mark.parametrize("key", [None, Fernet.generate_key()])
def test_parts_appended_carry_the_input_on(key: bytes | None) -> None:
    codec = RecordCodec(key, session_key=CALL)
    base = snapshot()
    more = (ClientMessage.audio(b"\x05" * 640), ClientMessage.text("and then"))
    restored = codec.decode(
        [
            codec.encode(base),
            codec.encode_part(more[:1], 1002.0),
            codec.encode_part(more[1:], 1003.0),
        ]
    )
    assert restored.input == base.input + more
    assert restored.saved_at == 1003.0
    assert restored.handle == base.handle
    with pytest.raises(RecordError, match="not a session record"):
        codec.decode([codec.encode_part(more, 1002.0)])  # a part is no record
    with pytest.raises(RecordError, match="not a session record"):
        codec.decode([codec.encode(base), codec.encode(base)])  # nor a record a part
    if key is None:
        with pytest.raises(RecordError, match="corrupt"):
            codec.decode([codec.encode(base), b"RRP\x03\x00" + _framed(b"{}")])
    with pytest.raises(RecordError, match="not a session record"):
        codec.decode([])


def test_an_encrypted_record_holds_neither_the_handle_nor_the_conversation() -> None:
    record = RecordCodec(Fernet.generate_key(), session_key=CALL).encode(snapshot())
    for secret in (HANDLE, WORDS, "Oslo", "be brief"):
        assert secret.encode() not in record
    clear = RecordCodec(session_key=CALL).encode(snapshot())
    assert HANDLE.encode() in clear  # the README says so: without a key, all is in clear


def test_a_rotated_key_still_reads_records_of_the_old_one() -> None:
    old, new = Fernet.generate_key(), Fernet.generate_key()
    record = RecordCodec(old, session_key=CALL).encode(snapshot())
    assert RecordCodec([new, old], session_key=CALL).decode(record) == snapshot()


def _body(record: bytes) -> bytes:
    return record[5:]


def _framed(head: bytes, media: bytes = b"") -> bytes:
    """A clear body: its JSON's length, the JSON, the media."""
    return len(head).to_bytes(4, "big") + head + media


@pytest.mark.parametrize(
    ("record", "key", "match"),
    [
        (b"", None, "not a session record"),
        (b'{"handle": "x"}', None, "not a session record"),
        (b"RRS\x02\x00{}", None, "format version 2; this version reads 3"),
        (b"RRS\x04\x00{}", None, "format version 4; this version reads 3"),
        (b"RRS\x03\x00{not json", None, "corrupt"),
        (b"RRS\x03\x00" + _framed(b"{not json"), None, "corrupt"),
        (
            b"RRS\x03\x00" + _framed(json.dumps({"key": CALL, "handle": 5}).encode()),
            None,
            "corrupt",
        ),
        (b"RRS\x03\x00" + _framed(json.dumps({"handle": None}).encode()), None, "corrupt"),
        (b"RRS\x03\x00" + _framed(b"[" * 100_000 + b"]" * 100_000), None, "corrupt"),
        (b"RRS\x03\x07{}", None, "unknown record encryption"),
        (b"RRS\x03\x01gAAAAA", None, "encrypted and no encryption_key"),
        (b"RRS\x03\x01gAAAAA", Fernet.generate_key(), "cannot be decrypted"),
        (b"RRS\x03\x00{}", Fernet.generate_key(), "in clear while an encryption_key is set"),
    ],
)
def test_a_record_it_cannot_read_is_a_clear_error(
    record: bytes, key: bytes | None, match: str
) -> None:
    with pytest.raises(RecordError, match=match):
        RecordCodec(key, session_key=CALL).decode(record)


def test_a_record_of_another_key_is_refused_and_says_nothing_of_its_content() -> None:
    record = RecordCodec(Fernet.generate_key(), session_key=CALL).encode(snapshot())
    with pytest.raises(RecordError) as error:
        RecordCodec(Fernet.generate_key(), session_key=CALL).decode(record)
    assert HANDLE not in str(error.value) and error.value.__cause__ is None


@pytest.mark.parametrize("key", [None, Fernet.generate_key()])
def test_a_record_or_a_part_written_for_another_session_key_is_refused(key: bytes | None) -> None:
    ours, theirs = RecordCodec(key, session_key=CALL), RecordCodec(key, session_key="call-8")
    part = ClientMessage.text(WORDS)
    with pytest.raises(RecordError, match="another session key, not 'call-8'") as error:
        theirs.decode(ours.encode(snapshot()))  # a record copied under another call's key
    assert HANDLE not in str(error.value) and WORDS not in str(error.value)
    with pytest.raises(RecordError, match="another session key"):
        theirs.decode([theirs.encode(snapshot()), ours.encode_part([part], 1002.0)])
    assert theirs.decode([theirs.encode(snapshot()), theirs.encode_part([part], 1002.0)])


def test_a_whole_record_names_its_writer() -> None:
    codec = RecordCodec(session_key=CALL, writer="owner-1")
    record = [codec.encode(snapshot()), codec.encode_part([ClientMessage.text(WORDS)], 1002.0)]
    assert codec.writer(record) == "owner-1"
    for unreadable in ([], [b"RRS"], [record[1]]):
        with pytest.raises(RecordError):
            codec.writer(unreadable)
    assert RecordCodec(session_key=CALL).decode(record).saved_at == 1002.0  # read by any
    assert (
        RecordCodec(session_key=CALL).writer([RecordCodec(session_key=CALL).encode(snapshot())])
        is None
    )


def test_a_bad_key_is_refused_at_once_and_never_shown() -> None:
    with pytest.raises(ValueError, match="Fernet key") as error:
        RecordCodec("not-a-key-at-all", session_key=CALL)
    assert "not-a-key" not in str(error.value)
    assert "encrypted=True" in repr(RecordCodec(Fernet.generate_key(), session_key=CALL))


def test_the_version_is_the_records_fifth_byte_header() -> None:
    record = RecordCodec(session_key=CALL).encode(snapshot())
    assert record[:4] == b"RRS" + bytes((RECORD_VERSION,))


def test_no_repr_holds_the_handle_whole() -> None:
    text = repr(snapshot())
    assert HANDLE not in text and HANDLE[:4] in text


def test_the_record_expires_with_its_handle() -> None:
    snap = snapshot(issued_at=1000.0)
    gemini = HANDLE_VALIDITY["gemini"]
    assert snap.ttl(1000.0 + 60) == pytest.approx(gemini - 60)
    assert snap.handle_valid(1000.0 + gemini - 1)
    assert not snap.handle_valid(1000.0 + gemini)
    vertex = SessionSnapshot(**{**vars(snap), "vertex": True})
    assert vertex.ttl(1000.0) == HANDLE_VALIDITY["vertex"] == 86400.0
    assert gemini == 7200.0
    assert snap.ttl(1000.0 + gemini + 5) == 1.0  # past its handle: kept briefly, to rebuild
    without = snapshot(handle=None, issued_at=None)
    assert not without.handle_valid(1001.5)
    assert without.ttl(1001.5) == gemini


def test_the_input_s_audio_is_stored_as_sent_after_the_json_and_checked_on_reading() -> None:
    codec = RecordCodec(session_key=CALL)
    record = codec.encode(snapshot())
    assert b"\x01\x02" * 320 in record  # not base64: a third fewer bytes than in the JSON
    body = _body(record)
    head = body[: 4 + int.from_bytes(body[:4], "big")]
    header = b"RRS" + bytes((RECORD_VERSION, 0))
    for bad in (record[:-1], record + b"\x00", header + head):  # media cut, extra, missing
        with pytest.raises(RecordError, match="corrupt"):
            codec.decode(bad)
    assert codec.decode(record) == snapshot()


# -- records written before the record was split into its provider-neutral part
# (``session_record``) and Gemini's (``gemini.stored_session``): a format-version-3 record and
# a part appended to it, as this package wrote them, decode to what was saved.

RECORD = base64.b64decode(
    "UlJTAwAAAATHeyJrZXkiOiJjYWxsLTciLCJoYW5kbGUiOiJDaVE1WlRrM1pqVmpOaTF6WldOeVpYUXRjbVZ6ZFcx"
    "d2RHbHZiaTFvWVc1a2JHVXRNREF3TVEiLCJraW5kIjoiYWZ0ZXItdHVybiIsImlzc3VlZF9hdCI6MTAwMC4wLCJ2"
    "ZXJ0ZXgiOmZhbHNlLCJzYXZlZF9hdCI6MTAwMS41LCJpbnB1dCI6W3sia2luZCI6ImF1ZGlvIiwiYnl0ZXMiOjY0"
    "MCwibWltZSI6ImF1ZGlvL3BjbTtyYXRlPTE2MDAwIn0seyJraW5kIjoidGV4dCIsInRleHQiOiJteSBjYXJkIG51"
    "bWJlciBpcyA0MTExIn0seyJraW5kIjoiY29udGVudCIsInR1cm5zIjpbeyJwYXJ0cyI6W3sidGV4dCI6InR5cGVk"
    "In1dLCJyb2xlIjoidXNlciJ9XSwidHVybl9jb21wbGV0ZSI6dHJ1ZX0seyJraW5kIjoidG9vbF9yZXNwb25zZSIs"
    "InJlc3BvbnNlcyI6W3siaWQiOiJjMSIsIm5hbWUiOiJsb29rdXAiLCJyZXNwb25zZSI6eyJuIjoyfX1dLCJzaXpl"
    "IjoxMH0seyJraW5kIjoiYWN0aXZpdHlfc3RhcnQifSx7ImtpbmQiOiJhY3Rpdml0eV9lbmQifSx7ImtpbmQiOiJh"
    "dWRpb19zdHJlYW1fZW5kIn1dLCJ0b29sX2NhbGxzIjpbeyJpZCI6ImMyIiwibmFtZSI6Imxvb2t1cCIsImFyZ3Mi"
    "OnsidG8iOiJPc2xvIn19XSwiY29udmVyc2F0aW9uIjpbeyJyb2xlIjoidXNlciIsInRleHQiOiJteSBjYXJkIG51"
    "bWJlciBpcyA0MTExIn0seyJyb2xlIjoibW9kZWwiLCJ0b29sX2NhbGwiOnsiaWQiOiJjMCIsIm5hbWUiOiJsb29r"
    "dXAiLCJhcmdzIjp7InRvIjoiUm9tZSJ9fX0seyJyb2xlIjoidXNlciIsInRvb2xfcmVzdWx0Ijp7ImlkIjoiYzAi"
    "LCJuYW1lIjoibG9va3VwIiwicmVzcG9uc2UiOnsiZmxpZ2h0cyI6MX19fSx7InJvbGUiOiJtb2RlbCIsInRleHQi"
    "OiJvbmUgZmxpZ2h0In1dLCJzZXR1cCI6eyJtb2RlbCI6ImdlbWluaS1saXZlLTIuNS1mbGFzaC1wcmV2aWV3Iiwi"
    "dm9pY2UiOiJQdWNrIiwibGFuZ3VhZ2UiOiJlbi1HQiIsInJlc3BvbnNlX21vZGFsaXR5IjoiYXVkaW8iLCJzeXN0"
    "ZW1faW5zdHJ1Y3Rpb24iOiJiZSBicmllZiIsInRvb2xzIjpbeyJmdW5jdGlvbl9kZWNsYXJhdGlvbnMiOlt7ImRl"
    "c2NyaXB0aW9uIjoiZmluZCBmbGlnaHRzIiwibmFtZSI6Imxvb2t1cCJ9XX1dLCJnZW5lcmF0aW9uIjp7InRlbXBl"
    "cmF0dXJlIjowLjMsIm1lZGlhX3Jlc29sdXRpb24iOiJNRURJQV9SRVNPTFVUSU9OX0xPVyIsInRoaW5raW5nIjp7"
    "InRoaW5raW5nX2J1ZGdldCI6MTI4fX19LCJ3cml0ZXIiOiJvd25lci0xIn0BAgECAQIBAgECAQIBAgECAQIBAgEC"
    "AQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgEC"
    "AQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgEC"
    "AQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgEC"
    "AQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgEC"
    "AQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgEC"
    "AQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgEC"
    "AQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgEC"
    "AQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgEC"
    "AQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgECAQIBAgEC"
    "AQIBAgECAQIBAgECAQIBAgECAQIBAgEC"
)

PART = base64.b64decode(
    "UlJQAwAAAACDeyJrZXkiOiJjYWxsLTciLCJhdCI6MTAwMi4wLCJpbnB1dCI6W3sia2luZCI6ImF1ZGlvIiwiYnl0"
    "ZXMiOjMyMCwibWltZSI6ImF1ZGlvL3BjbTtyYXRlPTE2MDAwIn0seyJraW5kIjoidGV4dCIsInRleHQiOiJhbmQg"
    "dGhlbiJ9XX0DBAMEAwQDBAMEAwQDBAMEAwQDBAMEAwQDBAMEAwQDBAMEAwQDBAMEAwQDBAMEAwQDBAMEAwQDBAME"
    "AwQDBAMEAwQDBAMEAwQDBAMEAwQDBAMEAwQDBAMEAwQDBAMEAwQDBAMEAwQDBAMEAwQDBAMEAwQDBAMEAwQDBAME"
    "AwQDBAMEAwQDBAMEAwQDBAMEAwQDBAMEAwQDBAMEAwQDBAMEAwQDBAMEAwQDBAMEAwQDBAMEAwQDBAMEAwQDBAME"
    "AwQDBAMEAwQDBAMEAwQDBAMEAwQDBAMEAwQDBAMEAwQDBAMEAwQDBAMEAwQDBAMEAwQDBAMEAwQDBAMEAwQDBAME"
    "AwQDBAMEAwQDBAMEAwQDBAMEAwQDBAMEAwQDBAMEAwQDBAMEAwQDBAMEAwQDBAMEAwQDBAMEAwQDBAMEAwQDBA=="
)


def test_a_version_3_record_written_before_still_loads() -> None:
    codec = RecordCodec(session_key=CALL)
    assert codec.decode(RECORD) == snapshot()
    assert codec.writer([RECORD]) == "owner-1"
    stored = codec.decode([RECORD, PART])
    added = (ClientMessage.audio(b"\x03\x04" * 160), ClientMessage.text("and then"))
    assert stored.input == snapshot().input + added
    assert stored.saved_at == 1002.0
