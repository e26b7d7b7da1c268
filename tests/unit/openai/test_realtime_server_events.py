"""read_server_event: each modelled event, in both spellings, into its typed value; anything
else a documented fallback, never an exception.

Every well-formed event below is first validated by the ``openai`` SDK's own pydantic union
(GA ``openai.types.realtime.RealtimeServerEvent``, beta
``openai.types.beta.realtime.RealtimeServerEvent``), so the shapes are the service's.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from openai.types.beta.realtime import RealtimeServerEvent as BetaServerEvent
from openai.types.realtime import RealtimeServerEvent as GAServerEvent
from pydantic import TypeAdapter

from realtime_resumption.openai.realtime_server_events import (
    AudioDelta,
    AudioDone,
    BufferCleared,
    BufferCommitted,
    BufferTimeout,
    ContentPart,
    FunctionArgumentsDone,
    InputTranscriptCompleted,
    InputTranscriptDelta,
    InputTranscriptFailed,
    Item,
    ItemAnnounced,
    ItemDeleted,
    ItemTruncated,
    Malformed,
    OutputItem,
    OutputTextDelta,
    OutputTextDone,
    ResponseCreated,
    ResponseDone,
    ServerError,
    SessionEvent,
    SpeechStarted,
    SpeechStopped,
    Unknown,
    read_server_event,
)
from realtime_resumption.openai.session_config import SessionConfig
from realtime_resumption.transport import RealtimeLLMUsage, UsageModalityBreakdown

GA = TypeAdapter(GAServerEvent)
BETA = TypeAdapter(BetaServerEvent)
PCM = b"\x01\x00\x02\x00" * 8
IDS = {"response_id": "resp_1", "item_id": "item_2", "output_index": 0, "content_index": 0}
USER_ITEM = {
    "id": "item_1",
    "object": "realtime.item",
    "type": "message",
    "status": "completed",
    "role": "user",
    "content": [{"type": "input_audio", "transcript": None}],
}
CALL_ITEM = {
    "id": "item_3",
    "type": "function_call",
    "status": "completed",
    "call_id": "call_9",
    "name": "weather",
    "arguments": '{"city": "Oslo"}',
}
RESPONSE: dict[str, Any] = {
    "object": "realtime.response",
    "id": "resp_1",
    "status": "cancelled",
    "status_details": {"type": "cancelled", "reason": "turn_detected"},
    "output": [CALL_ITEM],
    "usage": {
        "total_tokens": 30,
        "input_tokens": 20,
        "output_tokens": 10,
        "input_token_details": {"cached_tokens": 4, "text_tokens": 5, "audio_tokens": 15},
        "output_token_details": {"text_tokens": 3, "audio_tokens": 7},
    },
}


def _ga(event: dict[str, Any]) -> dict[str, Any]:
    """``event`` with an ``event_id``, checked against the SDK's GA union."""
    event = {"event_id": "event_1", **event}
    GA.validate_python(event)
    return event


def _beta(event: dict[str, Any]) -> dict[str, Any]:
    event = {"event_id": "event_1", **event}
    BETA.validate_python(event)
    return event


GA_CASES: list[tuple[dict[str, Any], object]] = [
    (
        {"type": "conversation.item.added", "previous_item_id": None, "item": USER_ITEM},
        ItemAnnounced(
            "conversation.item.added",
            "added",
            Item("item_1", "message", "user", "completed", (ContentPart("input_audio"),)),
            None,
        ),
    ),
    (
        {"type": "conversation.item.done", "previous_item_id": "item_1", "item": CALL_ITEM},
        ItemAnnounced(
            "conversation.item.done",
            "done",
            Item(
                "item_3",
                "function_call",
                status="completed",
                call_id="call_9",
                name="weather",
                arguments='{"city": "Oslo"}',
            ),
            "item_1",
        ),
    ),
    (
        {
            "type": "conversation.item.truncated",
            "item_id": "i",
            "content_index": 0,
            "audio_end_ms": 250,
        },
        ItemTruncated("conversation.item.truncated", "i", 0, 250),
    ),
    (
        {"type": "conversation.item.deleted", "item_id": "i"},
        ItemDeleted("conversation.item.deleted", "i"),
    ),
    (
        {
            "type": "conversation.item.input_audio_transcription.delta",
            "item_id": "i",
            "content_index": 0,
            "delta": "hel",
        },
        InputTranscriptDelta("conversation.item.input_audio_transcription.delta", "i", 0, "hel"),
    ),
    (
        {"type": "conversation.item.input_audio_transcription.delta", "item_id": "i"},
        InputTranscriptDelta("conversation.item.input_audio_transcription.delta", "i", 0, ""),
    ),
    (
        {
            "type": "conversation.item.input_audio_transcription.completed",
            "item_id": "i",
            "content_index": 0,
            "transcript": "hello",
            "usage": {"type": "duration", "seconds": 1.0},
        },
        InputTranscriptCompleted(
            "conversation.item.input_audio_transcription.completed",
            "i",
            0,
            "hello",
            RealtimeLLMUsage(
                provider="openai_realtime",
                kind="input_transcription",
                phase="final",
                unit="duration_seconds",
                duration=1.0,
                provider_raw={"type": "duration", "seconds": 1.0},
            ),
        ),
    ),
    (
        {
            "type": "conversation.item.input_audio_transcription.failed",
            "item_id": "i",
            "content_index": 0,
            "error": {"code": "audio_unintelligible", "message": "no words"},
        },
        InputTranscriptFailed(
            "conversation.item.input_audio_transcription.failed",
            "i",
            0,
            "audio_unintelligible",
            "no words",
        ),
    ),
    (
        {"type": "input_audio_buffer.committed", "item_id": "i", "previous_item_id": "h"},
        BufferCommitted("input_audio_buffer.committed", "i", "h"),
    ),
    ({"type": "input_audio_buffer.cleared"}, BufferCleared("input_audio_buffer.cleared")),
    (
        {"type": "input_audio_buffer.speech_started", "item_id": "i", "audio_start_ms": 1200},
        SpeechStarted("input_audio_buffer.speech_started", "i", 1200),
    ),
    (
        {"type": "input_audio_buffer.speech_stopped", "item_id": "i", "audio_end_ms": 2400},
        SpeechStopped("input_audio_buffer.speech_stopped", "i", 2400),
    ),
    (
        {
            "type": "input_audio_buffer.timeout_triggered",
            "item_id": "i",
            "audio_start_ms": 100,
            "audio_end_ms": 6100,
        },
        BufferTimeout("input_audio_buffer.timeout_triggered", "i", 100, 6100),
    ),
    (
        {"type": "response.created", "response": {**RESPONSE, "status": "in_progress"}},
        ResponseCreated("response.created", "resp_1", "in_progress"),
    ),
    (
        {"type": "response.done", "response": RESPONSE},
        ResponseDone(
            "response.done",
            "resp_1",
            "cancelled",
            "turn_detected",
            RealtimeLLMUsage(
                provider="openai_realtime",
                kind="response",
                phase="final",
                unit="tokens",
                input_tokens=20,
                output_tokens=10,
                total_tokens=30,
                modality_breakdown=UsageModalityBreakdown(
                    input_text_tokens=5,
                    input_audio_tokens=15,
                    cached_tokens=4,
                    output_text_tokens=3,
                    output_audio_tokens=7,
                ),
                provider_raw=RESPONSE["usage"],
            ),
            ("item_3",),
        ),
    ),
    (
        {
            "type": "response.output_item.added",
            "response_id": "resp_1",
            "output_index": 1,
            "item": CALL_ITEM,
        },
        OutputItem(
            "response.output_item.added",
            "added",
            "resp_1",
            1,
            Item(
                "item_3",
                "function_call",
                status="completed",
                call_id="call_9",
                name="weather",
                arguments='{"city": "Oslo"}',
            ),
        ),
    ),
    (
        {"type": "response.output_audio.delta", **IDS, "delta": base64.b64encode(PCM).decode()},
        AudioDelta("response.output_audio.delta", "resp_1", "item_2", 0, PCM),
    ),
    (
        {"type": "response.output_audio.done", **IDS},
        AudioDone("response.output_audio.done", "resp_1", "item_2", 0),
    ),
    (
        {"type": "response.output_audio_transcript.delta", **IDS, "delta": "Hi "},
        OutputTextDelta(
            "response.output_audio_transcript.delta", "audio", "resp_1", "item_2", 0, "Hi "
        ),
    ),
    (
        {"type": "response.output_audio_transcript.done", **IDS, "transcript": "Hi there"},
        OutputTextDone(
            "response.output_audio_transcript.done", "audio", "resp_1", "item_2", 0, "Hi there"
        ),
    ),
    (
        {"type": "response.output_text.delta", **IDS, "delta": "Hi"},
        OutputTextDelta("response.output_text.delta", "text", "resp_1", "item_2", 0, "Hi"),
    ),
    (
        {"type": "response.output_text.done", **IDS, "text": "Hi."},
        OutputTextDone("response.output_text.done", "text", "resp_1", "item_2", 0, "Hi."),
    ),
    (
        {
            "type": "response.function_call_arguments.done",
            "response_id": "resp_1",
            "item_id": "item_3",
            "output_index": 0,
            "call_id": "call_9",
            "name": "weather",
            "arguments": "{}",
        },
        FunctionArgumentsDone(
            "response.function_call_arguments.done", "resp_1", "item_3", "call_9", "weather", "{}"
        ),
    ),
    (
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "code": "session_expired",
                "message": "Your session hit the maximum duration of 30 minutes.",
                "param": None,
                "event_id": None,
            },
        },
        ServerError(
            "error",
            "invalid_request_error",
            "session_expired",
            "Your session hit the maximum duration of 30 minutes.",
            None,
            None,
        ),
    ),
]


@pytest.mark.parametrize(("event", "expected"), GA_CASES, ids=[c[0]["type"] for c in GA_CASES])
def test_each_ga_event_reads_into_its_value(event: dict[str, Any], expected: object) -> None:
    frame = json.dumps(_ga(event))
    assert read_server_event(frame) == expected
    assert read_server_event(frame.encode()) == expected
    assert read_server_event(json.loads(frame)) == expected


BETA_CASES: list[tuple[dict[str, Any], type, dict[str, object]]] = [
    (
        {"type": "conversation.item.created", "previous_item_id": None, "item": USER_ITEM},
        ItemAnnounced,
        {"stage": "created"},
    ),
    (
        {"type": "response.audio.delta", **IDS, "delta": base64.b64encode(PCM).decode()},
        AudioDelta,
        {"audio": PCM},
    ),
    ({"type": "response.audio.done", **IDS}, AudioDone, {"item_id": "item_2"}),
    (
        {"type": "response.audio_transcript.delta", **IDS, "delta": "Hi"},
        OutputTextDelta,
        {"modality": "audio", "delta": "Hi"},
    ),
    (
        {"type": "response.audio_transcript.done", **IDS, "transcript": "Hi."},
        OutputTextDone,
        {"modality": "audio", "text": "Hi."},
    ),
    (
        {"type": "response.text.delta", **IDS, "delta": "Hi"},
        OutputTextDelta,
        {"modality": "text"},
    ),
    ({"type": "response.text.done", **IDS, "text": "Hi."}, OutputTextDone, {"modality": "text"}),
]


@pytest.mark.parametrize(
    ("event", "kind", "fields"), BETA_CASES, ids=[c[0]["type"] for c in BETA_CASES]
)
def test_the_beta_names_read_into_the_same_values(
    event: dict[str, Any], kind: type, fields: dict[str, object]
) -> None:
    value = read_server_event(json.dumps(_beta(event)))
    assert isinstance(value, kind)
    assert value.type == event["type"]  # type: ignore[attr-defined]
    assert {k: getattr(value, k) for k in fields} == fields


def test_a_session_event_carries_the_configuration_it_reports() -> None:
    config = SessionConfig(instructions="Be brief.", voice="verse")
    session = {"id": "sess_1", "model": "gpt-realtime", "expires_at": 1_800_000_000}
    ga = read_server_event(
        _ga({"type": "session.created", "session": {**session, **config.ga_session()}})
    )
    assert ga == SessionEvent(
        "session.created", True, "sess_1", "gpt-realtime", 1_800_000_000, config
    )
    beta = read_server_event(
        _beta({"type": "session.updated", "session": {**session, **config.beta_session()}}),
        "beta",
    )
    assert isinstance(beta, SessionEvent) and not beta.created and beta.config == config


def test_a_session_holding_what_the_configuration_does_not_model_keeps_its_id() -> None:
    body = {
        **SessionConfig().ga_session(),
        "id": "sess_1",
        "tools": [{"type": "mcp", "server_label": "docs", "server_url": "https://x"}],
    }
    value = read_server_event(_ga({"type": "session.updated", "session": body}))
    assert value == SessionEvent("session.updated", False, "sess_1", None, None, None)


@pytest.mark.parametrize(
    ("frame", "kind", "reason"),
    [
        ("{not json", None, "not JSON"),
        (b"\xff\xfe", None, "not JSON"),
        ("[1, 2]", None, "not a JSON object"),
        ('{"type": 7}', None, "no string 'type'"),
        (
            '{"type": "input_audio_buffer.speech_started", "item_id": "i"}',
            "input_audio_buffer.speech_started",
            "'audio_start_ms' must be an integer",
        ),
        (
            '{"type": "input_audio_buffer.speech_stopped", "item_id": "i", "audio_end_ms": true}',
            "input_audio_buffer.speech_stopped",
            "'audio_end_ms' must be an integer",
        ),
        (
            '{"type": "response.output_audio.delta", "response_id": "r", "item_id": "i", "content_index": 0, "delta": "@@"}',
            "response.output_audio.delta",
            "base64",
        ),
        (
            '{"type": "conversation.item.added", "item": {"id": "i", "type": "message", "content": "hi"}}',
            "conversation.item.added",
            "'item.content' must be a list",
        ),
        (
            '{"type": "conversation.item.done", "item": {"id": "i", "type": "function_call"}}',
            "conversation.item.done",
            "'call_id' must be a string",
        ),
        (
            '{"type": "response.done", "response": {"id": "r"}}',
            "response.done",
            "'status' must be a string",
        ),
        ('{"type": "error", "error": "boom"}', "error", "'error' must be an object"),
    ],
)
def test_a_malformed_frame_is_a_value_naming_what_was_wrong(
    frame: str | bytes, kind: str | None, reason: str
) -> None:
    value = read_server_event(frame)
    assert isinstance(value, Malformed) and value.type == kind
    assert reason in value.reason


def test_usage_by_tokens_and_usage_not_as_typed() -> None:
    event = {
        "type": "conversation.item.input_audio_transcription.completed",
        "item_id": "i",
        "content_index": 0,
        "transcript": "hi",
        "usage": {"type": "tokens", "input_tokens": 7, "output_tokens": 2, "total_tokens": 9},
    }
    value = read_server_event(_ga(event))
    assert isinstance(value, InputTranscriptCompleted) and value.usage is not None
    assert (value.usage.unit, value.usage.input_tokens, value.usage.total_tokens) == (
        "tokens",
        7,
        9,
    )
    # A figure that is not as typed costs the usage, never the event it rides on.
    done = {"type": "response.done", "response": {**RESPONSE, "usage": {"input_tokens": "7"}}}
    value = read_server_event(done)
    assert isinstance(value, ResponseDone) and value.usage is None and value.status == "cancelled"


def test_an_event_it_does_not_model_is_unknown() -> None:
    event = {"type": "rate_limits.updated", "rate_limits": []}
    assert read_server_event(json.dumps(_ga(event))) == Unknown("rate_limits.updated")
    assert read_server_event('{"type": "response.hologram.delta"}') == Unknown(
        "response.hologram.delta"
    )


def test_the_audio_of_a_delta_stays_out_of_its_repr() -> None:
    delta = next(e for e, _ in GA_CASES if e["type"] == "response.output_audio.delta")
    value = read_server_event(_ga(delta))
    assert isinstance(value, AudioDelta) and value.audio == PCM
    assert "audio=" not in repr(value)


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a decoded event: its fields, their fields, list elements."""
    found = [path] if path else []
    if isinstance(value, dict):
        for key, inner in value.items():
            found += _paths(inner, (*path, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found += _paths(inner, (*path, index))
    return found


def _with(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    """A copy of ``value`` with the place ``path`` replaced by ``new`` (removed if ``new`` is
    the removal marker)."""
    if not path:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    if len(path) == 1 and new is _REMOVE:
        del copy[path[0]]
    else:
        copy[path[0]] = _with(value[path[0]], path[1:], new)
    return copy


_REMOVE = object()
_REPLACEMENTS: tuple[object, ...] = (_REMOVE, None, True, 7, 1.5, "x", [], {}, [{}], {"id": 1})
"""A removal, and a value of every JSON type for a field of another type."""


def test_a_real_event_with_any_one_field_removed_or_replaced_never_makes_the_reader_raise() -> None:
    checked = 0
    for event, _ in GA_CASES:
        event = _ga(event)
        for path in _paths(event):
            if path == ("type",):
                continue
            for new in _REPLACEMENTS:
                value = read_server_event(_with(event, path, new))
                assert value.type == event["type"], (path, new)
                checked += 1
    assert checked > 1000
