"""What a call keeps in a ``SessionStore`` so another process can take it over, whatever its
provider, and the record format it is kept in.

A :class:`CallRecord` holds what survives the worker:

- the latest resumption handle, its kind and when it arrived (none for a provider without
  handles); the record is worth keeping as long as such a handle is valid
  (:attr:`CallRecord.validity`, the provider's);
- the input the server had not confirmed (what a session resumed from the handle, or rebuilt
  from the conversation, would lack: the outbox's own answer), replayed by the process that
  takes over;
- the tool calls in flight that the handle's session knows (the session that issued them
  still waits for their results);
- the conversation (what a rebuilt session is seeded with) and the setup, in the provider's
  terms.

A :class:`CallRecordCodec` turns a record into the bytes stored and back: a 5-byte header
(``RRS``, the format version, the encryption) then the body: the JSON's length (4 bytes,
big-endian), the JSON, then the media the input carries (the user's audio as it was sent, not
base64: the JSON gives each its length, in order); the input sent since is appended as parts
(``RRP``, the same header, a body of the messages). Each is encrypted as a whole with Fernet
(``cryptography``: AES-128-CBC with HMAC-SHA256, authenticated) when a key is given. Without a
key everything is stored in clear, handles included. Each record and part names the session
key it was written for: one copied under another call's key is refused (with a key, the name
is authenticated with the rest; in clear, anyone who can write the store can forge anything).
A record this version cannot read (not a record, another version, corrupt, nested past
reason, encrypted with another key, in clear while a key is set, written for another session
key) raises :class:`RecordError`; the transport then starts the call fresh and reports why.

What is the provider's (its input messages, its setup, how long its handles stay valid) a
provider's transport gives by subclassing both: Gemini's is ``gemini.stored_session``.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Final, Generic, TypeVar

from realtime_resumption.move_reports import HandleKind
from realtime_resumption.redaction import redact
from realtime_resumption.transport import ReplayItem, ToolCall, ToolResult

RECORD_VERSION: Final = 3
_MAGIC: Final = b"RRS"
_PART_MAGIC: Final = b"RRP"
_CLEAR: Final = 0
_FERNET: Final = 1
_MIN_TTL: Final = 1.0
_T = TypeVar("_T")
M = TypeVar("M")
"""The provider's input message."""
S = TypeVar("S")
"""The provider's setup, as a record keeps it."""
R = TypeVar("R", bound="CallRecord[Any, Any]")


class RecordError(ValueError):
    """A stored record this version cannot read. The message says why, never what it holds."""


@dataclass(frozen=True)
class CallRecord(ABC, Generic[M, S]):
    """One call's state, as kept for another process; see the module documentation.

    ``handle_issued_at`` and ``saved_at`` are wall-clock times (``time.time()``): they are
    compared across processes and machines.
    """

    handle: str | None = field(repr=False)
    handle_kind: HandleKind
    handle_issued_at: float | None
    input: tuple[M, ...]
    """What the server had not confirmed, in order."""
    tool_calls: tuple[ToolCall, ...]
    conversation: tuple[ReplayItem, ...]
    setup: S
    saved_at: float

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(handle={redact(self.handle)}, "
            f"kind={self.handle_kind.value}, input={len(self.input)}, "
            f"tool_calls={len(self.tool_calls)}, conversation={len(self.conversation)})"
        )

    @property
    @abstractmethod
    def validity(self) -> float:
        """How long a handle of this call's service stays valid (seconds)."""

    def same_but_input(self, other: CallRecord[M, S]) -> bool:
        """Whether ``other`` holds the same state as this but for its input and when it was
        taken (only input was sent since, or nothing)."""
        return all(
            (mine := getattr(self, f.name)) is (theirs := getattr(other, f.name)) or mine == theirs
            for f in fields(self)
            if f.name not in ("input", "saved_at")
        )

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


class Media:
    """The media that follow a body's JSON, taken in order by the messages that carry them."""

    def __init__(self, data: memoryview) -> None:
        self._data = data
        self._at = 0

    def take(self, size: int) -> bytes:
        """The next ``size`` bytes."""
        end = self._at + size
        if size < 0 or end > len(self._data):
            raise ValueError("media past the body's end")
        taken, self._at = bytes(self._data[self._at : end]), end
        return taken

    def check_used(self) -> None:
        """Raises unless every byte was taken."""
        if self._at != len(self._data):
            raise ValueError("media no message carries")


class CallRecordCodec(ABC, Generic[R, M]):
    """Records to stored bytes and back for the call of ``session_key``, encrypted with
    ``key`` (a Fernet key, or several: the first encrypts, any decrypts) when one is given.
    ``writer``: the owner token of the process writing, kept in each whole record it writes
    (:meth:`writer` reads it back). Keys never show in its repr.

    A provider's codec says how its messages and its part of the record (setup, service) are
    kept: :meth:`message_dict`, :meth:`message_from`, :meth:`provider_dict`,
    :meth:`record_from`. Whatever they raise on a bad record (``ValueError``, ``TypeError``,
    ``LookupError``, ``AttributeError``) is a :class:`RecordError`.
    """

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
            f"{type(self).__name__}(session_key={self._session_key!r}, "
            f"encrypted={self._fernet is not None})"
        )

    @property
    def encrypted(self) -> bool:
        """Whether records are encrypted."""
        return self._fernet is not None

    # --- the provider's shape ---------------------------------------------------------------

    @abstractmethod
    def message_dict(self, message: M, media: list[bytes]) -> dict[str, Any]:
        """``message`` as JSON takes it; the media it carries appended to ``media``."""

    @abstractmethod
    def message_from(self, data: Mapping[str, Any], media: Media) -> M:
        """The message ``data`` holds, its media taken from ``media``."""

    @abstractmethod
    def provider_dict(self, record: R) -> dict[str, Any]:
        """The provider's part of ``record`` (its setup, its service), as JSON takes it."""

    @abstractmethod
    def record_from(self, data: Mapping[str, Any], common: dict[str, Any]) -> R:
        """The record of the stored ``data``: ``common`` holds the :class:`CallRecord`'s own
        fields, read already; the provider's are in ``data``."""

    # --- records ----------------------------------------------------------------------------

    def encode(self, record: R) -> bytes:
        """The bytes to store for ``record``."""
        media: list[bytes] = []
        data: dict[str, Any] = {
            "handle": record.handle,
            "kind": record.handle_kind.value,
            "issued_at": record.handle_issued_at,
            "saved_at": record.saved_at,
            "input": [self.message_dict(m, media) for m in record.input],
            "tool_calls": [_call_dict(c) for c in record.tool_calls],
            "conversation": [_item_dict(item) for item in record.conversation],
            **self.provider_dict(record),
        }
        if self._writer is not None:
            data["writer"] = self._writer
        return self._seal(_MAGIC, data, media)

    def encode_part(self, messages: Sequence[M], now: float) -> bytes:
        """The bytes to append to a stored record for input sent since (``now``: wall-clock
        time): the record's input goes on with ``messages``."""
        media: list[bytes] = []
        data = {"at": now, "input": [self.message_dict(m, media) for m in messages]}
        return self._seal(_PART_MAGIC, data, media)

    def writer(self, record: Sequence[bytes]) -> str | None:
        """The owner token of the process that wrote ``record`` (the whole record, not the
        parts appended to it); ``RecordError`` when it cannot be read."""
        writer = self._read(lambda: self._open(_MAGIC, record[0])[0].get("writer"))
        return writer if isinstance(writer, str) else None

    def decode(self, record: bytes | Sequence[bytes]) -> R:
        """The record stored (with the parts appended to it, in order);
        :class:`RecordError` when it cannot be read."""
        parts = [record] if isinstance(record, bytes) else list(record)
        if not parts:
            raise RecordError("not a session record of realtime-resumption")
        return self._read(lambda: self._record_of(parts))

    def _record_of(self, parts: Sequence[bytes]) -> R:
        data, media = self._open(_MAGIC, parts[0])
        record = self.record_from(data, self._common(data, media))
        for part in parts[1:]:
            data, media = self._open(_PART_MAGIC, part)
            added = self._input_from(data["input"], media)
            record = replace(record, input=record.input + added, saved_at=float(data["at"]))
        return record

    def _common(self, data: Mapping[str, Any], media: Media) -> dict[str, Any]:
        handle = data["handle"]
        issued_at = data["issued_at"]
        if handle is not None and not isinstance(handle, str):
            raise TypeError("handle")
        return {
            "handle": handle,
            "handle_kind": HandleKind(data["kind"]),
            "handle_issued_at": float(issued_at) if issued_at is not None else None,
            "input": self._input_from(data["input"], media),
            "tool_calls": tuple(
                ToolCall(str(c["id"]), str(c["name"]), dict(c["args"])) for c in data["tool_calls"]
            ),
            "conversation": tuple(_item_from(item) for item in data["conversation"]),
            "saved_at": float(data["saved_at"]),
        }

    def _input_from(self, data: Sequence[Mapping[str, Any]], media: Media) -> tuple[M, ...]:
        messages = tuple(self.message_from(m, media) for m in data)
        media.check_used()
        return messages

    @staticmethod
    def _read(read: Callable[[], _T]) -> _T:
        """What ``read`` reads of a record; whatever a record can make it raise is a
        ``RecordError`` (nested past reason, JSON's parser recurses: ``RecursionError``; a
        model's validation error is a ``ValueError``)."""
        try:
            return read()
        except RecordError:
            raise
        except (ValueError, TypeError, LookupError, AttributeError, RecursionError):
            raise RecordError("the session record is corrupt") from None

    def _seal(self, magic: bytes, data: Mapping[str, Any], media: list[bytes]) -> bytes:
        head = json.dumps({"key": self._session_key, **data}, separators=(",", ":")).encode()
        body = b"".join((len(head).to_bytes(4, "big"), head, *media))
        if self._fernet is None:
            return magic + bytes((RECORD_VERSION, _CLEAR)) + body
        token: bytes = self._fernet.encrypt(body)
        return magic + bytes((RECORD_VERSION, _FERNET)) + token

    def _open(self, magic: bytes, record: bytes) -> tuple[Any, Media]:
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
        return data, Media(memoryview(body)[end:])


# --- the JSON shape of the conversation --------------------------------------------------------


def _call_dict(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "name": call.name, "args": call.args}


def _item_dict(item: ReplayItem) -> dict[str, Any]:
    out: dict[str, Any] = {"role": item.role}
    if item.text is not None:
        out["text"] = item.text
    if item.tool_call is not None:
        out["tool_call"] = _call_dict(item.tool_call)
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
