"""Bad input is answered with the API's ``error`` event; the session stays up and serves on."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from realtime_resumption.testing.openai_emulator import OpenAIEmulator

from .oai_helpers import config, connect, until

BAD: list[tuple[str | bytes, str]] = [
    ("{not json", "invalid_json"),
    (b"\x00\x01", "invalid_json"),
    ("[1, 2]", "invalid_type"),
    ('{"event_id": "e"}', "missing_required_parameter"),
    ('{"type": "session.explode"}', "invalid_value"),
    (
        '{"type": "session.update", "session": {"instructions": "no type"}}',
        "missing_required_parameter",
    ),
    (
        '{"type": "session.update", "session": {"type": "realtime", "audio": {"output": {"voice": "nobody"}}}}',
        "invalid_value",
    ),
    (
        '{"type": "session.update", "session": {"type": "realtime", "audio": {"input": {"turn_detection": {"threshold": 7}}}}}',
        "invalid_value",
    ),
    (
        '{"type": "session.update", "session": {"type": "realtime", "output_modalities": "audio"}}',
        "invalid_value",
    ),
    (
        '{"type": "session.update", "session": {"type": "realtime", "audio": {"input": {"turn_detection": {"silence_duration_ms": "long"}}}}}',
        "invalid_value",
    ),
    (
        '{"type": "session.update", "session": {"type": "realtime", "audio": {"input": {"transcription": 5}}}}',
        "invalid_type",
    ),
    (
        '{"type": "session.update", "session": {"type": "realtime", "voice": "ash"}}',
        "unknown_parameter",
    ),
    (
        '{"type": "session.update", "session": {"type": "realtime", "audio": {"output": {"volume": 2}}}}',
        "unknown_parameter",
    ),
    ('{"type": "input_audio_buffer.append"}', "missing_required_parameter"),
    ('{"type": "input_audio_buffer.append", "audio": 12}', "invalid_type"),
    ('{"type": "input_audio_buffer.append", "audio": "***"}', "invalid_value"),
    (
        json.dumps(
            {"type": "input_audio_buffer.append", "audio": base64.b64encode(b"odd").decode()}
        ),
        "invalid_value",
    ),
    ('{"type": "input_audio_buffer.commit"}', "input_audio_buffer_commit_empty"),
    (
        '{"type": "conversation.item.create", "item": {"type": "message", "role": "robot", "content": []}}',
        "invalid_value",
    ),
    (
        '{"type": "conversation.item.create", "item": {"type": "message", "role": "user", "content": [{"type": "output_text", "text": "x"}]}}',
        "invalid_value",
    ),
    (
        '{"type": "conversation.item.create", "item": {"type": "function_call_output", "call_id": "call_nope", "output": "x"}}',
        "invalid_tool_call_id",
    ),
    (
        '{"type": "conversation.item.create", "previous_item_id": "item_nope", "item": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "x"}]}}',
        "item_not_found",
    ),
    (
        '{"type": "conversation.item.truncate", "item_id": "item_nope", "content_index": 0, "audio_end_ms": 0}',
        "item_not_found",
    ),
    (
        '{"type": "conversation.item.truncate", "item_id": "x", "content_index": "0", "audio_end_ms": 0}',
        "invalid_type",
    ),
    ('{"type": "conversation.item.delete", "item_id": "item_nope"}', "item_delete_invalid_item_id"),
    ('{"type": "conversation.item.retrieve", "item_id": "item_nope"}', "item_not_found"),
    ('{"type": "response.cancel"}', "response_cancel_not_active"),
    ('{"type": "response.create", "response": 5}', "invalid_type"),
    ('{"type": "output_audio_buffer.clear"}', "invalid_value"),
]


@pytest.mark.parametrize(
    ("frame", "code"), BAD, ids=[code + str(i) for i, (_, code) in enumerate(BAD)]
)
async def test_bad_input_gets_an_error_event_and_the_session_serves_on(
    frame: str | bytes, code: str
) -> None:
    async with OpenAIEmulator(config()) as emu, connect(emu) as conn:
        await until(conn, "session.created")
        await conn.send_raw(frame)
        error = (await until(conn, "error"))[-1]
        assert error.error.code == code
        assert error.error.type == "invalid_request_error" and error.error.message
        # Still serving: a good event after it is answered.
        await conn.session.update(session={"type": "realtime", "instructions": "after"})
        assert (await until(conn, "session.updated"))[-1].session.instructions == "after"
    assert emu.ledger.sessions[0].errors[0][0] == code
    assert emu.ledger.sessions[0].close_code == 1000


async def test_the_error_names_the_client_event_it_answers() -> None:
    async with OpenAIEmulator(config()) as emu, connect(emu) as conn:
        await until(conn, "session.created")
        await conn.send({"type": "response.cancel", "event_id": "evt_mine"})
        error: Any = (await until(conn, "error"))[-1]
        assert error.error.event_id == "evt_mine"


async def test_a_rejected_update_changes_nothing() -> None:
    async with OpenAIEmulator(config()) as emu, connect(emu) as conn:
        await until(conn, "session.created")
        await conn.send_raw(
            json.dumps(
                {
                    "type": "session.update",
                    "session": {
                        "type": "realtime",
                        "instructions": "half applied?",
                        "audio": {"output": {"voice": "nobody"}},
                    },
                }
            )
        )
        await until(conn, "error")
        await conn.session.update(session={"type": "realtime"})
        session = (await until(conn, "session.updated"))[-1].session
        assert session.instructions == "" and session.audio.output.voice == "alloy"
