"""Server messages as the transport sees them: a frame read (:class:`Reader`), one
google-genai message, typed events out.

The order of the events is the order the transport acts on them: usage first (it rides on
messages that also carry audio, a tool call or a goAway, and a ``final`` figure must be tied
to the turn it closes), then the model's parts, grounding, transcriptions, and the turn
signals in the order interrupted, generationComplete, turnComplete.
"""

from __future__ import annotations

import base64
import binascii
import inspect
import itertools
import json
import re
from collections.abc import AsyncGenerator, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeVar, cast

from google.genai import live, types
from pydantic import BaseModel

from realtime_resumption.duration import parse_duration
from realtime_resumption.gemini import sdk_internals
from realtime_resumption.transport import ToolCall, UsageModalityBreakdown


@dataclass(frozen=True, slots=True)
class ModelAudio:
    data: bytes


@dataclass(frozen=True, slots=True)
class ModelText:
    text: str


@dataclass(frozen=True, slots=True)
class ModelThought:
    text: str


@dataclass(frozen=True, slots=True)
class Grounding:
    metadata: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class InputTranscript:
    text: str


@dataclass(frozen=True, slots=True)
class OutputTranscript:
    text: str


@dataclass(frozen=True, slots=True)
class Interrupted:
    pass


@dataclass(frozen=True, slots=True)
class GenerationComplete:
    pass


@dataclass(frozen=True, slots=True)
class TurnComplete:
    pass


@dataclass(frozen=True, slots=True)
class ToolCalls:
    calls: tuple[ToolCall, ...]
    without_id: frozenset[str]
    """Ids the transport made up because the provider sent none: answer them without one."""


@dataclass(frozen=True, slots=True)
class ToolCallsCancelled:
    ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class GoAway:
    time_left: str | None
    """The raw notice; None when the provider gave none."""
    seconds: float | None
    """The notice in seconds; None when absent or malformed."""


@dataclass(frozen=True, slots=True)
class ResumptionUpdate:
    handle: str | None
    resumable: bool
    last_consumed_client_message_index: int | None


@dataclass(frozen=True, slots=True)
class Usage:
    raw: Mapping[str, Any]
    prompt_tokens: int | None
    response_tokens: int | None
    total_tokens: int | None
    breakdown: UsageModalityBreakdown
    final: bool
    """The usage came with the end of the server turn."""


@dataclass(frozen=True, slots=True)
class SpeechStarted:
    pass


@dataclass(frozen=True, slots=True)
class SpeechStopped:
    pass


Event = (
    ModelAudio
    | ModelText
    | ModelThought
    | Grounding
    | InputTranscript
    | OutputTranscript
    | Interrupted
    | GenerationComplete
    | TurnComplete
    | ToolCalls
    | ToolCallsCancelled
    | GoAway
    | ResumptionUpdate
    | Usage
    | SpeechStarted
    | SpeechStopped
)

_INTERRUPTED = Interrupted()
_GENERATION_COMPLETE = GenerationComplete()
_TURN_COMPLETE = TurnComplete()
_SPEECH_STARTED = SpeechStarted()
_SPEECH_STOPPED = SpeechStopped()


class Translator:
    """Turns server messages into events; keeps the counter for ids it has to make up."""

    def __init__(self) -> None:
        self._made_up_ids = itertools.count(1)

    def events(self, message: types.LiveServerMessage) -> Iterator[Event]:
        """The events ``message`` carries, in the order to act on them."""
        content = message.server_content
        if message.usage_metadata is not None:
            yield _usage(message.usage_metadata, final=bool(content and content.turn_complete))
        if content is not None:
            yield from _content_events(content)
        if message.tool_call is not None and message.tool_call.function_calls:
            yield self._tool_calls(message.tool_call.function_calls)
        cancellation = message.tool_call_cancellation
        if cancellation is not None and cancellation.ids:
            yield ToolCallsCancelled(tuple(cancellation.ids))
        if message.go_away is not None:
            raw = message.go_away.time_left
            yield GoAway(raw, parse_duration(raw))
        update = message.session_resumption_update
        if update is not None:
            yield ResumptionUpdate(
                update.new_handle or None,
                bool(update.resumable),
                update.last_consumed_client_message_index,
            )
        activity = message.voice_activity
        if activity is not None:
            if activity.voice_activity_type == types.VoiceActivityType.ACTIVITY_START:
                yield _SPEECH_STARTED
            elif activity.voice_activity_type == types.VoiceActivityType.ACTIVITY_END:
                yield _SPEECH_STOPPED

    def _tool_calls(self, calls: list[types.FunctionCall]) -> ToolCalls:
        out: list[ToolCall] = []
        without_id: set[str] = set()
        for call in calls:
            name = call.name or ""
            call_id = call.id
            if not call_id:
                # Vertex AI may omit ids; answers then go back without one (the Gemini API
                # takes none: the receiver reports such calls and does not run them).
                call_id = f"{name}#{next(self._made_up_ids)}"
                without_id.add(call_id)
            out.append(ToolCall(id=call_id, name=name, args=dict(call.args or {})))
        return ToolCalls(tuple(out), frozenset(without_id))


def _content_events(content: types.LiveServerContent) -> Iterator[Event]:
    turn = content.model_turn
    if turn is not None:
        for part in turn.parts or ():
            if part.text:
                yield ModelThought(part.text) if part.thought else ModelText(part.text)
            elif part.inline_data is not None and part.inline_data.data:
                mime = part.inline_data.mime_type or ""
                if not mime or mime.startswith("audio/"):
                    yield ModelAudio(part.inline_data.data)
    if content.grounding_metadata is not None:
        yield Grounding(content.grounding_metadata.model_dump(mode="json", exclude_none=True))
    if content.input_transcription is not None and content.input_transcription.text:
        yield InputTranscript(content.input_transcription.text)
    if content.output_transcription is not None and content.output_transcription.text:
        yield OutputTranscript(content.output_transcription.text)
    if content.interrupted:
        yield _INTERRUPTED
    if content.generation_complete:
        yield _GENERATION_COMPLETE
    if content.turn_complete:
        yield _TURN_COMPLETE


def _modality_counts(details: list[types.ModalityTokenCount] | None) -> dict[str, int]:
    counts: dict[str, int] = {}
    for detail in details or ():
        if detail.modality is not None and detail.token_count is not None:
            counts[detail.modality.value] = detail.token_count
    return counts


def _usage(usage: types.UsageMetadata, *, final: bool) -> Usage:
    prompt = _modality_counts(usage.prompt_tokens_details)
    response = _modality_counts(usage.response_tokens_details)
    breakdown = UsageModalityBreakdown(
        input_text_tokens=prompt.get("TEXT"),
        input_audio_tokens=prompt.get("AUDIO"),
        input_image_tokens=prompt.get("IMAGE"),
        cached_tokens=usage.cached_content_token_count,
        output_text_tokens=response.get("TEXT"),
        output_audio_tokens=response.get("AUDIO"),
        reasoning_tokens=usage.thoughts_token_count,
    )
    return Usage(
        raw=usage.model_dump(mode="json", exclude_none=True),
        prompt_tokens=usage.prompt_token_count,
        response_tokens=usage.response_token_count,
        total_tokens=usage.total_token_count,
        breakdown=breakdown,
        final=final,
    )


# --- reading -------------------------------------------------------------------------------------

_BASE64: Final = re.compile(r"[A-Za-z0-9+/_-]*={0,2}")
"""What the SDK decodes as base64: either alphabet, padded or not."""
_TO_STANDARD: Final = bytes.maketrans(b"-_", b"+/")


def _decoded(text: object) -> bytes | None:
    """``text`` as the SDK decodes base64 media; None when it might read it otherwise."""
    if not isinstance(text, str) or _BASE64.fullmatch(text) is None or len(text) % 4 == 1:
        return None
    raw = text.rstrip("=").encode("ascii").translate(_TO_STANDARD)
    try:
        return base64.b64decode(raw + b"=" * (-len(raw) % 4), validate=True)
    except binascii.Error:
        return None


_M = TypeVar("_M", bound=BaseModel)


def _constructor(cls: type[_M]) -> Callable[..., _M]:
    """``cls.model_construct`` for the few models an audio frame makes, at a fifth of its
    cost: pydantic's looks up each field's default on every call (the SDK's models have 10
    to 20 fields), and these defaults are all None. The instance is set up as
    ``model_construct`` sets it up; a model with another default, private attributes or
    extra fields gets ``model_construct`` itself. (``Reader`` checks the result against the
    SDK's reading before using it.)"""
    fields = cls.model_fields
    plain = (
        all(f.default is None and f.default_factory is None for f in fields.values())
        and not cls.__private_attributes__
        and cls.model_config.get("extra") != "allow"
    )
    if not plain:
        return cls.model_construct
    defaults = dict.fromkeys(fields)
    new = cls.__new__
    set_attribute = object.__setattr__

    def construct(**values: Any) -> _M:
        model = new(cls)
        state = defaults.copy()
        state.update(values)
        set_attribute(model, "__dict__", state)
        set_attribute(model, "__pydantic_fields_set__", set(values))
        set_attribute(model, "__pydantic_extra__", None)
        set_attribute(model, "__pydantic_private__", None)
        return model

    return construct


_BLOB: Final = _constructor(types.Blob)
_PART: Final = _constructor(types.Part)
_CONTENT: Final = _constructor(types.Content)
_SERVER_CONTENT: Final = _constructor(types.LiveServerContent)
_SERVER_MESSAGE: Final = _constructor(types.LiveServerMessage)


def audio_message(frame: str | bytes) -> types.LiveServerMessage | None:
    """The message of a server frame that carries the model's media and nothing else (most
    of an answer: ``serverContent.modelTurn`` with ``inlineData`` parts), built from one
    JSON parse and one base64 decode per part; None for any other frame, which the SDK
    reads. The result equals the SDK's own reading (``Reader`` checks that once)."""
    try:
        message = json.loads(frame)
    except ValueError:
        return None
    if type(message) is not dict or len(message) != 1:
        return None
    content = message.get("serverContent")
    if type(content) is not dict or len(content) != 1:
        return None
    turn = content.get("modelTurn")
    if type(turn) is not dict or not turn.keys() <= {"parts", "role"}:
        return None
    parts = turn.get("parts")
    role = turn.get("role")
    if type(parts) is not list or not parts or not (role is None or type(role) is str):
        return None
    built = []
    for part in parts:
        if type(part) is not dict or len(part) != 1:
            return None
        blob = part.get("inlineData")
        if type(blob) is not dict or blob.keys() != {"data", "mimeType"}:
            return None
        data = _decoded(blob["data"])
        mime_type = blob["mimeType"]
        if data is None or type(mime_type) is not str:
            return None
        built.append(_PART(inline_data=_BLOB(data=data, mime_type=mime_type)))
    model_turn = _CONTENT(parts=built, role=role) if "role" in turn else _CONTENT(parts=built)
    return _SERVER_MESSAGE(server_content=_SERVER_CONTENT(model_turn=model_turn))


def _takes_decode(recv: object) -> bool:
    """Whether ``recv`` is a WebSocket's ``recv`` that can return a text frame undecoded
    (websockets 13+), as the SDK asks it to."""
    if not callable(recv):
        return False
    try:
        return "decode" in inspect.signature(recv).parameters
    except (TypeError, ValueError):
        return False


class _OneFrame:
    """A WebSocket that holds one frame (or the error reading it raised) for the SDK."""

    __slots__ = ("_frame",)

    def __init__(self) -> None:
        self._frame: str | bytes | BaseException = b""

    def load(self, frame: str | bytes | BaseException) -> None:
        self._frame = frame

    async def recv(self, decode: bool | None = None) -> str | bytes:
        frame = self._frame
        if isinstance(frame, BaseException):
            raise frame
        return frame


_PROBE: Final = json.dumps(
    {
        "serverContent": {
            "modelTurn": {
                "role": "model",
                "parts": [
                    {"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": "AAD7/w=="}},
                    {"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": "-_8Q"}},
                ],
            }
        }
    }
)
"""An audio frame with both base64 alphabets, padded and not, and a role."""

_READ_AS_SDK: dict[bool, bool] = {}
"""Vertex or not -> whether :func:`audio_message` reads frames as this SDK does."""


class Reader:
    """Reads server messages from one SDK session.

    Frames of model audio, most of what a call receives, are read by :func:`audio_message`:
    the SDK runs its converters and validates five pydantic models for each one, about four
    fifths of the receive path's CPU. Every other frame, and the errors of reading one (a
    close, a frame it cannot parse), is read by the SDK itself, from the frame already
    received. Whether :func:`audio_message` agrees with the SDK is checked once per process
    and API flavour on a probe frame; an SDK that reads it otherwise reads every frame.
    """

    def __init__(self, session: live.AsyncSession) -> None:
        self._session = session
        # The SDK keeps its WebSocket and client private (``sdk_internals``): without them,
        # every frame goes through the SDK's own receive.
        ws = sdk_internals.session_socket(session)
        client = sdk_internals.session_client(session)
        self._ws = ws if client is not None and _takes_decode(getattr(ws, "recv", None)) else None
        self._vertex = bool(getattr(client, "vertexai", False))
        self._frame = _OneFrame()
        self._sdk = live.AsyncSession(api_client=client, websocket=self._frame)  # type: ignore[arg-type]

    async def next(self) -> types.LiveServerMessage:
        """The next server message; raises what the SDK's ``receive`` raises."""
        ws = self._ws
        if ws is None:
            return await self._read(self._session)
        try:
            frame: str | bytes | BaseException = await ws.recv(decode=False)
        except Exception as error:
            frame = error
        if not isinstance(frame, BaseException):
            direct = _READ_AS_SDK.get(self._vertex)
            if direct is None:
                direct = _READ_AS_SDK[self._vertex] = await self._read_as_sdk()
            message = audio_message(frame) if direct else None
            if message is not None:
                return message
        self._frame.load(frame)
        return await self._read(self._sdk)

    async def _read_as_sdk(self) -> bool:
        """Whether the SDK reads the probe frame as :func:`audio_message` does."""
        self._frame.load(_PROBE)
        try:
            return await self._read(self._sdk) == audio_message(_PROBE)
        except Exception:
            return False

    @staticmethod
    async def _read(session: live.AsyncSession) -> types.LiveServerMessage:
        """The SDK's reading of the next frame on ``session`` (its public ``receive``, closed
        after one message)."""
        # An async generator (typed as an iterator): closed here, not left to the loop's
        # finalizer, which would start a task per message.
        messages = cast(AsyncGenerator[types.LiveServerMessage, None], session.receive())
        try:
            return await anext(messages)
        finally:
            await messages.aclose()
