"""Checks on what the framework sends, before anything is queued.

Each check either returns the value in the form the send path uses or raises ``TypeError``
(not the kind of value the method takes) or ``ValueError`` (the right kind, a wrong value),
with a message naming the method and what it takes. The send path calls them first, so a bad
send never reaches the outbox, the counters or a connection.
"""

from __future__ import annotations

import base64
import datetime
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from realtime_resumption.gemini import messages
from realtime_resumption.gemini.messages import ClientMessage
from realtime_resumption.transport import (
    ContentTurn,
    GenerationOverrides,
    MessageTooLargeError,
    ReplayItem,
    ToolResult,
)

_ROLES: Final = ("user", "model")
_SCHEDULINGS: Final = ("interrupt", "when_idle", "silent")
_WIRE_GROWTH: Final = 6
"""The most a payload byte grows to on the wire: a control character escaped as ``\\u00XX``."""


def _kind(value: object) -> str:
    return type(value).__name__


def data(value: object, method: str) -> bytes:
    """``value`` as bytes: a bytes-like object (``bytes``, ``bytearray``, ``memoryview``,
    any buffer), never ``str`` or a list of numbers."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        raise TypeError(
            f"{method} takes bytes (bytes, bytearray or memoryview), not str: encode the "
            "data, or for text use send_live_text"
        )
    try:
        return memoryview(value).tobytes()  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(
            f"{method} takes bytes (bytes, bytearray or memoryview), not {_kind(value)}"
        ) from None


def pcm16(value: object) -> bytes:
    """User audio for ``send_audio``: bytes-like PCM16, an even number of bytes."""
    pcm = data(value, "send_audio")
    if len(pcm) % 2:
        raise ValueError(
            f"send_audio takes PCM16 (2 bytes a sample): an even number of bytes, not {len(pcm)}"
        )
    return pcm


def mime_type(value: object, method: str) -> str:
    """A MIME type such as ``image/jpeg``."""
    if not isinstance(value, str):
        raise TypeError(f"{method} takes the MIME type as a str, not {_kind(value)}")
    major, slash, minor = value.partition("/")
    if not (major.strip() and slash and minor.strip()):
        raise ValueError(f"{method}: {value!r} is not a MIME type (type/subtype)")
    return value


def turns(value: object, method: str) -> tuple[ContentTurn, ...]:
    """A sequence of ``ContentTurn`` with a ``user`` or ``model`` role and ``str`` text."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise TypeError(f"{method} takes a sequence of ContentTurn, not {_kind(value)}")
    for turn in value:
        if not isinstance(turn, ContentTurn):
            raise TypeError(f"{method} takes ContentTurn items, not {_kind(turn)}")
        if turn.role not in _ROLES:
            raise ValueError(f"{method}: a turn's role is 'user' or 'model', not {turn.role!r}")
        if not isinstance(turn.text, str):
            raise TypeError(f"{method}: a turn's text is a str, not {_kind(turn.text)}")
    return tuple(value)


def replay_items(value: object) -> tuple[ReplayItem, ...]:
    """History for ``replay_history``: a sequence of ``ReplayItem``."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise TypeError(f"replay_history takes a sequence of ReplayItem, not {_kind(value)}")
    for item in value:
        if not isinstance(item, ReplayItem):
            raise TypeError(f"replay_history takes ReplayItem items, not {_kind(item)}")
        if item.role not in _ROLES:
            raise ValueError(f"replay_history: a role is 'user' or 'model', not {item.role!r}")
    return tuple(value)


def generation_overrides(value: object) -> None:
    """Refuse overrides Gemini cannot honour: the Live API takes no per-response settings
    (reasoning is the session's ``thinking``), so any override set is a ``ValueError`` that
    names it; ``None`` and overrides that set nothing pass."""
    if value is None:
        return
    if not isinstance(value, GenerationOverrides):
        raise TypeError(f"trigger_generation takes GenerationOverrides or None, not {_kind(value)}")
    if value.reasoning_effort is not None:
        raise ValueError(
            f"trigger_generation: Gemini Live cannot honour "
            f"GenerationOverrides(reasoning_effort={value.reasoning_effort!r}): it takes no "
            "per-response settings (capabilities.reasoning_effort is False); set the "
            "session's thinking with SessionUpdate(generation=GenerationSettings(thinking=...))"
        )


def tool_result(value: object) -> ToolResult:
    """A ``ToolResult`` with str ``id`` and ``name`` and a mapping as its response."""
    if not isinstance(value, ToolResult):
        raise TypeError(f"send_tool_result takes a ToolResult, not {_kind(value)}")
    for name in ("id", "name"):
        field = getattr(value, name)
        if not isinstance(field, str) or not field:
            raise ValueError(f"send_tool_result: the result's {name} must be a non-empty str")
    if not isinstance(value.response, Mapping):
        raise TypeError(
            f"send_tool_result: the response is a mapping (dict), not {_kind(value.response)}"
        )
    if value.scheduling is not None and value.scheduling not in _SCHEDULINGS:
        raise ValueError(
            f"send_tool_result: scheduling is one of {_SCHEDULINGS} or None, "
            f"not {value.scheduling!r}"
        )
    return value


def tool_response(value: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
    """A tool result's response as the JSON the wire carries, and its size in bytes. Bytes go
    as base64 and datetimes in ISO format, as the SDK sends them; anything else JSON cannot
    carry (a set, an object, NaN, a cycle) raises ``TypeError`` here rather than failing at
    the write, where the result would be lost. The copy also freezes the result: a caller
    that changes its dict afterwards does not change what is sent, or replayed."""
    try:
        text = json.dumps(value, allow_nan=False, default=_sdk_encodable)
    except (TypeError, ValueError, RecursionError) as error:
        raise TypeError(
            f"send_tool_result: the response is not JSON-serialisable ({error})"
        ) from None
    response: dict[str, Any] = json.loads(text)
    return response, len(text)


def _sdk_encodable(value: object) -> object:
    if isinstance(value, bytes):
        return base64.urlsafe_b64encode(value).decode("ascii")
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    raise TypeError(f"{_kind(value)} is not JSON-serialisable")


def fits(message: ClientMessage, method: str) -> ClientMessage:
    """``message`` if the service takes it; ``MessageTooLargeError`` (a ``ValueError``) when
    it is larger than ``messages.MAX_MESSAGE_BYTES`` on the wire."""
    limit = messages.MAX_MESSAGE_BYTES
    if message.size * _WIRE_GROWTH <= limit:
        return message  # the audio path: no need to measure
    size = message.wire_size
    if size > limit:
        raise MessageTooLargeError(
            f"{method}: the message takes {size / 2**20:.1f} MiB on the wire, more than "
            f"Gemini Live takes ({limit / 2**20:g} MiB, MAX_MESSAGE_BYTES): send less, or "
            "a reference to it"
        )
    return message
