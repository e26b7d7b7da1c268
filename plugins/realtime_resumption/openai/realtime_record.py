"""OpenAI Realtime's part of the record a call keeps in a ``SessionStore`` (``session_record``).

OpenAI Realtime has no resumption handle: a call taken over by another process goes on in a
new session given what the old one held. :class:`RealtimeRecord` is that state, taken from the
transport's :class:`~realtime_resumption.openai.conversation_state.ConversationState`:

- ``items``: the conversation as a new session is seeded with it
  (:func:`~realtime_resumption.openai.conversation_seed.build_seed`): user turns as their
  words, or their speech where no transcript came; answers as the words received; function
  calls and their outputs. (The record's provider-neutral ``conversation`` stays empty: it
  cannot hold a turn known only as speech.)
- ``input``: what no item holds, in the order a new session is to be given it: the input audio
  not yet committed into an item (exact: ``uncommitted_audio``), the items the client created
  that no echo confirmed, then the client events held while no session took them (a move).
- ``tool_calls``: the function calls issued whose output was not sent: the process that takes
  the call over has its app run them (the output then goes to the new session, once).
- ``answer``: the new session owes an answer (one was under way, or a committed turn or a
  ``response.create`` had none yet).
- ``setup``: the session's configuration (:class:`SessionConfig`, stored in the beta
  ``session`` spelling, which states every field it models).

:class:`RealtimeRecordCodec` stores it in the record format ``session_record`` defines.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Final, get_args

from realtime_resumption.openai.conversation_state import HeldItem, ItemKind
from realtime_resumption.openai.session_config import SessionConfig
from realtime_resumption.session_record import CallRecord, CallRecordCodec, Media, RecordError

__all__ = [
    "RECORD_VALIDITY",
    "RealtimeInput",
    "RealtimeRecord",
    "RealtimeRecordCodec",
    "RecordError",
]

RECORD_VALIDITY: Final = 3600.0
"""Seconds a record is kept after its last write: one session's cap on OpenAI. A call whose
worker died is taken over within seconds (the lease's time to live); one nobody took over in
an hour is over."""
_KINDS: Final = frozenset(get_args(ItemKind))


@dataclass(frozen=True)
class RealtimeInput:
    """One client event a new session is to be given: ``event`` as sent, and for an
    ``input_audio_buffer.append`` its audio (``event`` then holds no ``audio``)."""

    event: Mapping[str, Any]
    audio: bytes | None = field(default=None, repr=False)

    @classmethod
    def append(cls, audio: bytes) -> RealtimeInput:
        """Input audio to append (PCM16 in the session's input format)."""
        return cls({"type": "input_audio_buffer.append"}, audio)

    def wire(self) -> dict[str, Any]:
        """The client event to send."""
        if self.audio is None:
            return dict(self.event)
        return {**self.event, "audio": base64.b64encode(self.audio).decode()}


@dataclass(frozen=True, repr=False)
class RealtimeRecord(CallRecord[RealtimeInput, SessionConfig]):
    """One OpenAI Realtime call's state, as kept for another process; see the module
    documentation and :class:`~realtime_resumption.session_record.CallRecord`."""

    items: tuple[HeldItem, ...] = ()
    answer: bool = False

    @property
    def validity(self) -> float:
        """How long the record is worth keeping (no handle: from its last write)."""
        return RECORD_VALIDITY

    @property
    def audio(self) -> bytes:
        """The input audio the record holds, in order."""
        return b"".join(m.audio for m in self.input if m.audio is not None)


class RealtimeRecordCodec(CallRecordCodec[RealtimeRecord, RealtimeInput]):
    """OpenAI Realtime's records to stored bytes and back; see
    :class:`~realtime_resumption.session_record.CallRecordCodec`."""

    def message_dict(self, message: RealtimeInput, media: list[bytes]) -> dict[str, Any]:
        out: dict[str, Any] = {"event": dict(message.event)}
        if message.audio is not None:
            out["bytes"] = len(message.audio)
            media.append(message.audio)
        return out

    def message_from(self, data: Mapping[str, Any], media: Media) -> RealtimeInput:
        event = data["event"]
        if not isinstance(event, Mapping) or not isinstance(event.get("type"), str):
            raise ValueError("event")
        size = data.get("bytes")
        return RealtimeInput(dict(event), None if size is None else media.take(int(size)))

    def provider_dict(self, record: RealtimeRecord) -> dict[str, Any]:
        return {
            "setup": record.setup.beta_session(),
            "answer": record.answer,
            "items": [_item_dict(item) for item in record.items],
        }

    def record_from(self, data: Mapping[str, Any], common: dict[str, Any]) -> RealtimeRecord:
        return RealtimeRecord(
            **common,
            setup=SessionConfig.from_session(data["setup"], "beta"),
            answer=bool(data["answer"]),
            items=tuple(_item_from(item) for item in data["items"]),
        )


_ITEM_FIELDS: Final = tuple(f.name for f in fields(HeldItem) if f.name != "audio")


def _item_dict(item: HeldItem) -> dict[str, Any]:
    # A turn known only as speech keeps it as base64 in the JSON (the media after the JSON are
    # the input's, whose parts are appended): rare, as a transcript comes within a second.
    out = {name: getattr(item, name) for name in _ITEM_FIELDS}
    if item.audio:
        out["audio"] = base64.b64encode(item.audio).decode()
    return out


def _item_from(data: Mapping[str, Any]) -> HeldItem:
    if data["kind"] not in _KINDS:
        raise ValueError("kind")
    values = {name: data[name] for name in _ITEM_FIELDS}
    for name in ("id", "text"):
        if not isinstance(values[name], str):
            raise TypeError(name)
    audio = data.get("audio")
    return HeldItem(**values, audio=base64.b64decode(audio, validate=True) if audio else b"")
