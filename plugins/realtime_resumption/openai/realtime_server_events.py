"""OpenAI Realtime server events read into typed values: one frame in, one value out.

:func:`read_server_event` takes a frame (text, bytes or an already decoded object) and gives
one of the values below. GA and beta spell some events differently (the ``openai`` SDK's GA
and beta event types; LiveKit 1.8's ``_AZURE_EVENT_MAPPING``, ``_realtime/openai.py``, maps the
same pairs); both spellings read into the same value, which keeps the wire name in ``type``:

- ``conversation.item.added`` and ``.done`` (GA) / ``conversation.item.created`` (beta):
  :class:`ItemAnnounced`, ``stage`` ``added``/``done``/``created``.
- ``response.output_audio.*`` / ``response.audio.*``: :class:`AudioDelta`, :class:`AudioDone`.
- ``response.output_audio_transcript.*`` / ``response.audio_transcript.*`` and
  ``response.output_text.*`` / ``response.text.*``: :class:`OutputTextDelta`,
  :class:`OutputTextDone` (``modality`` says which).

Field names and which are required follow the ``openai`` SDK 3.63's models under
``openai/types/realtime/`` (GA) and ``openai/types/beta/realtime/`` (beta); the reader needs
only the fields it keeps, and ignores the rest, so a field the service adds later changes
nothing.

The reader never raises. A frame that is not a JSON object with a string ``type``, or an
event of a modelled type that lacks a field the value needs (or has it of the wrong type),
is :class:`Malformed` (its ``type`` when it had one, and why); an event of any other type is
:class:`Unknown` (its ``type``). What to do with either is the caller's decision: the
service's own events are never malformed, so a :class:`Malformed` says the connection is not
what it claims to be.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from realtime_resumption.openai.session_config import Flavour, SessionConfig
from realtime_resumption.transport import RealtimeLLMUsage, UsageModalityBreakdown

# --- conversation items -------------------------------------------------------------------------


@dataclass(frozen=True)
class ContentPart:
    """One part of a message item (``RealtimeConversationItem*Message.Content``):
    ``input_text``/``input_audio``/``input_image`` (user), ``output_text``/``output_audio``
    (GA assistant) or ``text``/``audio`` (beta assistant)."""

    type: str
    text: str | None = None
    transcript: str | None = None
    """Of an audio part: the input transcription (user) or the answer's transcript."""


@dataclass(frozen=True)
class Item:
    """A conversation item (``openai.types.realtime.ConversationItem``) as the server states it.

    ``type`` is ``message`` (with ``role`` and ``content``), ``function_call`` (``call_id``,
    ``name``, ``arguments``) or ``function_call_output`` (``call_id``, ``output``); other item
    types (MCP) keep only ``id`` and ``type``. The server never sends audio bytes in an item
    (``ConversationItemAdded``: "except for audio data").
    """

    id: str
    type: str
    role: str | None = None
    status: str | None = None
    content: tuple[ContentPart, ...] = ()
    call_id: str | None = None
    name: str | None = None
    arguments: str | None = None
    output: str | None = None


# --- events -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SessionEvent:
    """``session.created`` (``created``) or ``session.updated``: the session as it now is.

    ``config`` is None when the session holds something :class:`SessionConfig` does not model
    (an MCP tool, a format it does not know); ``id``, ``expires_at`` and ``model`` are still
    read (``expires_at``: Unix seconds, openai/openai-realtime-api-beta issue 23)."""

    type: str
    created: bool
    id: str | None
    model: str | None
    expires_at: int | None
    config: SessionConfig | None


@dataclass(frozen=True)
class ItemAnnounced:
    """An item entered or finished in the conversation, after ``previous_item_id`` (None: it
    is first). ``added`` then ``done`` (GA; an answer's item is ``added`` empty and ``done``
    whole), or ``created`` once (beta)."""

    type: str
    stage: Literal["added", "done", "created"]
    item: Item
    previous_item_id: str | None


@dataclass(frozen=True)
class ItemTruncated:
    """An assistant item's audio was cut at ``audio_end_ms`` (``ConversationItemTruncatedEvent``;
    the server drops the transcript the user did not hear)."""

    type: str
    item_id: str
    content_index: int
    audio_end_ms: int


@dataclass(frozen=True)
class ItemDeleted:
    """``conversation.item.deleted``."""

    type: str
    item_id: str


@dataclass(frozen=True)
class InputTranscriptDelta:
    """Part of a user item's input transcription (its ``delta`` may be absent: "")."""

    type: str
    item_id: str
    content_index: int
    delta: str


@dataclass(frozen=True)
class InputTranscriptCompleted:
    """A user item's whole input transcription: it may come before or after the answer
    ("Transcription runs asynchronously with Response creation"); with its usage, billed by the
    transcription model (tokens, or seconds of audio), when the service gave it."""

    type: str
    item_id: str
    content_index: int
    transcript: str
    usage: RealtimeLLMUsage | None = None


@dataclass(frozen=True)
class InputTranscriptFailed:
    """The transcription of a user item failed: its words exist only as its audio."""

    type: str
    item_id: str
    content_index: int
    code: str | None
    message: str | None


@dataclass(frozen=True)
class BufferCommitted:
    """The input buffer became the user item ``item_id`` (by the client's commit or the server's
    VAD), placed after ``previous_item_id``."""

    type: str
    item_id: str
    previous_item_id: str | None


@dataclass(frozen=True)
class BufferCleared:
    """``input_audio_buffer.cleared``: the client's clear took effect."""

    type: str


@dataclass(frozen=True)
class SpeechStarted:
    """Server VAD heard speech from ``audio_start_ms`` (milliseconds of all audio appended in
    the session, prefix padding included) that will be the item ``item_id``."""

    type: str
    item_id: str
    audio_start_ms: int


@dataclass(frozen=True)
class SpeechStopped:
    """Server VAD heard the speech end at ``audio_end_ms`` (same time base); the commit of
    ``item_id`` follows."""

    type: str
    item_id: str
    audio_end_ms: int


@dataclass(frozen=True)
class BufferTimeout:
    """``input_audio_buffer.timeout_triggered`` (server_vad ``idle_timeout_ms``): the silent
    audio from ``audio_start_ms`` to ``audio_end_ms`` is committed as ``item_id``."""

    type: str
    item_id: str
    audio_start_ms: int
    audio_end_ms: int


@dataclass(frozen=True)
class ResponseCreated:
    """An answer started (``status`` ``in_progress``)."""

    type: str
    response_id: str
    status: str


@dataclass(frozen=True)
class ResponseDone:
    """An answer ended: ``status`` ``completed``, ``cancelled`` (``reason``
    ``turn_detected``/``client_cancelled``), ``incomplete`` or ``failed``; with its usage
    (``RealtimeResponseUsage``, the whole payload in ``provider_raw``; None when absent or not
    as the SDK types it) and the ids of the items it produced."""

    type: str
    response_id: str
    status: str
    reason: str | None
    usage: RealtimeLLMUsage | None
    output_item_ids: tuple[str, ...]


@dataclass(frozen=True)
class OutputItem:
    """``response.output_item.added``/``.done``: the item a response produces, at
    ``output_index`` (it ties an item to its response; ``done`` also comes for a cut one)."""

    type: str
    stage: Literal["added", "done"]
    response_id: str
    output_index: int
    item: Item


@dataclass(frozen=True)
class AudioDelta:
    """A piece of an answer's audio, decoded (in the session's output format)."""

    type: str
    response_id: str
    item_id: str
    content_index: int
    audio: bytes = field(repr=False)


@dataclass(frozen=True)
class AudioDone:
    """The audio of an answer's part ended (also when the answer was cut)."""

    type: str
    response_id: str
    item_id: str
    content_index: int


@dataclass(frozen=True)
class OutputTextDelta:
    """A piece of an answer's words: its audio's transcript (``modality`` ``audio``) or its
    text (``text``)."""

    type: str
    modality: Literal["audio", "text"]
    response_id: str
    item_id: str
    content_index: int
    delta: str


@dataclass(frozen=True)
class OutputTextDone:
    """An answer part's whole transcript or text."""

    type: str
    modality: Literal["audio", "text"]
    response_id: str
    item_id: str
    content_index: int
    text: str


@dataclass(frozen=True)
class FunctionArgumentsDone:
    """``response.function_call_arguments.done``: a call's arguments, whole (JSON text as the
    model wrote it: it may not parse)."""

    type: str
    response_id: str
    item_id: str
    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ServerError:
    """``error`` (``RealtimeErrorEvent``): ``code`` such as ``session_expired``,
    ``conversation_already_has_active_response``, ``invalid_tool_call_id``; ``event_id`` is
    the client event it answers, when known. Most leave the session open."""

    type: str
    error_type: str
    code: str | None
    message: str
    param: str | None
    event_id: str | None


@dataclass(frozen=True)
class Unknown:
    """An event of a type this reader does not model (``rate_limits.updated``,
    ``response.content_part.*``, MCP events, a type the service adds later)."""

    type: str


@dataclass(frozen=True)
class Malformed:
    """A frame that is no event (``type`` None), or an event of a modelled type that lacks a
    field its value needs; ``reason`` says what was wrong."""

    type: str | None
    reason: str


ServerEvent: TypeAlias = (
    SessionEvent
    | ItemAnnounced
    | ItemTruncated
    | ItemDeleted
    | InputTranscriptDelta
    | InputTranscriptCompleted
    | InputTranscriptFailed
    | BufferCommitted
    | BufferCleared
    | SpeechStarted
    | SpeechStopped
    | BufferTimeout
    | ResponseCreated
    | ResponseDone
    | OutputItem
    | AudioDelta
    | AudioDone
    | OutputTextDelta
    | OutputTextDone
    | FunctionArgumentsDone
    | ServerError
    | Unknown
    | Malformed
)


# --- the reader ---------------------------------------------------------------------------------


class _Missing(Exception):
    """A field the value needs is absent or of the wrong type (caught in the reader)."""


def read_server_event(
    frame: str | bytes | Mapping[str, Any], flavour: Flavour = "ga"
) -> ServerEvent:
    """The typed value of one server frame; never raises (see the module documentation).

    ``flavour`` is the spelling of the session objects in ``session.*`` events (the event
    names of both spellings are read whatever it is)."""
    if isinstance(frame, Mapping):
        event: Any = frame
    else:
        try:
            event = json.loads(frame)
        except (ValueError, UnicodeDecodeError):
            return Malformed(None, "not JSON")
    if not isinstance(event, Mapping):
        return Malformed(None, "not a JSON object")
    kind = event.get("type")
    if not isinstance(kind, str):
        return Malformed(None, "no string 'type'")
    parse = _PARSERS.get(kind)
    if parse is None:
        return Unknown(kind)
    try:
        return parse(kind, event, flavour)
    except _Missing as exc:
        return Malformed(kind, str(exc))


def _str(event: Mapping[str, Any], name: str) -> str:
    value = event.get(name)
    if not isinstance(value, str):
        raise _Missing(f"'{name}' must be a string")
    return value


def _opt_str(event: Mapping[str, Any], name: str) -> str | None:
    value = event.get(name)
    if value is not None and not isinstance(value, str):
        raise _Missing(f"'{name}' must be a string or null")
    return value


def _int(event: Mapping[str, Any], name: str) -> int:
    value = event.get(name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise _Missing(f"'{name}' must be an integer")
    return value


def _opt_int(event: Mapping[str, Any], name: str) -> int | None:
    value = event.get(name)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise _Missing(f"'{name}' must be an integer or null")
    return value


def _obj(event: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = event.get(name)
    if not isinstance(value, Mapping):
        raise _Missing(f"'{name}' must be an object")
    return value


def _item(body: Mapping[str, Any]) -> Item:
    kind = _str(body, "type")
    parts = []
    if kind == "message":
        content = body.get("content") or []
        if not isinstance(content, list):
            raise _Missing("'item.content' must be a list")
        for part in content:
            if not isinstance(part, Mapping):
                raise _Missing("'item.content' must hold objects")
            parts.append(
                ContentPart(
                    type=_str(part, "type"),
                    text=_opt_str(part, "text"),
                    transcript=_opt_str(part, "transcript"),
                )
            )
    calls = kind in ("function_call", "function_call_output")
    return Item(
        id=_str(body, "id"),
        type=kind,
        role=_opt_str(body, "role") if kind == "message" else None,
        status=_opt_str(body, "status"),
        content=tuple(parts),
        call_id=_str(body, "call_id") if calls else None,
        name=_opt_str(body, "name") if kind == "function_call" else None,
        arguments=_opt_str(body, "arguments") if kind == "function_call" else None,
        output=_opt_str(body, "output") if kind == "function_call_output" else None,
    )


def _session(kind: str, event: Mapping[str, Any], flavour: Flavour) -> SessionEvent:
    session = _obj(event, "session")
    try:
        config: SessionConfig | None = SessionConfig.from_session(session, flavour)
    except (ValueError, TypeError):
        config = None
    return SessionEvent(
        kind,
        created=kind == "session.created",
        id=_opt_str(session, "id"),
        model=_opt_str(session, "model"),
        expires_at=_opt_int(session, "expires_at"),
        config=config,
    )


def _announced(kind: str, event: Mapping[str, Any], flavour: Flavour) -> ItemAnnounced:
    stage: Literal["added", "done", "created"] = (
        "added" if kind.endswith("added") else "done" if kind.endswith("done") else "created"
    )
    return ItemAnnounced(
        kind, stage, _item(_obj(event, "item")), _opt_str(event, "previous_item_id")
    )


def _usage(body: object) -> RealtimeLLMUsage | None:
    """A response's usage (``RealtimeResponseUsage``: totals, and per-modality details)."""
    if not isinstance(body, Mapping):
        return None
    inputs = body.get("input_token_details")
    outputs = body.get("output_token_details")
    inputs = inputs if isinstance(inputs, Mapping) else {}
    outputs = outputs if isinstance(outputs, Mapping) else {}
    return RealtimeLLMUsage(
        provider="openai_realtime",
        kind="response",
        phase="final",
        unit="tokens",
        input_tokens=_opt_int(body, "input_tokens"),
        output_tokens=_opt_int(body, "output_tokens"),
        total_tokens=_opt_int(body, "total_tokens"),
        modality_breakdown=UsageModalityBreakdown(
            input_text_tokens=_opt_int(inputs, "text_tokens"),
            input_audio_tokens=_opt_int(inputs, "audio_tokens"),
            input_image_tokens=_opt_int(inputs, "image_tokens"),
            cached_tokens=_opt_int(inputs, "cached_tokens"),
            output_text_tokens=_opt_int(outputs, "text_tokens"),
            output_audio_tokens=_opt_int(outputs, "audio_tokens"),
        ),
        provider_raw=dict(body),
    )


def _lenient(
    read: Callable[[object], RealtimeLLMUsage | None], body: object
) -> RealtimeLLMUsage | None:
    """Usage read, or None when it is not as the SDK types it: a figure never costs the event
    it rides on (a lost ``response.done`` would leave its answer under way forever)."""
    try:
        return read(body)
    except _Missing:
        return None


def _transcription_usage(body: object) -> RealtimeLLMUsage | None:
    """An input transcription's usage
    (``ConversationItemInputAudioTranscriptionCompletedEvent.usage``): tokens, or a duration."""
    if not isinstance(body, Mapping):
        return None
    common: dict[str, Any] = {
        "provider": "openai_realtime",
        "kind": "input_transcription",
        "phase": "final",
        "provider_raw": dict(body),
    }
    if body.get("type") == "duration":
        seconds = body.get("seconds")
        if not isinstance(seconds, int | float) or isinstance(seconds, bool):
            raise _Missing("'usage.seconds' must be a number")
        return RealtimeLLMUsage(unit="duration_seconds", duration=float(seconds), **common)
    return RealtimeLLMUsage(
        unit="tokens",
        input_tokens=_opt_int(body, "input_tokens"),
        output_tokens=_opt_int(body, "output_tokens"),
        total_tokens=_opt_int(body, "total_tokens"),
        **common,
    )


def _response_done(kind: str, event: Mapping[str, Any], flavour: Flavour) -> ResponseDone:
    response = _obj(event, "response")
    details = response.get("status_details")
    reason = _opt_str(details, "reason") if isinstance(details, Mapping) else None
    output = response.get("output") or []
    if not isinstance(output, list):
        raise _Missing("'response.output' must be a list")
    ids = tuple(o["id"] for o in output if isinstance(o, Mapping) and isinstance(o.get("id"), str))
    return ResponseDone(
        kind,
        response_id=_str(response, "id"),
        status=_str(response, "status"),
        reason=reason,
        usage=_lenient(_usage, response.get("usage")),
        output_item_ids=ids,
    )


def _audio_delta(kind: str, event: Mapping[str, Any], flavour: Flavour) -> AudioDelta:
    try:
        audio = base64.b64decode(_str(event, "delta"), validate=True)
    except (binascii.Error, ValueError):
        raise _Missing("'delta' must be base64 audio") from None
    return AudioDelta(
        kind,
        _str(event, "response_id"),
        _str(event, "item_id"),
        _int(event, "content_index"),
        audio,
    )


def _text_part(kind: str) -> bool:
    """Whether ``kind`` is about a text part (``response.output_text.*``/``response.text.*``)
    rather than an audio part's transcript."""
    return kind.split(".")[1] in ("output_text", "text")


def _text_delta(kind: str, event: Mapping[str, Any], flavour: Flavour) -> OutputTextDelta:
    return OutputTextDelta(
        kind,
        "text" if _text_part(kind) else "audio",
        _str(event, "response_id"),
        _str(event, "item_id"),
        _int(event, "content_index"),
        _str(event, "delta"),
    )


def _text_done(kind: str, event: Mapping[str, Any], flavour: Flavour) -> OutputTextDone:
    text_part = _text_part(kind)
    return OutputTextDone(
        kind,
        "text" if text_part else "audio",
        _str(event, "response_id"),
        _str(event, "item_id"),
        _int(event, "content_index"),
        _str(event, "text" if text_part else "transcript"),
    )


def _error(kind: str, event: Mapping[str, Any], flavour: Flavour) -> ServerError:
    error = _obj(event, "error")
    return ServerError(
        kind,
        error_type=_str(error, "type"),
        code=_opt_str(error, "code"),
        message=_str(error, "message"),
        param=_opt_str(error, "param"),
        event_id=_opt_str(error, "event_id"),
    )


def _transcription_failed(
    kind: str, event: Mapping[str, Any], flavour: Flavour
) -> InputTranscriptFailed:
    error = event.get("error")
    error = error if isinstance(error, Mapping) else {}
    return InputTranscriptFailed(
        kind,
        _str(event, "item_id"),
        _int(event, "content_index"),
        _opt_str(error, "code"),
        _opt_str(error, "message"),
    )


def _output_item(kind: str, event: Mapping[str, Any], flavour: Flavour) -> OutputItem:
    return OutputItem(
        kind,
        "added" if kind.endswith("added") else "done",
        _str(event, "response_id"),
        _int(event, "output_index"),
        _item(_obj(event, "item")),
    )


def _truncated(kind: str, event: Mapping[str, Any], flavour: Flavour) -> ItemTruncated:
    return ItemTruncated(
        kind, _str(event, "item_id"), _int(event, "content_index"), _int(event, "audio_end_ms")
    )


def _deleted(kind: str, event: Mapping[str, Any], flavour: Flavour) -> ItemDeleted:
    return ItemDeleted(kind, _str(event, "item_id"))


def _transcript_delta(
    kind: str, event: Mapping[str, Any], flavour: Flavour
) -> InputTranscriptDelta:
    # Both are optional in ConversationItemInputAudioTranscriptionDeltaEvent.
    index, delta = _opt_int(event, "content_index"), _opt_str(event, "delta")
    return InputTranscriptDelta(kind, _str(event, "item_id"), index or 0, delta or "")


def _transcript_completed(
    kind: str, event: Mapping[str, Any], flavour: Flavour
) -> InputTranscriptCompleted:
    return InputTranscriptCompleted(
        kind,
        _str(event, "item_id"),
        _int(event, "content_index"),
        _str(event, "transcript"),
        _lenient(_transcription_usage, event.get("usage")),
    )


def _committed(kind: str, event: Mapping[str, Any], flavour: Flavour) -> BufferCommitted:
    return BufferCommitted(kind, _str(event, "item_id"), _opt_str(event, "previous_item_id"))


def _cleared(kind: str, event: Mapping[str, Any], flavour: Flavour) -> BufferCleared:
    return BufferCleared(kind)


def _speech_started(kind: str, event: Mapping[str, Any], flavour: Flavour) -> SpeechStarted:
    return SpeechStarted(kind, _str(event, "item_id"), _int(event, "audio_start_ms"))


def _speech_stopped(kind: str, event: Mapping[str, Any], flavour: Flavour) -> SpeechStopped:
    return SpeechStopped(kind, _str(event, "item_id"), _int(event, "audio_end_ms"))


def _timeout(kind: str, event: Mapping[str, Any], flavour: Flavour) -> BufferTimeout:
    return BufferTimeout(
        kind,
        _str(event, "item_id"),
        _int(event, "audio_start_ms"),
        _int(event, "audio_end_ms"),
    )


def _response_created(kind: str, event: Mapping[str, Any], flavour: Flavour) -> ResponseCreated:
    response = _obj(event, "response")
    return ResponseCreated(kind, _str(response, "id"), _opt_str(response, "status") or "")


def _audio_done(kind: str, event: Mapping[str, Any], flavour: Flavour) -> AudioDone:
    return AudioDone(
        kind, _str(event, "response_id"), _str(event, "item_id"), _int(event, "content_index")
    )


def _arguments_done(kind: str, event: Mapping[str, Any], flavour: Flavour) -> FunctionArgumentsDone:
    return FunctionArgumentsDone(
        kind,
        _str(event, "response_id"),
        _str(event, "item_id"),
        _str(event, "call_id"),
        _str(event, "name"),
        _str(event, "arguments"),
    )


_Parser: TypeAlias = Callable[[str, Mapping[str, Any], Flavour], ServerEvent]

_PARSERS: dict[str, _Parser] = {
    "session.created": _session,
    "session.updated": _session,
    "conversation.item.added": _announced,
    "conversation.item.done": _announced,
    "conversation.item.created": _announced,
    "conversation.item.truncated": _truncated,
    "conversation.item.deleted": _deleted,
    "conversation.item.input_audio_transcription.delta": _transcript_delta,
    "conversation.item.input_audio_transcription.completed": _transcript_completed,
    "conversation.item.input_audio_transcription.failed": _transcription_failed,
    "input_audio_buffer.committed": _committed,
    "input_audio_buffer.cleared": _cleared,
    "input_audio_buffer.speech_started": _speech_started,
    "input_audio_buffer.speech_stopped": _speech_stopped,
    "input_audio_buffer.timeout_triggered": _timeout,
    "response.created": _response_created,
    "response.done": _response_done,
    "response.output_item.added": _output_item,
    "response.output_item.done": _output_item,
    "response.output_audio.delta": _audio_delta,
    "response.audio.delta": _audio_delta,
    "response.output_audio.done": _audio_done,
    "response.audio.done": _audio_done,
    "response.output_audio_transcript.delta": _text_delta,
    "response.audio_transcript.delta": _text_delta,
    "response.output_text.delta": _text_delta,
    "response.text.delta": _text_delta,
    "response.output_audio_transcript.done": _text_done,
    "response.audio_transcript.done": _text_done,
    "response.output_text.done": _text_done,
    "response.text.done": _text_done,
    "response.function_call_arguments.done": _arguments_done,
    "error": _error,
}
"""Each modelled event type (GA and beta spellings) and its reader."""
