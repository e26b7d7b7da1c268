"""The Live API wire format: parsing client messages, building server messages.

Clients mix spellings (the Python SDK sends ``realtime_input`` with camelCase inside it, and
nested configuration objects keep snake_case), so every field is looked up under both its
snake_case and camelCase names, at every level. Bytes are base64 in either alphabet, padded or
not. Server messages are built in the spelling the service uses (camelCase, standard base64)
and sent as binary frames.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Final

INVALID_ARGUMENT = "Request contains an invalid argument."
"""Reason the service gives with close code 1007."""


MODEL_NOT_FOUND: Final = 1008
"""The close code the service answers a setup with when the dialled API version does not serve
its model."""

_GEMINI_API_VERSION: Final = re.compile(r"/ws/google\.ai\.generativelanguage\.([A-Za-z0-9]+)\.")
_CLOSE_REASON_BYTES: Final = 123
"""The most a close frame's reason carries (RFC 6455); the service cuts its text to fit."""


def model_not_served(path: str, model: str) -> str | None:
    """The service's close reason (code ``MODEL_NOT_FOUND``) for a setup naming ``model`` on
    the endpoint ``path``, or None where that endpoint serves it.

    On the Gemini API, ``-latest`` aliases exist on ``v1beta`` only (the google-genai 3.0
    notes): dialled on ``v1`` (3.x's default) or any other version, the alias is answered as an
    unknown model is, with the service's text cut to what a close frame carries. Whether other
    models are served on ``v1`` is not documented; they are served on every version here."""
    match = _GEMINI_API_VERSION.search(path)
    name = model.removeprefix("models/")
    if match is None or not name.endswith("-latest") or match.group(1) == "v1beta":
        return None
    text = (
        f"models/{name} is not found for API version {match.group(1)}, or is not supported for "
        "bidiGenerateContent. Call ListModels to see the list of available models and their "
        "supported methods."
    )
    return text.encode()[:_CLOSE_REASON_BYTES].decode(errors="ignore")


class WireError(ValueError):
    """A client message the service would reject (close 1007)."""


@lru_cache(maxsize=256)
def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _snake(name: str) -> str:
    """The snake_case spelling of a camelCase ``name`` (the inverse of ``_camel``)."""
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


def get(obj: Mapping[str, Any], name: str) -> Any:
    """``obj[name]`` under its snake_case or camelCase spelling (``name`` is snake_case)."""
    value = obj.get(name)
    if value is None:
        value = obj.get(_camel(name))
    return value


def _dict(value: Any, what: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise WireError(f"{what} must be an object")
    return value


def _list(value: Any, what: str) -> Sequence[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise WireError(f"{what} must be a list")
    return value


def decode_bytes(value: Any) -> bytes:
    """Base64 in the standard or URL-safe alphabet, with or without padding."""
    if not isinstance(value, str):
        raise WireError("bytes must be a base64 string")
    text = value.strip().replace("-", "+").replace("_", "/")
    text += "=" * (-len(text) % 4)
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise WireError("invalid base64") from exc


def _content_text(content: Any) -> str:
    """The text parts of a Content (or a plain string), joined."""
    if isinstance(content, str):
        return content
    parts = _list(get(_dict(content, "content"), "parts"), "parts")
    texts = [get(_dict(p, "part"), "text") for p in parts]
    return " ".join(t for t in texts if isinstance(t, str))


def _functions(tools: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The declared functions' names, and those of them declared ``behavior: BLOCKING``."""
    names: list[str] = []
    blocking: list[str] = []
    for tool in _list(tools, "tools"):
        for decl in _list(get(_dict(tool, "tool"), "function_declarations"), "declarations"):
            decl = _dict(decl, "function declaration")
            name = get(decl, "name")
            if not isinstance(name, str) or not name:
                raise WireError("a function declaration needs a name")
            names.append(name)
            if str(get(decl, "behavior") or "").upper() == "BLOCKING":
                blocking.append(name)
    return tuple(names), tuple(blocking)


# --- client messages ---------------------------------------------------------------------


@dataclass(frozen=True)
class Resumption:
    """The setup's ``sessionResumption``: the handle to resume from, if any."""

    handle: str | None
    transparent: bool


@dataclass(frozen=True)
class Setup:
    """What the emulator uses of a ``setup`` message."""

    model: str
    text_modality: bool
    system_instruction: str
    functions: tuple[str, ...]
    resumption: Resumption | None
    input_transcription: bool
    output_transcription: bool
    automatic_activity_detection: bool
    interrupts: bool
    response_modalities: tuple[str, ...] = ()
    """As the client spelt them, upper-cased (``("AUDIO",)``); empty when absent."""
    voice: str | None = None
    """The prebuilt voice's name, if the setup chose one."""
    generation: Mapping[str, Any] = field(default_factory=dict)
    """The rest of ``generationConfig`` (temperature, thinking, ...), keys in snake_case, and
    the setup's ``proactivity``."""
    compression: bool = False
    """``contextWindowCompression`` with a ``slidingWindow``: the session has no cap."""
    blocking_functions: tuple[str, ...] = ()
    """The declared functions whose declaration says ``behavior: BLOCKING``."""
    history_in_client_content: bool = False
    """``historyConfig.initialHistoryInClientContent``: history is seeded with content."""


@dataclass(frozen=True)
class Audio:
    """Audio input: realtime, or an inline part of a turn."""

    data: bytes
    mime_type: str


@dataclass(frozen=True)
class ClientContent:
    """``client_content``: turns of text, and whether the user's turn is complete."""

    text: str
    turn_complete: bool
    turns: tuple[tuple[str, str], ...] = ()
    """(role, text) of each turn, in order (role ``""`` when absent)."""
    audio: tuple[Audio, ...] = ()
    """Inline audio parts of the turns, in order."""


@dataclass(frozen=True)
class Video:
    """Realtime video (image) input."""

    data: bytes
    mime_type: str


@dataclass(frozen=True)
class Text:
    """Realtime text input: a whole user turn."""

    text: str


@dataclass(frozen=True)
class AudioStreamEnd:
    """The client's audio stream paused."""


@dataclass(frozen=True)
class ActivityStart:
    """The client marks the start of user activity."""


@dataclass(frozen=True)
class ActivityEnd:
    """The client marks the end of user activity."""


RealtimeEvent = Audio | Video | Text | AudioStreamEnd | ActivityStart | ActivityEnd


@dataclass(frozen=True)
class RealtimeInput:
    """``realtime_input``: one or more realtime events, in order."""

    events: tuple[RealtimeEvent, ...]


@dataclass(frozen=True)
class FunctionResponse:
    """One function response: the call id it answers (if given), the function name, and its
    ``scheduling`` (upper-cased; None when absent)."""

    id: str | None
    name: str | None
    scheduling: str | None = None


@dataclass(frozen=True)
class ToolResponse:
    """``tool_response``: results for earlier tool calls."""

    responses: tuple[FunctionResponse, ...]


@dataclass(frozen=True)
class ContextUpdate:
    """``contextUpdate``: a new system instruction and/or tool list."""

    system_instruction: str | None
    functions: tuple[str, ...] | None
    blocking_functions: tuple[str, ...] = ()
    """Of ``functions``, those declared ``behavior: BLOCKING``."""


ClientMessage = Setup | ClientContent | RealtimeInput | ToolResponse | ContextUpdate

_KINDS = {
    "setup": "setup",
    "client_content": "client_content",
    "clientContent": "client_content",
    "realtime_input": "realtime_input",
    "realtimeInput": "realtime_input",
    "tool_response": "tool_response",
    "toolResponse": "tool_response",
    "context_update": "context_update",
    "contextUpdate": "context_update",
}


def parse_client_message(raw: str | bytes) -> ClientMessage:
    """Parse one client frame; raises WireError for anything the service would reject."""
    try:
        obj = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise WireError("invalid JSON") from exc
    if not isinstance(obj, dict) or len(obj) != 1:
        raise WireError("a client message is an object with exactly one field")
    ((key, body),) = obj.items()
    kind = _KINDS.get(key)
    if kind is None:
        raise WireError(f"unknown field {key[:40]!r}")
    body = _dict(body, key)
    if kind == "setup":
        return _parse_setup(body)
    if kind == "client_content":
        return _parse_client_content(body)
    if kind == "realtime_input":
        return _parse_realtime_input(body)
    if kind == "tool_response":
        return _parse_tool_response(body)
    return _parse_context_update(body)


def _parse_setup(body: Mapping[str, Any]) -> Setup:
    model = get(body, "model")
    if not isinstance(model, str) or not model:
        raise WireError("setup needs a model")
    generation = _dict(get(body, "generation_config"), "generationConfig")
    modalities = [str(m).upper() for m in _list(get(generation, "response_modalities"), "m")]
    resumption = None
    if "sessionResumption" in body or "session_resumption" in body:
        raw_res = get(body, "session_resumption")
        res = _dict(raw_res, "sessionResumption")
        handle = get(res, "handle")
        if handle is not None and not isinstance(handle, str):
            raise WireError("sessionResumption.handle must be a string")
        resumption = Resumption(handle=handle or None, transparent=bool(get(res, "transparent")))
    realtime = _dict(get(body, "realtime_input_config"), "realtimeInputConfig")
    detection = _dict(get(realtime, "automatic_activity_detection"), "detection")
    handling = get(realtime, "activity_handling")
    instruction = get(body, "system_instruction")
    compression = _dict(get(body, "context_window_compression"), "contextWindowCompression")
    speech = _dict(get(generation, "speech_config"), "speechConfig")
    functions, blocking = _functions(get(body, "tools"))
    history = _dict(get(body, "history_config"), "historyConfig")
    voice_config = _dict(get(speech, "voice_config"), "voiceConfig")
    prebuilt = _dict(get(voice_config, "prebuilt_voice_config"), "prebuiltVoiceConfig")
    voice = get(prebuilt, "voice_name")
    if voice is not None and not isinstance(voice, str):
        raise WireError("voiceName must be a string")
    return Setup(
        model=model,
        text_modality=modalities == ["TEXT"],
        system_instruction=_content_text(instruction) if instruction is not None else "",
        functions=functions,
        resumption=resumption,
        input_transcription=get(body, "input_audio_transcription") is not None,
        output_transcription=get(body, "output_audio_transcription") is not None,
        automatic_activity_detection=not bool(get(detection, "disabled")),
        interrupts=handling != "NO_INTERRUPTION",
        response_modalities=tuple(modalities),
        voice=voice or None,
        generation=_generation_settings(generation, get(body, "proactivity")),
        compression=get(compression, "sliding_window") is not None,
        blocking_functions=blocking,
        history_in_client_content=bool(get(history, "initial_history_in_client_content")),
    )


_NOT_GENERATION: Final = frozenset({"response_modalities", "speech_config"})


def _generation_settings(generation: Mapping[str, Any], proactivity: object) -> dict[str, Any]:
    settings: dict[str, Any] = _snake_keys(generation)
    for key in _NOT_GENERATION:
        settings.pop(key, None)
    if proactivity is not None:
        settings["proactivity"] = _snake_keys(proactivity)
    return settings


def _snake_keys(value: Any) -> Any:
    """``value`` with every mapping's keys in snake_case (clients may spell them either way)."""
    if isinstance(value, Mapping):
        return {_snake(str(key)): _snake_keys(item) for key, item in value.items()}
    return value


def _parse_client_content(body: Mapping[str, Any]) -> ClientContent:
    turns = get(body, "turns")
    if isinstance(turns, Mapping):
        turns = [turns]
    parsed: list[tuple[str, str]] = []
    audio: list[Audio] = []
    for turn in _list(turns, "turns"):
        text = _content_text(turn)
        role = get(turn, "role") if isinstance(turn, Mapping) else None
        parsed.append((role if isinstance(role, str) else "", text))
        if isinstance(turn, Mapping):
            for part in _list(get(turn, "parts"), "parts"):
                inline = get(_dict(part, "part"), "inline_data")
                if inline is not None:
                    data, mime = _blob(inline, "inlineData")
                    if not mime.startswith(("image/", "video/")):
                        audio.append(Audio(data, mime))
    return ClientContent(
        text=" ".join(text for _, text in parsed if text),
        turn_complete=bool(get(body, "turn_complete")),
        turns=tuple(parsed),
        audio=tuple(audio),
    )


def _blob(value: Any, what: str) -> tuple[bytes, str]:
    blob = _dict(value, what)
    mime = get(blob, "mime_type")
    return decode_bytes(get(blob, "data") or ""), mime if isinstance(mime, str) else ""


_REALTIME_FIELDS = frozenset(
    {
        "audio",
        "video",
        "text",
        "media_chunks",
        "mediaChunks",
        "audio_stream_end",
        "audioStreamEnd",
        "activity_start",
        "activityStart",
        "activity_end",
        "activityEnd",
    }
)


def _parse_realtime_input(body: Mapping[str, Any]) -> RealtimeInput:
    unknown = set(body) - _REALTIME_FIELDS
    if unknown:
        raise WireError(f"unknown realtime_input field {sorted(unknown)[0][:40]!r}")
    events: list[RealtimeEvent] = []
    for media in _list(get(body, "media_chunks"), "mediaChunks"):
        data, mime = _blob(media, "media chunk")
        events.append(
            Video(data, mime) if mime.startswith(("image/", "video/")) else Audio(data, mime)
        )
    if get(body, "activity_start") is not None:
        events.append(ActivityStart())
    if get(body, "audio") is not None:
        events.append(Audio(*_blob(get(body, "audio"), "audio")))
    if get(body, "video") is not None:
        events.append(Video(*_blob(get(body, "video"), "video")))
    text = get(body, "text")
    if text is not None:
        if not isinstance(text, str):
            raise WireError("realtime_input.text must be a string")
        events.append(Text(text))
    if get(body, "audio_stream_end"):
        events.append(AudioStreamEnd())
    if get(body, "activity_end") is not None:
        events.append(ActivityEnd())
    return RealtimeInput(tuple(events))


def _parse_tool_response(body: Mapping[str, Any]) -> ToolResponse:
    responses = []
    for item in _list(get(body, "function_responses"), "functionResponses"):
        item = _dict(item, "function response")
        call_id, name = get(item, "id"), get(item, "name")
        scheduling = get(item, "scheduling")
        responses.append(
            FunctionResponse(
                id=call_id if isinstance(call_id, str) and call_id else None,
                name=name if isinstance(name, str) else None,
                scheduling=scheduling.upper() if isinstance(scheduling, str) else None,
            )
        )
    return ToolResponse(tuple(responses))


def _parse_context_update(body: Mapping[str, Any]) -> ContextUpdate:
    instruction = get(body, "system_instruction")
    tools = get(body, "tools")
    if isinstance(tools, Mapping):  # LiveClientContextUpdateTools wraps the list
        tools = get(tools, "tools")
    functions, blocking = _functions(tools) if tools is not None else (None, ())
    return ContextUpdate(
        system_instruction=_content_text(instruction) if instruction is not None else None,
        functions=functions,
        blocking_functions=blocking,
    )


def kind_of(message: ClientMessage) -> str:
    """A short name for a client message, as the ledger records it."""
    if isinstance(message, RealtimeInput):
        names = {
            Audio: "audio",
            Video: "video",
            Text: "text",
            AudioStreamEnd: "audio_stream_end",
            ActivityStart: "activity_start",
            ActivityEnd: "activity_end",
        }
        return "+".join(names[type(e)] for e in message.events) or "realtime_input"
    return {
        Setup: "setup",
        ClientContent: "client_content",
        ToolResponse: "tool_response",
        ContextUpdate: "context_update",
    }[type(message)]


# --- server messages ---------------------------------------------------------------------

ServerMessage = dict[str, Any]


def encode(message: ServerMessage) -> bytes:
    """A server message as the bytes of a binary frame."""
    return json.dumps(message, separators=(",", ":")).encode()


def format_duration(seconds: float) -> str:
    """A protobuf Duration string: ``"50s"``, ``"0.500s"``, ``"1.000340012s"``."""
    total = round(seconds * 1_000_000_000)
    sign = "-" if total < 0 else ""
    whole, nanos = divmod(abs(total), 1_000_000_000)
    if nanos == 0:
        return f"{sign}{whole}s"
    if nanos % 1_000_000 == 0:
        return f"{sign}{whole}.{nanos // 1_000_000:03d}s"
    if nanos % 1_000 == 0:
        return f"{sign}{whole}.{nanos // 1_000:06d}s"
    return f"{sign}{whole}.{nanos:09d}s"


def setup_complete(session_id: str) -> ServerMessage:
    """``setupComplete`` carrying the session id."""
    return {"setupComplete": {"sessionId": session_id}}


def audio_part(data: bytes, rate: int) -> ServerMessage:
    """A model-turn message with one inline audio part."""
    blob = {"mimeType": f"audio/pcm;rate={rate}", "data": base64.b64encode(data).decode()}
    return {"serverContent": {"modelTurn": {"parts": [{"inlineData": blob}]}}}


def text_part(text: str) -> ServerMessage:
    """A model-turn message with one text part."""
    return {"serverContent": {"modelTurn": {"parts": [{"text": text}]}}}


def input_transcription(text: str) -> ServerMessage:
    """A delta of the user's transcribed speech."""
    return {"serverContent": {"inputTranscription": {"text": text}}}


def output_transcription(text: str) -> ServerMessage:
    """A delta of the model's transcribed speech."""
    return {"serverContent": {"outputTranscription": {"text": text}}}


def generation_complete() -> ServerMessage:
    """The model finished generating this answer."""
    return {"serverContent": {"generationComplete": True}}


def interrupted() -> ServerMessage:
    """The user interrupted the answer."""
    return {"serverContent": {"interrupted": True}}


def turn_complete(usage: Mapping[str, int]) -> ServerMessage:
    """The model's turn is over, with the turn's token usage."""
    return {"serverContent": {"turnComplete": True}, "usageMetadata": dict(usage)}


def tool_call(calls: Sequence[tuple[str, str]]) -> ServerMessage:
    """A tool call asking for each (id, function name), with empty arguments."""
    return {"toolCall": {"functionCalls": [{"id": i, "name": n, "args": {}} for i, n in calls]}}


def tool_call_cancellation(ids: Sequence[str]) -> ServerMessage:
    """The given tool calls should not have been executed."""
    return {"toolCallCancellation": {"ids": list(ids)}}


def go_away(time_left: float | None) -> ServerMessage:
    """``goAway`` with ``timeLeft`` as a Duration string, or ``{}`` without a figure."""
    body = {} if time_left is None else {"timeLeft": format_duration(time_left)}
    return {"goAway": body}


def resumption_update(
    handle: str | None, resumable: bool, last_consumed: int | None = None
) -> ServerMessage:
    """``sessionResumptionUpdate`` in proto3 JSON: false booleans and absent values omitted."""
    body: dict[str, Any] = {}
    if handle is not None:
        body["newHandle"] = handle
    if resumable:
        body["resumable"] = True
    if last_consumed is not None:
        body["lastConsumedClientMessageIndex"] = str(last_consumed)
    return {"sessionResumptionUpdate": body}


def voice_activity(start: bool, audio_offset: float) -> ServerMessage:
    """The user's speech started or stopped, ``audio_offset`` seconds into the input audio.

    The field is ``type`` on the wire (the SDK maps it to ``voice_activity_type``)."""
    kind = "ACTIVITY_START" if start else "ACTIVITY_END"
    return {"voiceActivity": {"type": kind, "audioOffset": format_duration(audio_offset)}}
