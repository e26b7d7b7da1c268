"""The provider-neutral :class:`~realtime_resumption.transport.SessionUpdate` applied to an
OpenAI Realtime :class:`~realtime_resumption.openai.session_config.SessionConfig`.

Pure: it checks the update and returns the new configuration, or raises a ``ValueError`` /
``TypeError`` naming what is wrong, before anything reaches a socket.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Final, Literal

from realtime_resumption.openai.session_config import (
    FunctionTool,
    InputTranscription,
    SessionConfig,
)
from realtime_resumption.transport import SessionUpdate

DEFAULT_TRANSCRIPTION_MODEL: Final = "whisper-1"
"""The input transcription model ``input_transcription=True`` turns on (the one the API
reference's examples name)."""

_UNSUPPORTED_GENERATION: Final = (
    "top_p",
    "top_k",
    "presence_penalty",
    "frequency_penalty",
    "seed",
    "media_resolution",
    "thinking",
    "enable_affective_dialog",
    "proactivity",
)


def function_tool(tool: object) -> FunctionTool:
    """``tool`` as a :class:`FunctionTool`: one already, or a mapping with ``name`` and
    optionally ``description`` and ``parameters`` (the wire's own ``type: function`` object
    is accepted too)."""
    if isinstance(tool, FunctionTool):
        return tool
    if not isinstance(tool, Mapping):
        raise TypeError(
            f"a tool must be a FunctionTool or a mapping with a 'name', not {type(tool).__name__}"
        )
    if tool.get("type", "function") != "function":
        raise ValueError(f"only function tools are supported, not {tool.get('type')!r}")
    parameters: Any = tool.get("parameters", {"type": "object", "properties": {}})
    return FunctionTool(
        name=tool.get("name"),  # type: ignore[arg-type]  # FunctionTool checks it
        description=str(tool.get("description", "")),
        parameters=parameters,
    )


def apply_update(config: SessionConfig, update: SessionUpdate) -> SessionConfig:
    """``config`` with every setting ``update`` gives (``None`` leaves one as it is).

    ``output_transcription`` cannot be turned off (the service always sends an answer's
    transcript with its audio) and ``generation`` takes only ``temperature`` (beta sessions)
    and ``max_output_tokens``: any other setting is a ``ValueError``, not silently dropped.
    """
    if not isinstance(update, SessionUpdate):
        raise TypeError(f"update must be a SessionUpdate, not {type(update).__name__}")
    changes: dict[str, Any] = {}
    if update.instructions is not None:
        changes["instructions"] = update.instructions
    if update.tools is not None:
        if isinstance(update.tools, str | bytes) or not isinstance(update.tools, Sequence):
            raise TypeError("tools must be a sequence")
        changes["tools"] = tuple(function_tool(t) for t in update.tools)
    if update.voice is not None:
        changes["voice"] = update.voice
    if update.response_modality is not None:
        changes["output_modality"] = update.response_modality
    if update.input_transcription is not None:
        on = update.input_transcription
        keep = config.transcription or InputTranscription(DEFAULT_TRANSCRIPTION_MODEL)
        changes["transcription"] = keep if on else None
    if update.output_transcription is False:
        raise ValueError("OpenAI Realtime always transcribes its spoken answers")
    generation = update.generation
    if generation is not None:
        given = [name for name in _UNSUPPORTED_GENERATION if getattr(generation, name) is not None]
        if given:
            raise ValueError(f"OpenAI Realtime has no generation setting {', '.join(given)}")
        if generation.temperature is not None:
            changes["temperature"] = generation.temperature
        if generation.max_output_tokens is not None:
            changes["max_output_tokens"] = generation.max_output_tokens
    return replace(config, **changes)


CacheBust = Literal["instructions_changed", "tools_changed"]


def cache_busts(before: SessionConfig, after: SessionConfig) -> list[CacheBust]:
    """What an update from ``before`` to ``after`` changes of the cached prompt prefix:
    ``instructions_changed`` and/or ``tools_changed``."""
    busts: list[CacheBust] = []
    if before.instructions != after.instructions:
        busts.append("instructions_changed")
    if before.tools != after.tools:
        busts.append("tools_changed")
    return busts
