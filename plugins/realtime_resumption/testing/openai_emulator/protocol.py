"""The OpenAI Realtime wire: client events in, server events out, in the GA or the beta spelling.

Sources: the ``openai`` SDK 3.63's types (``openai/types/realtime/`` for GA,
``openai/types/beta/realtime/`` for beta), which Pipecat 1.14 mirrors as strict pydantic models
(``pipecat/services/openai/realtime/events.py``) and LiveKit 1.8.9 reads
(``livekit/agents/llm/_realtime/openai.py``). GA and beta differ in names only where
:data:`BETA_NAMES` says, and in the session's shape (GA nests the audio settings under
``audio.input``/``audio.output``; beta keeps them flat), which :class:`SessionConfig` reads and
writes both ways.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from .service_config import VOICES

Flavour = Literal["ga", "beta"]

BETA_NAMES: dict[str, str] = {
    "conversation.item.added": "conversation.item.created",
    "response.output_audio.delta": "response.audio.delta",
    "response.output_audio.done": "response.audio.done",
    "response.output_audio_transcript.delta": "response.audio_transcript.delta",
    "response.output_audio_transcript.done": "response.audio_transcript.done",
    "response.output_text.delta": "response.text.delta",
    "response.output_text.done": "response.text.done",
}
"""GA server event names the beta protocol spells otherwise (LiveKit's ``_AZURE_EVENT_MAPPING``
maps the same pairs back). ``conversation.item.done`` has no beta counterpart: the beta service
sends ``conversation.item.created`` only."""

GA_ONLY: frozenset[str] = frozenset({"conversation.item.done"})

CLIENT_EVENTS: tuple[str, ...] = (
    "session.update",
    "input_audio_buffer.append",
    "input_audio_buffer.commit",
    "input_audio_buffer.clear",
    "conversation.item.create",
    "conversation.item.retrieve",
    "conversation.item.truncate",
    "conversation.item.delete",
    "response.create",
    "response.cancel",
    "output_audio_buffer.clear",
)
"""The client events of ``openai.types.realtime.RealtimeClientEvent`` (GA; the beta union is
the same without ``output_audio_buffer.clear`` and ``conversation.item.retrieve``)."""

DEFAULT_TURN_DETECTION: dict[str, Any] = {
    "type": "server_vad",
    "threshold": 0.5,
    "prefix_padding_ms": 300,
    "silence_duration_ms": 500,
    "idle_timeout_ms": None,
    "create_response": True,
    "interrupt_response": True,
}
"""Server VAD as a new session has it (API reference, ``turn_detection``: threshold 0.5,
300 ms prefix padding, 500 ms of silence; a response is created on a commit and interrupts the
one in progress)."""

PCM = {"type": "audio/pcm", "rate": 24000}

SESSION_KEYS: dict[Flavour, frozenset[str]] = {
    "ga": frozenset(
        "type audio include instructions max_output_tokens model output_modalities "
        "parallel_tool_calls prompt reasoning tool_choice tools tracing truncation".split()
    ),
    "beta": frozenset(
        "client_secret input_audio_format input_audio_noise_reduction input_audio_transcription "
        "instructions max_response_output_tokens modalities model output_audio_format speed "
        "temperature tool_choice tools tracing turn_detection voice".split()
    ),
}
"""The session fields each protocol takes (the ``openai`` SDK's
``RealtimeSessionCreateRequestParam``, GA, and beta ``SessionUpdateEventParam.Session``): the
API refuses any other ("Unknown parameter"), so a beta-shaped update sent to the GA service,
or a GA one to Azure's preview surface, fails (Pipecat's Azure service warns of the latter)."""
AUDIO_KEYS = {
    "input": frozenset({"format", "transcription", "noise_reduction", "turn_detection"}),
    "output": frozenset({"format", "voice", "speed"}),
}


class ProtocolError(Exception):
    """A client event the service answers with an ``error`` event (the connection stays open)."""

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        type_: str = "invalid_request_error",
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.param = param
        self.type = type_


def error_event(exc: ProtocolError, client_event_id: str | None = None) -> dict[str, Any]:
    """The ``error`` server event (``openai.types.realtime.RealtimeErrorEvent``: ``error`` with
    ``type``, ``code``, ``message``, ``param`` and the client's ``event_id``)."""
    return {
        "type": "error",
        "error": {
            "type": exc.type,
            "code": exc.code,
            "message": exc.message,
            "param": exc.param,
            "event_id": client_event_id,
        },
    }


def parse_client_event(raw: str | bytes) -> dict[str, Any]:
    """One client frame as an event object with a known ``type``; :class:`ProtocolError` for
    anything else (the service answers a bad frame with an ``error`` event and stays open)."""
    if isinstance(raw, bytes):
        raise ProtocolError(
            "Binary frames are not supported; send JSON client events as text.",
            code="invalid_json",
        )
    try:
        event = json.loads(raw)
    except ValueError:
        raise ProtocolError(
            "We could not parse the JSON body of your request. (HINT: This likely means you "
            "aren't using your HTTP library correctly.)",
            code="invalid_json",
        ) from None
    if not isinstance(event, dict):
        raise ProtocolError(
            "Invalid type for event: expected an object.", code="invalid_type", param="event"
        )
    kind = event.get("type")
    if not isinstance(kind, str):
        raise ProtocolError(
            "Missing required parameter: 'type'.", code="missing_required_parameter", param="type"
        )
    if kind not in CLIENT_EVENTS:
        supported = ", ".join(f"'{name}'" for name in CLIENT_EVENTS)
        raise ProtocolError(
            f"Invalid value: '{kind[:100]}'. Supported values are: {supported}.",
            code="invalid_value",
            param="type",
        )
    return event


def field_of(event: dict[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    """``event[name]``, which must be present and of ``kind``."""
    if name not in event or event[name] is None:
        raise ProtocolError(
            f"Missing required parameter: '{name}'.", code="missing_required_parameter", param=name
        )
    value = event[name]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise ProtocolError(f"Invalid type for '{name}'.", code="invalid_type", param=name)
    return value


def _known(body: dict[str, Any], keys: frozenset[str], param: str) -> None:
    for key in body:
        if key not in keys:
            raise ProtocolError(
                f"Unknown parameter: '{param}.{str(key)[:100]}'.",
                code="unknown_parameter",
                param=f"{param}.{str(key)[:100]}",
            )


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _modalities(value: Any, param: str) -> list[str]:
    if not isinstance(value, list) or not value or any(m not in ("audio", "text") for m in value):
        raise ProtocolError(
            f"Invalid '{param}': expected a list of 'audio' or 'text'.",
            code="invalid_value",
            param=param,
        )
    return list(value)


def _optional_dict(value: Any, param: str) -> dict[str, Any] | None:
    return None if value is None else _dict(value, param)


def _dict(value: Any, param: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ProtocolError(f"Invalid type for '{param}'.", code="invalid_type", param=param)
    return value


@dataclass
class SessionConfig:
    """A session's configuration, as ``session.update`` changes it and ``session.created``/
    ``session.updated`` report it (``openai.types.realtime.RealtimeSessionCreateRequest``)."""

    id: str
    model: str
    expires_at: int
    instructions: str = ""
    output_modalities: list[str] = field(default_factory=lambda: ["audio"])
    voice: str = "alloy"
    speed: float = 1.0
    input_format: dict[str, Any] = field(default_factory=lambda: dict(PCM))
    output_format: dict[str, Any] = field(default_factory=lambda: dict(PCM))
    transcription: dict[str, Any] | None = None
    turn_detection: dict[str, Any] | None = field(
        default_factory=lambda: dict(DEFAULT_TURN_DETECTION)
    )
    noise_reduction: dict[str, Any] | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_choice: Any = "auto"
    max_output_tokens: int | str = "inf"

    @property
    def function_names(self) -> list[str]:
        """The declared functions, in order."""
        return [t["name"] for t in self.tools if t.get("type") == "function" and "name" in t]

    def update(self, body: Any, flavour: Flavour) -> None:
        """Apply a ``session.update``'s ``session`` (checked whole before anything changes)."""
        body = _dict(body, "session")
        _known(body, SESSION_KEYS[flavour], "session")
        staged = copy.deepcopy(self)
        if flavour == "ga":
            staged._update_ga(body)
        else:
            staged._update_beta(body)
        self.__dict__.update(staged.__dict__)

    def _common(self, body: dict[str, Any]) -> None:
        if "instructions" in body:
            if not isinstance(body["instructions"], str):
                raise ProtocolError(
                    "Invalid type for 'session.instructions'.",
                    code="invalid_type",
                    param="session.instructions",
                )
            self.instructions = body["instructions"]
        if "tools" in body:
            tools = body["tools"] or []
            if not isinstance(tools, list) or not all(
                isinstance(t, dict) and isinstance(t.get("name"), str) for t in tools
            ):
                raise ProtocolError(
                    "Invalid 'session.tools': each tool needs a 'name'.",
                    code="invalid_value",
                    param="session.tools",
                )
            self.tools = [{"type": "function", **t} for t in tools]
        if "tool_choice" in body:
            self.tool_choice = body["tool_choice"]
        if "model" in body and isinstance(body["model"], str):
            self.model = body["model"]

    def _voice(self, voice: Any, param: str) -> None:
        if voice is None:
            return
        if not isinstance(voice, str) or voice not in VOICES:
            supported = ", ".join(f"'{v}'" for v in sorted(VOICES))
            raise ProtocolError(
                f"Invalid value: '{str(voice)[:100]}'. Supported values are: {supported}.",
                code="invalid_value",
                param=param,
            )
        self.voice = voice

    def _turn_detection(self, value: Any, param: str) -> None:
        if value is None:
            self.turn_detection = None
            return
        value = _dict(value, param)
        kind = value.get("type", "server_vad")
        if kind not in ("server_vad", "semantic_vad"):
            raise ProtocolError(
                f"Invalid value: '{str(kind)[:100]}'. Supported values are: 'server_vad' and "
                "'semantic_vad'.",
                code="invalid_value",
                param=f"{param}.type",
            )
        merged = {**DEFAULT_TURN_DETECTION, **{k: v for k, v in value.items() if v is not None}}
        threshold = merged["threshold"]
        if not _number(threshold) or not 0 <= threshold <= 1:
            raise ProtocolError(
                "Invalid 'threshold': expected a number between 0 and 1.",
                code="invalid_value",
                param=f"{param}.threshold",
            )
        for name in ("prefix_padding_ms", "silence_duration_ms"):
            if not _number(merged[name]) or merged[name] < 0:
                raise ProtocolError(
                    f"Invalid '{name}': expected a number of milliseconds.",
                    code="invalid_value",
                    param=f"{param}.{name}",
                )
        self.turn_detection = merged

    def _update_ga(self, body: dict[str, Any]) -> None:
        if body.get("type") != "realtime":
            raise ProtocolError(
                "Missing required parameter: 'session.type'."
                if "type" not in body
                else f"Invalid value: '{str(body['type'])[:100]}'. Supported values are: "
                "'realtime' and 'transcription'.",
                code="missing_required_parameter" if "type" not in body else "invalid_value",
                param="session.type",
            )
        self._common(body)
        if body.get("output_modalities") is not None:
            self.output_modalities = _modalities(
                body["output_modalities"], "session.output_modalities"
            )
        if "max_output_tokens" in body and body["max_output_tokens"] is not None:
            self.max_output_tokens = body["max_output_tokens"]
        audio = _dict(body.get("audio") or {}, "session.audio")
        _known(audio, frozenset(AUDIO_KEYS), "session.audio")
        audio_in = _dict(audio.get("input") or {}, "session.audio.input")
        audio_out = _dict(audio.get("output") or {}, "session.audio.output")
        _known(audio_in, AUDIO_KEYS["input"], "session.audio.input")
        _known(audio_out, AUDIO_KEYS["output"], "session.audio.output")
        if "format" in audio_in and audio_in["format"] is not None:
            self.input_format = _dict(audio_in["format"], "session.audio.input.format")
        if "transcription" in audio_in:
            self.transcription = _optional_dict(
                audio_in["transcription"], "session.audio.input.transcription"
            )
        if "turn_detection" in audio_in:
            self._turn_detection(audio_in["turn_detection"], "session.audio.input.turn_detection")
        if "noise_reduction" in audio_in:
            self.noise_reduction = audio_in["noise_reduction"]
        if "format" in audio_out and audio_out["format"] is not None:
            self.output_format = _dict(audio_out["format"], "session.audio.output.format")
        self._voice(audio_out.get("voice"), "session.audio.output.voice")
        if isinstance(audio_out.get("speed"), int | float):
            self.speed = float(audio_out["speed"])

    def _update_beta(self, body: dict[str, Any]) -> None:
        self._common(body)
        if body.get("modalities") is not None:
            modalities = _modalities(body["modalities"], "session.modalities")
            self.output_modalities = ["audio"] if "audio" in modalities else ["text"]
        self._voice(body.get("voice"), "session.voice")
        if "input_audio_transcription" in body:
            self.transcription = _optional_dict(
                body["input_audio_transcription"], "session.input_audio_transcription"
            )
        if "turn_detection" in body:
            self._turn_detection(body["turn_detection"], "session.turn_detection")
        if body.get("max_response_output_tokens"):
            self.max_output_tokens = body["max_response_output_tokens"]

    def to_wire(self, flavour: Flavour) -> dict[str, Any]:
        """The session object of ``session.created``/``session.updated``."""
        tools = [dict(t) for t in self.tools]
        if flavour == "beta":
            return {
                "id": self.id,
                "object": "realtime.session",
                "model": self.model,
                "expires_at": self.expires_at,
                "modalities": ["audio", "text"] if "audio" in self.output_modalities else ["text"],
                "instructions": self.instructions,
                "voice": self.voice,
                "input_audio_format": "pcm16",
                "output_audio_format": "pcm16",
                "input_audio_transcription": self.transcription,
                "turn_detection": self.turn_detection,
                "tools": tools,
                "tool_choice": self.tool_choice,
                "temperature": 0.8,
                "max_response_output_tokens": self.max_output_tokens,
            }
        return {
            "type": "realtime",
            "object": "realtime.session",
            "id": self.id,
            "model": self.model,
            "output_modalities": list(self.output_modalities),
            "instructions": self.instructions,
            "tools": tools,
            "tool_choice": self.tool_choice,
            "max_output_tokens": self.max_output_tokens,
            "tracing": None,
            "prompt": None,
            "expires_at": self.expires_at,
            "include": None,
            "audio": {
                "input": {
                    "format": dict(self.input_format),
                    "transcription": self.transcription,
                    "noise_reduction": self.noise_reduction,
                    "turn_detection": self.turn_detection,
                },
                "output": {
                    "format": dict(self.output_format),
                    "voice": self.voice,
                    "speed": self.speed,
                },
            },
        }


def spelt(name: str, flavour: Flavour) -> str | None:
    """The server event ``name`` (GA) as ``flavour`` spells it; None if it has no counterpart."""
    if flavour == "ga":
        return name
    if name in GA_ONLY:
        return None
    return BETA_NAMES.get(name, name)
