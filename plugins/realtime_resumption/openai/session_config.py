"""An OpenAI Realtime session's configuration, and the ``session.update`` that gives it.

OpenAI Realtime keeps no session across connections: a session that moves on is a new one,
given its configuration again before the conversation. :class:`SessionConfig` is that
configuration, checked when it is built (a bad value is a :class:`ValueError` here, not an
``error`` event from the service mid-move), and rendered in either spelling:

- GA (``openai`` SDK 3.63, ``openai/types/realtime/realtime_session_create_request_param.py``):
  ``session.type = "realtime"``, ``output_modalities``, and the audio settings nested under
  ``audio.input`` (``format``, ``transcription``, ``turn_detection``, ``noise_reduction``) and
  ``audio.output`` (``format``, ``voice``, ``speed``). It has no ``temperature``.
- beta (``openai/types/beta/realtime/session_update_event_param.py``), which the SDK's beta
  client and LiveKit 1.8's legacy-Azure mode speak (``_oai_session_to_azure`` in
  ``livekit/agents/llm/_realtime/openai.py``): one flat object (``modalities``, ``voice``,
  ``input_audio_format``, ``input_audio_transcription``, ``turn_detection``, ``temperature``,
  ``max_response_output_tokens``).

Both services refuse a field the other spelling uses ("Unknown parameter"), so the rendering
is chosen per connection. :meth:`SessionConfig.from_session` reads the session a
``session.created``/``session.updated`` reports back into the same type.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

Flavour = Literal["ga", "beta"]
Encoding = Literal["pcm", "pcmu", "pcma"]

_GA_FORMAT: dict[Encoding, str] = {"pcm": "audio/pcm", "pcmu": "audio/pcmu", "pcma": "audio/pcma"}
_BETA_FORMAT: dict[Encoding, str] = {"pcm": "pcm16", "pcmu": "g711_ulaw", "pcma": "g711_alaw"}


@dataclass(frozen=True)
class AudioFormat:
    """An audio format of the session: 16-bit PCM at 24 kHz, or G.711 μ-law / A-law at 8 kHz.

    GA ``RealtimeAudioFormatsParam`` (``audio/pcm`` takes only ``rate: 24000``, ``audio/pcmu``
    and ``audio/pcma`` no rate); beta ``pcm16``, ``g711_ulaw``, ``g711_alaw`` (PCM16 "at a 24kHz
    sample rate, single channel (mono), and little-endian byte order").
    """

    encoding: Encoding = "pcm"

    def __post_init__(self) -> None:
        if self.encoding not in _GA_FORMAT:
            raise ValueError(
                f"audio encoding must be one of {sorted(_GA_FORMAT)}, not {self.encoding!r}"
            )

    @property
    def sample_rate(self) -> int:
        """Samples per second: 24000 for PCM, 8000 for G.711."""
        return 24_000 if self.encoding == "pcm" else 8_000

    @property
    def bytes_per_ms(self) -> int:
        """Bytes of one millisecond of mono audio (PCM16: two bytes a sample; G.711: one)."""
        width = 2 if self.encoding == "pcm" else 1
        return self.sample_rate * width // 1000

    def ga(self) -> dict[str, Any]:
        """The GA ``format`` object."""
        body: dict[str, Any] = {"type": _GA_FORMAT[self.encoding]}
        if self.encoding == "pcm":
            body["rate"] = 24_000
        return body

    def beta(self) -> str:
        """The beta format name."""
        return _BETA_FORMAT[self.encoding]

    @classmethod
    def from_wire(cls, value: object) -> AudioFormat:
        """A GA format object or a beta format name; :class:`ValueError` for anything else."""
        if isinstance(value, str):
            for encoding, name in _BETA_FORMAT.items():
                if name == value:
                    return cls(encoding)
        elif isinstance(value, Mapping):
            for encoding, name in _GA_FORMAT.items():
                if value.get("type") == name:
                    rate = value.get("rate")
                    if encoding == "pcm" and rate not in (None, 24_000):
                        raise ValueError(f"audio/pcm takes only a rate of 24000, not {rate!r}")
                    return cls(encoding)
        raise ValueError(f"unknown audio format {str(value)[:100]!r}")


PCM16_24K = AudioFormat("pcm")
"""The default input and output format of a session (API reference: PCM16, 24 kHz, mono)."""


def _ms(name: str, value: object, *, positive: bool = False) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < (1 if positive else 0):
        bound = "> 0" if positive else ">= 0"
        raise ValueError(f"{name} must be an integer number of milliseconds {bound}, not {value!r}")


@dataclass(frozen=True)
class ServerVad:
    """Turn detection by volume (GA ``RealtimeAudioInputTurnDetectionParam.ServerVad``; the
    API's defaults: threshold 0.5, 300 ms of prefix padding, 500 ms of silence)."""

    threshold: float = 0.5
    """Activation level, 0 to 1: higher needs louder audio."""
    prefix_padding_ms: int = 300
    """Audio before the detected speech that the user item keeps."""
    silence_duration_ms: int = 500
    """Silence that ends the speech."""
    create_response: bool = True
    """Answer each committed turn without a ``response.create``."""
    interrupt_response: bool = True
    """Cancel the answer in progress when speech starts."""
    idle_timeout_ms: int | None = None
    """Answer after this long without speech (server_vad only); None: never."""

    def __post_init__(self) -> None:
        t = self.threshold
        if not isinstance(t, int | float) or isinstance(t, bool) or not 0 <= t <= 1:
            raise ValueError(f"server_vad threshold must be a number from 0 to 1, not {t!r}")
        _ms("server_vad prefix_padding_ms", self.prefix_padding_ms)
        _ms("server_vad silence_duration_ms", self.silence_duration_ms)
        if self.idle_timeout_ms is not None:
            _ms("server_vad idle_timeout_ms", self.idle_timeout_ms, positive=True)

    def wire(self) -> dict[str, Any]:
        """The ``turn_detection`` object (the same in both spellings)."""
        return {
            "type": "server_vad",
            "threshold": self.threshold,
            "prefix_padding_ms": self.prefix_padding_ms,
            "silence_duration_ms": self.silence_duration_ms,
            "create_response": self.create_response,
            "interrupt_response": self.interrupt_response,
            "idle_timeout_ms": self.idle_timeout_ms,
        }


Eagerness = Literal["low", "medium", "high", "auto"]


@dataclass(frozen=True)
class SemanticVad:
    """Turn detection by a turn model (GA ``...TurnDetectionParam.SemanticVad``: ``eagerness``
    ``low``/``medium``/``high`` wait at most 8/4/2 s; ``auto`` is ``medium``)."""

    eagerness: Eagerness = "auto"
    create_response: bool = True
    interrupt_response: bool = True

    def __post_init__(self) -> None:
        if self.eagerness not in ("low", "medium", "high", "auto"):
            raise ValueError(
                "semantic_vad eagerness must be 'low', 'medium', 'high' or 'auto', "
                f"not {self.eagerness!r}"
            )

    def wire(self) -> dict[str, Any]:
        """The ``turn_detection`` object (the same in both spellings)."""
        return {
            "type": "semantic_vad",
            "eagerness": self.eagerness,
            "create_response": self.create_response,
            "interrupt_response": self.interrupt_response,
        }


TurnDetection: TypeAlias = ServerVad | SemanticVad


@dataclass(frozen=True)
class InputTranscription:
    """Transcription of the user's audio (GA ``AudioTranscriptionParam``; beta
    ``SessionInputAudioTranscription``): what makes a user turn replayable as text."""

    model: str
    language: str | None = None
    """ISO-639-1 code of the input's language."""
    prompt: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model:
            raise ValueError("the transcription model must be a non-empty string")

    def wire(self) -> dict[str, Any]:
        """The ``transcription`` (GA) / ``input_audio_transcription`` (beta) object."""
        body: dict[str, Any] = {"model": self.model}
        if self.language is not None:
            body["language"] = self.language
        if self.prompt is not None:
            body["prompt"] = self.prompt
        return body


_FUNCTION_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""The function-name rule of OpenAI's function calling (letters, digits, ``_`` and ``-``, at
most 64 characters)."""


@dataclass(frozen=True)
class FunctionTool:
    """A function the model may call (GA ``RealtimeFunctionToolParam``, beta ``SessionTool``)."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    """Its parameters as a JSON Schema object."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _FUNCTION_NAME.fullmatch(self.name):
            raise ValueError(
                "a function name is 1 to 64 letters, digits, '_' or '-', "
                f"not {str(self.name)[:100]!r}"
            )
        if not isinstance(self.parameters, Mapping):
            raise ValueError(f"the parameters of {self.name!r} must be a JSON Schema object")

    def wire(self) -> dict[str, Any]:
        """The tool object (the same in both spellings)."""
        return {
            "type": "function",
            "name": self.name,
            "description": self.description,
            "parameters": _plain(self.parameters),
        }


def _plain(value: Any) -> Any:
    """A copy made of plain dicts and lists, so a rendered body shares nothing with the
    frozen configuration (a caller that edits the body cannot change the configuration)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


ToolChoice = Literal["auto", "none", "required"]
NoiseReduction = Literal["near_field", "far_field"]


@dataclass(frozen=True)
class SessionConfig:
    """What a session is given before the conversation: see the module documentation.

    Defaults are the API's own for a new session, except ``turn_detection``'s and
    ``transcription``'s, which are stated whole in every rendering: a new session must not
    keep a server default the old one had changed.
    """

    instructions: str = ""
    tools: tuple[FunctionTool, ...] = ()
    tool_choice: ToolChoice = "auto"
    voice: str = "alloy"
    """A built-in voice (``alloy``, ``ash``, ``ballad``, ``coral``, ``echo``, ``sage``,
    ``shimmer``, ``verse``, ``marin``, ``cedar``; the beta list lacks the last two) or a custom
    voice id."""
    speed: float = 1.0
    """Speech speed, 0.25 to 1.5."""
    input_format: AudioFormat = PCM16_24K
    output_format: AudioFormat = PCM16_24K
    turn_detection: TurnDetection | None = field(default_factory=ServerVad)
    """None: the client commits and asks for each answer."""
    transcription: InputTranscription | None = None
    noise_reduction: NoiseReduction | None = None
    output_modality: Literal["audio", "text"] = "audio"
    """GA takes one (``output_modalities``: "not possible to request both")."""
    max_output_tokens: int | Literal["inf"] = "inf"
    """Per answer, tool calls included: 1 to 4096, or ``inf``."""
    temperature: float | None = None
    """Beta only (0.6 to 1.2): the GA session has no temperature, so rendering a GA update
    with one set is a :class:`ValueError`."""

    def __post_init__(self) -> None:
        if not isinstance(self.instructions, str):
            raise ValueError("instructions must be a string")
        # A list given as the tools would leave the frozen configuration mutable.
        object.__setattr__(self, "tools", tuple(self.tools))
        if any(not isinstance(t, FunctionTool) for t in self.tools):
            raise ValueError("tools must be FunctionTool values")
        names = [t.name for t in self.tools]
        if len(set(names)) != len(names):
            raise ValueError(f"two tools share a name: {sorted(names)}")
        if self.tool_choice not in ("auto", "none", "required"):
            raise ValueError(
                f"tool_choice must be 'auto', 'none' or 'required', not {self.tool_choice!r}"
            )
        if not isinstance(self.voice, str) or not self.voice:
            raise ValueError("voice must be a non-empty string")
        if not _number(self.speed) or not 0.25 <= self.speed <= 1.5:
            raise ValueError(f"speed must be from 0.25 to 1.5, not {self.speed!r}")
        if self.noise_reduction not in (None, "near_field", "far_field"):
            raise ValueError(
                f"noise_reduction must be 'near_field', 'far_field' or None, "
                f"not {self.noise_reduction!r}"
            )
        if self.output_modality not in ("audio", "text"):
            raise ValueError(
                f"output_modality must be 'audio' or 'text', not {self.output_modality!r}"
            )
        tokens = self.max_output_tokens
        if tokens != "inf" and (
            not isinstance(tokens, int) or isinstance(tokens, bool) or not 1 <= tokens <= 4096
        ):
            raise ValueError(f"max_output_tokens must be 1 to 4096 or 'inf', not {tokens!r}")
        t = self.temperature
        if t is not None and (not _number(t) or not 0.6 <= t <= 1.2):
            raise ValueError(f"temperature must be from 0.6 to 1.2, not {t!r}")

    # --- rendering --------------------------------------------------------------------------

    def ga_session(self) -> dict[str, Any]:
        """The GA ``session.update``'s ``session`` object."""
        if self.temperature is not None:
            raise ValueError(
                "the GA session has no temperature (RealtimeSessionCreateRequestParam); "
                "leave it None or render the beta session"
            )
        return {
            "type": "realtime",
            "instructions": self.instructions,
            "tools": [t.wire() for t in self.tools],
            "tool_choice": self.tool_choice,
            "output_modalities": [self.output_modality],
            "max_output_tokens": self.max_output_tokens,
            "audio": {
                "input": {
                    "format": self.input_format.ga(),
                    "transcription": self._transcription(),
                    "turn_detection": self._turn_detection(),
                    "noise_reduction": self._noise_reduction(),
                },
                "output": {
                    "format": self.output_format.ga(),
                    "voice": self.voice,
                    "speed": self.speed,
                },
            },
        }

    def beta_session(self) -> dict[str, Any]:
        """The beta ``session.update``'s flat ``session`` object."""
        body: dict[str, Any] = {
            "instructions": self.instructions,
            "tools": [t.wire() for t in self.tools],
            "tool_choice": self.tool_choice,
            # Beta answers with audio and its transcript as ["audio", "text"].
            "modalities": ["audio", "text"] if self.output_modality == "audio" else ["text"],
            "voice": self.voice,
            "speed": self.speed,
            "input_audio_format": self.input_format.beta(),
            "output_audio_format": self.output_format.beta(),
            "input_audio_transcription": self._transcription(),
            "turn_detection": self._turn_detection(),
            "input_audio_noise_reduction": self._noise_reduction(),
            "max_response_output_tokens": self.max_output_tokens,
        }
        if self.temperature is not None:
            body["temperature"] = self.temperature
        return body

    def session_update(self, flavour: Flavour = "ga") -> dict[str, Any]:
        """The whole ``session.update`` client event in ``flavour``'s spelling."""
        if flavour == "ga":
            return {"type": "session.update", "session": self.ga_session()}
        if flavour == "beta":
            return {"type": "session.update", "session": self.beta_session()}
        raise ValueError(f"flavour must be 'ga' or 'beta', not {flavour!r}")

    def _transcription(self) -> dict[str, Any] | None:
        return None if self.transcription is None else self.transcription.wire()

    def _turn_detection(self) -> dict[str, Any] | None:
        return None if self.turn_detection is None else self.turn_detection.wire()

    def _noise_reduction(self) -> dict[str, Any] | None:
        return None if self.noise_reduction is None else {"type": self.noise_reduction}

    # --- reading ----------------------------------------------------------------------------

    @classmethod
    def from_session(cls, session: Mapping[str, Any], flavour: Flavour) -> SessionConfig:
        """The configuration a ``session.created``/``session.updated`` reports (GA: the
        ``RealtimeSessionCreateRequest`` shape; beta: the flat one). Fields it leaves out take
        the defaults; a value this type refuses is a :class:`ValueError`."""
        if not isinstance(session, Mapping):
            raise ValueError("a session must be an object")
        if flavour == "ga":
            audio = _mapping(session.get("audio"))
            audio_in, audio_out = _mapping(audio.get("input")), _mapping(audio.get("output"))
            modalities = session.get("output_modalities") or ["audio"]
            return cls(
                **_common(session),
                voice=_voice(audio_out.get("voice")),
                speed=_or(audio_out.get("speed"), 1.0),
                input_format=_format(audio_in.get("format")),
                output_format=_format(audio_out.get("format")),
                turn_detection=_detection(audio_in.get("turn_detection")),
                transcription=_input_transcription(audio_in.get("transcription")),
                noise_reduction=_noise(audio_in.get("noise_reduction")),
                output_modality="text" if list(modalities) == ["text"] else "audio",
                max_output_tokens=_or(session.get("max_output_tokens"), "inf"),
            )
        modalities = session.get("modalities") or ["audio", "text"]
        return cls(
            **_common(session),
            voice=_voice(session.get("voice")),
            speed=_or(session.get("speed"), 1.0),
            input_format=_format(session.get("input_audio_format")),
            output_format=_format(session.get("output_audio_format")),
            turn_detection=_detection(session.get("turn_detection")),
            transcription=_input_transcription(session.get("input_audio_transcription")),
            noise_reduction=_noise(session.get("input_audio_noise_reduction")),
            output_modality="audio" if "audio" in modalities else "text",
            max_output_tokens=_or(session.get("max_response_output_tokens"), "inf"),
            temperature=session.get("temperature"),
        )


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value


def _mapping(value: object) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"expected an object, not {type(value).__name__}")
    return value


def _common(session: Mapping[str, Any]) -> dict[str, Any]:
    tools = []
    for tool in session.get("tools") or ():
        tool = _mapping(tool)
        if tool.get("type", "function") != "function":
            raise ValueError(f"only function tools are modelled, not {tool.get('type')!r}")
        tools.append(
            FunctionTool(
                name=tool.get("name"),  # type: ignore[arg-type]  # checked by FunctionTool
                description=tool.get("description") or "",
                parameters=_or(tool.get("parameters"), {"type": "object", "properties": {}}),
            )
        )
    return {
        "instructions": _or(session.get("instructions"), ""),
        "tools": tuple(tools),
        "tool_choice": _or(session.get("tool_choice"), "auto"),
    }


def _voice(value: object) -> str:
    if isinstance(value, Mapping):  # a custom voice: {"id": "voice_..."}
        value = value.get("id")
    return "alloy" if value is None else value  # type: ignore[return-value]  # checked later


def _format(value: object) -> AudioFormat:
    return PCM16_24K if value is None else AudioFormat.from_wire(value)


def _detection(value: object) -> TurnDetection | None:
    if value is None:
        return None
    body = _mapping(value)
    kind = body.get("type")
    if kind == "server_vad":
        defaults = ServerVad()
        return ServerVad(
            threshold=_or(body.get("threshold"), defaults.threshold),
            prefix_padding_ms=_or(body.get("prefix_padding_ms"), defaults.prefix_padding_ms),
            silence_duration_ms=_or(body.get("silence_duration_ms"), defaults.silence_duration_ms),
            create_response=_or(body.get("create_response"), True),
            interrupt_response=_or(body.get("interrupt_response"), True),
            idle_timeout_ms=body.get("idle_timeout_ms"),
        )
    if kind == "semantic_vad":
        return SemanticVad(
            eagerness=_or(body.get("eagerness"), "auto"),
            create_response=_or(body.get("create_response"), True),
            interrupt_response=_or(body.get("interrupt_response"), True),
        )
    raise ValueError(f"unknown turn detection {str(kind)[:100]!r}")


def _input_transcription(value: object) -> InputTranscription | None:
    if value is None:
        return None
    body = _mapping(value)
    return InputTranscription(
        model=body.get("model"),  # type: ignore[arg-type]  # checked by InputTranscription
        language=body.get("language"),
        prompt=body.get("prompt"),
    )


def _noise(value: object) -> NoiseReduction | None:
    if value is None:
        return None
    return _mapping(value).get("type")  # checked by SessionConfig
