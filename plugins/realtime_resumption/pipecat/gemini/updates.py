"""Checks on an ``LLMUpdateSettingsFrame`` before it changes anything.

A settings update reaches the model through a move to a connection that carries the new setup.
A value Gemini cannot take would make every dial of that move fail and lose the session, so
``refusal`` finds it first (the service then refuses the whole update with a non-fatal
``ErrorFrame`` and keeps its setup). ``fixed_for_the_session`` names the settings a running
session cannot take at all (the service keeps the old value and warns once).
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any, Final

from pipecat.services.google.gemini_live.llm import GeminiLiveLLMSettings, GeminiModalities
from pipecat.utils.types import is_given

from realtime_resumption.gemini import LiveOptions
from realtime_resumption.pipecat.gemini import settings as settings_map

MAX_INSTRUCTION_BYTES: Final = 15 * 2**20
"""The largest system instruction (as JSON on the wire) a setup carries. The service closes a
client message over 16 MiB with 1009; the rest of the setup (tools, config) keeps the other MiB.
"""
_LANGUAGE: Final = re.compile(r"[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*")
"""A BCP-47 language tag (``en-US``, ``cmn-CN``), as Gemini's ``languageCode`` takes it."""


def refusal(delta: GeminiLiveLLMSettings, current: GeminiLiveLLMSettings) -> str | None:
    """Why ``delta`` cannot be applied to ``current`` (None: it can). Checks the values a
    setup carries, then builds the setup the next connection would send, as the SDK does."""
    instruction = delta.system_instruction
    if is_given(instruction) and instruction is not None:
        if not isinstance(instruction, str):
            return f"system_instruction must be a str, not {type(instruction).__name__}"
        size = len(json.dumps(instruction))
        if size > MAX_INSTRUCTION_BYTES:
            return (
                f"system_instruction is {size} bytes on the wire, over the "
                f"{MAX_INSTRUCTION_BYTES} a setup carries"
            )
    voice = delta.voice
    if is_given(voice) and (not isinstance(voice, str) or not voice.strip()):
        return f"voice must be a voice name (a non-empty str), not {voice!r}"
    modalities = delta.modalities
    if is_given(modalities) and not _is_modality(modalities):
        names = ", ".join(m.value for m in GeminiModalities)
        return f"modalities must be a GeminiModalities ({names}), not {modalities!r}"
    language = delta.language
    if is_given(language) and not (
        isinstance(language, str) and _LANGUAGE.fullmatch(language) is not None
    ):
        return f"language must be a Language or a BCP-47 tag such as 'en-US', not {language!r}"
    candidate = copy.deepcopy(current)
    candidate.apply_update(copy.deepcopy(delta))
    try:
        options = LiveOptions(
            **settings_map.live_options(candidate),
            system_instruction=_given_str(candidate.system_instruction),
        )
        options.live_connect_config()
    except (TypeError, ValueError) as error:
        # pydantic's ValidationError is a ValueError.
        return f"the setup would not build: {_first_line(error)}"
    return None


FIXED_FOR_THE_SESSION: Final = {
    "model": "a session keeps the model it started with",
    "language": "Gemini takes the language in the setup of a new session only",
}
"""Settings a running session cannot change, and why."""


def fixed_for_the_session(
    delta: GeminiLiveLLMSettings, current: GeminiLiveLLMSettings
) -> dict[str, Any]:
    """The fields of ``delta`` that would change a setting a running session cannot take."""
    return {
        name: getattr(delta, name)
        for name in FIXED_FOR_THE_SESSION
        if is_given(getattr(delta, name)) and getattr(delta, name) != getattr(current, name)
    }


def _is_modality(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        GeminiModalities(value)
    except ValueError:
        return False
    return True


def _given_str(value: object) -> str | None:
    return value if is_given(value) and isinstance(value, str) else None


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
