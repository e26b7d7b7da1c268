"""Gemini's part of the record a call keeps in a ``SessionStore`` (``session_record``): its
input messages, its setup, and how long its handles stay valid.

:class:`SessionSnapshot` is the :class:`~realtime_resumption.session_record.CallRecord` of a
Gemini Live session: the input is Gemini's client messages (their ``types`` in their dict
forms, the audio as media after the JSON), the setup the model, voice, language, modality,
instructions, tools and generation settings, and ``vertex`` which service issued the handle
(a Gemini API handle is valid for two hours after its session's connection ended, a Vertex AI
one for a day). :class:`RecordCodec` stores it in the record format ``session_record`` defines
(format version 3).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Final

import pydantic
from google.genai import types

from realtime_resumption.gemini.live_options import HANDLE_VALIDITY, LiveOptions
from realtime_resumption.gemini.messages import ClientMessage, Content, ContextUpdate, ToolResponse
from realtime_resumption.gemini.state import TransportState
from realtime_resumption.move_reports import HandleKind
from realtime_resumption.session_record import (
    RECORD_VERSION,
    CallRecord,
    CallRecordCodec,
    Media,
    RecordError,
)
from realtime_resumption.transport import GenerationSettings, ResponseModality, SendKind

__all__ = ["RECORD_VERSION", "RecordCodec", "RecordError", "SessionSnapshot", "Setup"]


@dataclass(frozen=True)
class Setup:
    """The setup a session runs with, as a record keeps it (tools and generation settings in
    their dict forms, which the transport takes back as they are)."""

    model: str
    voice: str | None = None
    language: str | None = None
    response_modality: str = "audio"
    system_instruction: str | None = None
    tools: tuple[dict[str, Any], ...] = ()
    generation: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, options: LiveOptions) -> Setup:
        """The setup of ``options``."""
        return cls(
            model=options.model,
            voice=options.voice,
            language=options.language,
            response_modality=options.response_modality,
            system_instruction=options.system_instruction,
            tools=tuple(tool.model_dump(mode="json", exclude_none=True) for tool in options.tools),
            generation={
                name: _plain(value)
                for name, value in vars(options.generation).items()
                if value is not None
            },
        )

    def applied_to(self, options: LiveOptions) -> LiveOptions:
        """``options`` with this setup (what the call ran with, updates included)."""
        modality: ResponseModality = "text" if self.response_modality == "text" else "audio"
        return replace(
            options,
            model=self.model,
            voice=self.voice,
            language=self.language,
            response_modality=modality,
            system_instruction=self.system_instruction,
            tools=tuple(types.Tool.model_validate(tool) for tool in self.tools),
            generation=GenerationSettings(**self.generation),
        )


@dataclass(frozen=True, repr=False)
class SessionSnapshot(CallRecord[ClientMessage, Setup]):
    """One Gemini Live session's state, as kept for another process; see
    :class:`~realtime_resumption.session_record.CallRecord`."""

    vertex: bool
    """The handle is Vertex AI's (valid longer than the Gemini API's)."""

    @classmethod
    def capture(
        cls,
        s: TransportState,
        *,
        handle_kind: HandleKind,
        handle_issued_at: float | None,
        vertex: bool,
        now: float,
        setup: Setup | None = None,
    ) -> SessionSnapshot:
        """The state of session ``s`` now (``now``: wall-clock time). ``setup``: the setup of
        ``s.options`` when the caller has it already (it is the same until the options
        change)."""
        handle, latest = s.handle, s.latest
        known = s.issued_by(latest)
        calls = tuple(call for call in s.open_calls() if call.id in known)
        answered = {call.id for call in calls}
        pending = tuple(
            message
            for message in s.lacking(latest)
            # A result is replayed only to the session that issued its call.
            if not isinstance(message.payload, ToolResponse)
            or all(r.id in known and r.id not in answered for r in message.payload.responses)
        )
        return cls(
            handle=handle,
            handle_kind=handle_kind if handle is not None else HandleKind.NONE,
            handle_issued_at=handle_issued_at if handle is not None else None,
            vertex=vertex,
            input=pending,
            tool_calls=calls,
            conversation=tuple(s.conversation()),
            setup=setup if setup is not None else Setup.of(s.options),
            saved_at=now,
        )

    @property
    def validity(self) -> float:
        """How long a handle of this session's service stays valid (seconds)."""
        return HANDLE_VALIDITY["vertex" if self.vertex else "gemini"]


class RecordCodec(CallRecordCodec[SessionSnapshot, ClientMessage]):
    """Gemini Live's snapshots to stored bytes and back; see
    :class:`~realtime_resumption.session_record.CallRecordCodec`."""

    def message_dict(self, message: ClientMessage, media: list[bytes]) -> dict[str, Any]:
        return _message_dict(message, media)

    def message_from(self, data: Mapping[str, Any], media: Media) -> ClientMessage:
        return _message_from(data, media)

    def provider_dict(self, record: SessionSnapshot) -> dict[str, Any]:
        setup = record.setup
        return {
            "vertex": record.vertex,
            "setup": {
                "model": setup.model,
                "voice": setup.voice,
                "language": setup.language,
                "response_modality": setup.response_modality,
                "system_instruction": setup.system_instruction,
                "tools": list(setup.tools),
                "generation": setup.generation,
            },
        }

    def record_from(self, data: Mapping[str, Any], common: dict[str, Any]) -> SessionSnapshot:
        setup = data["setup"]
        return SessionSnapshot(
            **common,
            vertex=bool(data["vertex"]),
            setup=Setup(
                model=str(setup["model"]),
                voice=setup["voice"],
                language=setup["language"],
                response_modality=str(setup["response_modality"]),
                system_instruction=setup["system_instruction"],
                tools=tuple(dict(tool) for tool in setup["tools"]),
                generation=dict(setup["generation"]),
            ),
        )


# --- the JSON shape ---------------------------------------------------------------------------


def _plain(value: object) -> Any:
    """A setting as JSON takes it (the provider's objects in their dict forms)."""
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, Enum):
        return value.value
    return value


def _message_dict(message: ClientMessage, media: list[bytes]) -> dict[str, Any]:
    """``message`` as JSON takes it; the media it carries appended to ``media``."""
    payload = message.payload
    out: dict[str, Any] = {"kind": message.kind}
    if isinstance(payload, bytes):
        out["bytes"] = len(payload)
        out["mime"] = message.mime_type
        media.append(payload)
    elif isinstance(payload, str):
        out["text"] = payload
    elif isinstance(payload, Content):
        out["turns"] = [t.model_dump(mode="json", exclude_none=True) for t in payload.turns]
        out["turn_complete"] = payload.turn_complete
    elif isinstance(payload, ToolResponse):
        out["responses"] = [r.model_dump(mode="json", exclude_none=True) for r in payload.responses]
        out["size"] = message.size
    elif isinstance(payload, ContextUpdate):
        out["instruction"] = payload.system_instruction
        if payload.tools is not None:
            out["tools"] = [t.model_dump(mode="json", exclude_none=True) for t in payload.tools]
    return out


_BARE: Final = {
    "audio_stream_end": ClientMessage.audio_stream_end,
    "activity_start": ClientMessage.activity_start,
    "activity_end": ClientMessage.activity_end,
}


def _message_from(data: Mapping[str, Any], media: Media) -> ClientMessage:
    kind: SendKind = data["kind"]
    if kind in ("audio", "video"):
        return ClientMessage.media(kind, media.take(int(data["bytes"])), str(data["mime"]))
    if kind == "text":
        return ClientMessage.text(str(data["text"]))
    if kind == "content":
        turns = tuple(types.Content.model_validate(t) for t in data["turns"])
        return ClientMessage.content(turns, bool(data["turn_complete"]))
    if kind == "tool_response":
        responses = tuple(types.FunctionResponse.model_validate(r) for r in data["responses"])
        return ClientMessage.tool_response(responses, int(data["size"]))
    if kind == "context_update":
        tools = data.get("tools")
        return ClientMessage.context_update(
            data.get("instruction"),
            None if tools is None else tuple(types.Tool.model_validate(t) for t in tools),
        )
    if kind in _BARE:
        return _BARE[kind]()
    raise ValueError(f"unknown message kind {kind!r}")
