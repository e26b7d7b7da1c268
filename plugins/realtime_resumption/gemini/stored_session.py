"""What a call keeps in a ``SessionStore`` so another process can take it over, and the record
format it is kept in.

A :class:`SessionSnapshot` holds what survives the worker:

- the latest resumable handle, its kind and when it arrived (its age: a handle is valid for
  ``HANDLE_VALIDITY`` after its session's connection ended, so the record expires with it);
- the input a session resumed from that handle would lack (the outbox's own answer,
  ``Outbox.lacking``), replayed by the process that takes over;
- the tool calls in flight that the handle's session knows (the session that issued them
  still waits for their results);
- the conversation (what a rebuilt session is seeded with) and the setup (model, voice,
  language, modality, instructions, tools, generation settings).

:class:`RecordCodec` turns a snapshot into the bytes stored and back: a 5-byte header (``RRS``,
the format version, the encryption) then the body: the JSON's length (4 bytes, big-endian), the
JSON, then the media the input carries (the user's audio as it was sent, not base64: the JSON
gives each its length, in order); the input sent since is appended as parts (``RRP``, the same
header, a body of the messages). Each is encrypted as a whole with Fernet
(``cryptography``: AES-128-CBC with HMAC-SHA256, authenticated) when a key is given. Without a
key everything is stored in clear, handles included. Each record and part names the session
key it was written for: one copied under another call's key is refused (with a key, the name
is authenticated with the rest; in clear, anyone who can write the store can forge anything).
A record this version cannot read (not a record, another version, corrupt, nested past
reason, encrypted with another key, in clear while a key is set, written for another session
key) raises :class:`RecordError`; the transport then starts the call fresh and reports why.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from enum import Enum
from typing import Any, Final, TypeVar

import pydantic
from google.genai import types

from realtime_resumption.gemini.live_options import HANDLE_VALIDITY, LiveOptions
from realtime_resumption.gemini.messages import ClientMessage, Content, ContextUpdate, ToolResponse
from realtime_resumption.gemini.state import TransportState
from realtime_resumption.move_reports import HandleKind
from realtime_resumption.redaction import redact
from realtime_resumption.transport import (
    GenerationSettings,
    ReplayItem,
    ResponseModality,
    SendKind,
    ToolCall,
    ToolResult,
)

RECORD_VERSION: Final = 3
_MAGIC: Final = b"RRS"
_PART_MAGIC: Final = b"RRP"
_CLEAR: Final = 0
_FERNET: Final = 1
_MIN_TTL: Final = 1.0
_T = TypeVar("_T")


class RecordError(ValueError):
    """A stored record this version cannot read. The message says why, never what it holds."""


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


@dataclass(frozen=True)
class SessionSnapshot:
    """One session's state, as kept for another process; see the module documentation.

    ``handle_issued_at`` and ``saved_at`` are wall-clock times (``time.time()``): they are
    compared across processes and machines.
    """

    handle: str | None = field(repr=False)
    handle_kind: HandleKind
    handle_issued_at: float | None
    vertex: bool
    input: tuple[ClientMessage, ...]
    tool_calls: tuple[ToolCall, ...]
    conversation: tuple[ReplayItem, ...]
    setup: Setup
    saved_at: float

    def __repr__(self) -> str:
        return (
            f"SessionSnapshot(handle={redact(self.handle)}, kind={self.handle_kind.value}, "
            f"input={len(self.input)}, tool_calls={len(self.tool_calls)}, "
            f"conversation={len(self.conversation)})"
        )

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

    def same_but_input(self, other: SessionSnapshot) -> bool:
        """Whether ``other`` holds the same state as this but for its input and when it was
        taken (only input was sent since, or nothing)."""
        return all(
            (mine := getattr(self, name)) is (theirs := getattr(other, name)) or mine == theirs
            for name in _STATE_FIELDS
        )

    @property
    def validity(self) -> float:
        """How long a handle of this session's service stays valid (seconds)."""
        return HANDLE_VALIDITY["vertex" if self.vertex else "gemini"]

    def handle_valid(self, now: float) -> bool:
        """Whether the handle may still resume its session at wall-clock time ``now``."""
        return (
            self.handle is not None
            and self.handle_issued_at is not None
            and now < self.handle_issued_at + self.validity
        )

    def ttl(self, now: float) -> float:
        """How long the record is worth keeping from ``now``: as long as its handle is valid
        (a record without a handle: as long as a handle issued now would be)."""
        start = self.handle_issued_at if self.handle_issued_at is not None else self.saved_at
        return max(_MIN_TTL, start + self.validity - now)


_STATE_FIELDS: Final = tuple(
    f.name for f in fields(SessionSnapshot) if f.name not in ("input", "saved_at")
)


class RecordCodec:
    """Snapshots to stored bytes and back for the call of ``session_key``, encrypted with
    ``key`` (a Fernet key, or several: the first encrypts, any decrypts) when one is given.
    ``writer``: the owner token of the process writing, kept in each whole record it writes
    (:meth:`writer` reads it back). Keys never show in its repr."""

    def __init__(
        self,
        key: str | bytes | Sequence[str | bytes] | None = None,
        *,
        session_key: str,
        writer: str | None = None,
    ) -> None:
        self._session_key = session_key
        self._writer = writer
        self._fernet: Any = None
        if key is not None:
            try:
                from cryptography.fernet import Fernet, MultiFernet
            except ImportError:  # pragma: no cover - the [redis] extra brings it
                raise ImportError(
                    "encrypting session records needs cryptography: "
                    "pip install 'realtime-resumption[redis]'"
                ) from None
            keys = [key] if isinstance(key, str | bytes) else list(key)
            if not keys:
                raise ValueError("encryption_key: give at least one key")
            try:
                self._fernet = MultiFernet([Fernet(k) for k in keys])
            except (ValueError, TypeError):
                raise ValueError(
                    "encryption_key must be a Fernet key (32 url-safe base64-encoded bytes: "
                    "cryptography.fernet.Fernet.generate_key())"
                ) from None

    def __repr__(self) -> str:
        return (
            f"RecordCodec(session_key={self._session_key!r}, encrypted={self._fernet is not None})"
        )

    @property
    def encrypted(self) -> bool:
        """Whether records are encrypted."""
        return self._fernet is not None

    def encode(self, snapshot: SessionSnapshot) -> bytes:
        """The bytes to store for ``snapshot``."""
        media: list[bytes] = []
        data = _snapshot_dict(snapshot, media)
        if self._writer is not None:
            data["writer"] = self._writer
        return self._seal(_MAGIC, data, media)

    def encode_part(self, messages: Sequence[ClientMessage], now: float) -> bytes:
        """The bytes to append to a stored record for input sent since (``now``: wall-clock
        time): the record's input goes on with ``messages``."""
        media: list[bytes] = []
        data = {"at": now, "input": [_message_dict(m, media) for m in messages]}
        return self._seal(_PART_MAGIC, data, media)

    def writer(self, record: Sequence[bytes]) -> str | None:
        """The owner token of the process that wrote ``record`` (the whole record, not the
        parts appended to it); ``RecordError`` when it cannot be read."""
        writer = self._read(lambda: self._open(_MAGIC, record[0])[0].get("writer"))
        return writer if isinstance(writer, str) else None

    def decode(self, record: bytes | Sequence[bytes]) -> SessionSnapshot:
        """The snapshot a stored record holds (with the parts appended to it, in order);
        :class:`RecordError` when it cannot be read."""
        parts = [record] if isinstance(record, bytes) else list(record)
        if not parts:
            raise RecordError("not a session record of realtime-resumption")
        return self._read(lambda: self._snapshot_of(parts))

    def _snapshot_of(self, parts: Sequence[bytes]) -> SessionSnapshot:
        snapshot = _snapshot_from(*self._open(_MAGIC, parts[0]))
        for part in parts[1:]:
            data, media = self._open(_PART_MAGIC, part)
            added = tuple(_message_from(m, media) for m in data["input"])
            media.check_used()
            snapshot = replace(snapshot, input=snapshot.input + added, saved_at=float(data["at"]))
        return snapshot

    @staticmethod
    def _read(read: Callable[[], _T]) -> _T:
        """What ``read`` reads of a record; whatever a record can make it raise is a
        ``RecordError`` (nested past reason, JSON's parser recurses: ``RecursionError``)."""
        try:
            return read()
        except RecordError:
            raise
        except (
            ValueError,
            TypeError,
            LookupError,
            AttributeError,
            RecursionError,
            pydantic.ValidationError,
        ):
            raise RecordError("the session record is corrupt") from None

    def _seal(self, magic: bytes, data: Mapping[str, Any], media: list[bytes]) -> bytes:
        head = json.dumps({"key": self._session_key, **data}, separators=(",", ":")).encode()
        body = b"".join((len(head).to_bytes(4, "big"), head, *media))
        if self._fernet is None:
            return magic + bytes((RECORD_VERSION, _CLEAR)) + body
        token: bytes = self._fernet.encrypt(body)
        return magic + bytes((RECORD_VERSION, _FERNET)) + token

    def _open(self, magic: bytes, record: bytes) -> tuple[Any, _Media]:
        if len(record) < 5 or record[:3] != magic:
            raise RecordError("not a session record of realtime-resumption")
        version, encryption, body = record[3], record[4], record[5:]
        if version != RECORD_VERSION:
            raise RecordError(
                f"a session record of format version {version}; this version reads {RECORD_VERSION}"
            )
        if encryption == _FERNET:
            if self._fernet is None:
                raise RecordError("the session record is encrypted and no encryption_key is set")
            from cryptography.fernet import InvalidToken

            try:
                body = self._fernet.decrypt(body)
            except InvalidToken:
                raise RecordError(
                    "the session record cannot be decrypted with the encryption_key given"
                ) from None
        elif encryption == _CLEAR:
            if self._fernet is not None:
                raise RecordError(
                    "the session record is stored in clear while an encryption_key is set"
                )
        else:
            raise RecordError(f"unknown record encryption {encryption}")
        end = 4 + int.from_bytes(body[:4], "big")
        if len(body) < end:
            raise ValueError("a body shorter than its JSON")
        data = json.loads(body[4:end])
        if data["key"] != self._session_key:
            # A record copied under another call's key (same encryption key): never this
            # call's. The message does not say whose it is.
            raise RecordError(
                f"the session record was written for another session key, not {self._session_key!r}"
            )
        return data, _Media(memoryview(body)[end:])


# --- the JSON shape ---------------------------------------------------------------------------


def _plain(value: object) -> Any:
    """A setting as JSON takes it (the provider's objects in their dict forms)."""
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, Enum):
        return value.value
    return value


class _Media:
    """The media that follow a body's JSON, taken in order by the messages that carry them."""

    def __init__(self, data: memoryview) -> None:
        self._data = data
        self._at = 0

    def take(self, size: int) -> bytes:
        end = self._at + size
        if size < 0 or end > len(self._data):
            raise ValueError("media past the body's end")
        taken, self._at = bytes(self._data[self._at : end]), end
        return taken

    def check_used(self) -> None:
        if self._at != len(self._data):
            raise ValueError("media no message carries")


def _snapshot_dict(snap: SessionSnapshot, media: list[bytes]) -> dict[str, Any]:
    return {
        "handle": snap.handle,
        "kind": snap.handle_kind.value,
        "issued_at": snap.handle_issued_at,
        "vertex": snap.vertex,
        "saved_at": snap.saved_at,
        "input": [_message_dict(m, media) for m in snap.input],
        "tool_calls": [{"id": c.id, "name": c.name, "args": c.args} for c in snap.tool_calls],
        "conversation": [_item_dict(item) for item in snap.conversation],
        "setup": {
            "model": snap.setup.model,
            "voice": snap.setup.voice,
            "language": snap.setup.language,
            "response_modality": snap.setup.response_modality,
            "system_instruction": snap.setup.system_instruction,
            "tools": list(snap.setup.tools),
            "generation": snap.setup.generation,
        },
    }


def _snapshot_from(data: Mapping[str, Any], media: _Media) -> SessionSnapshot:
    setup = data["setup"]
    handle = data["handle"]
    issued_at = data["issued_at"]
    if handle is not None and not isinstance(handle, str):
        raise TypeError("handle")
    return SessionSnapshot(
        handle=handle,
        handle_kind=HandleKind(data["kind"]),
        handle_issued_at=float(issued_at) if issued_at is not None else None,
        vertex=bool(data["vertex"]),
        input=_input_from(data["input"], media),
        tool_calls=tuple(
            ToolCall(str(c["id"]), str(c["name"]), dict(c["args"])) for c in data["tool_calls"]
        ),
        conversation=tuple(_item_from(item) for item in data["conversation"]),
        setup=Setup(
            model=str(setup["model"]),
            voice=setup["voice"],
            language=setup["language"],
            response_modality=str(setup["response_modality"]),
            system_instruction=setup["system_instruction"],
            tools=tuple(dict(tool) for tool in setup["tools"]),
            generation=dict(setup["generation"]),
        ),
        saved_at=float(data["saved_at"]),
    )


def _input_from(data: Sequence[Mapping[str, Any]], media: _Media) -> tuple[ClientMessage, ...]:
    messages = tuple(_message_from(m, media) for m in data)
    media.check_used()
    return messages


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


def _message_from(data: Mapping[str, Any], media: _Media) -> ClientMessage:
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


def _item_dict(item: ReplayItem) -> dict[str, Any]:
    out: dict[str, Any] = {"role": item.role}
    if item.text is not None:
        out["text"] = item.text
    if item.tool_call is not None:
        call = item.tool_call
        out["tool_call"] = {"id": call.id, "name": call.name, "args": call.args}
    if item.tool_result is not None:
        result = item.tool_result
        out["tool_result"] = {"id": result.id, "name": result.name, "response": result.response}
    return out


def _item_from(data: Mapping[str, Any]) -> ReplayItem:
    role = data["role"]
    if role not in ("user", "model"):
        raise ValueError("role")
    call = data.get("tool_call")
    result = data.get("tool_result")
    return ReplayItem(
        role=role,
        text=data.get("text"),
        tool_call=ToolCall(call["id"], call["name"], dict(call["args"])) if call else None,
        tool_result=(
            ToolResult(result["id"], result["name"], dict(result["response"])) if result else None
        ),
    )
