"""The stock service's settings, as the transport takes them.

The services reuse Pipecat's ``GeminiLiveLLMSettings`` unchanged. ``initial_settings`` builds
them from a constructor's arguments exactly as the stock 1.14 service does (defaults, then the
deprecated ``model``/``voice_id``/``params`` with their warnings, then ``settings``, which always
wins); ``live_options`` turns them into ``GeminiLiveTransport`` options, and ``roll_back`` follows the
transport's setup back when the service refused a changed one.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, Final, Protocol, TypeVar

from google.genai import types
from loguru import logger
from pipecat.services.google.gemini_live.llm import (
    ContextWindowCompressionParams,
    GeminiLiveLLMSettings,
    GeminiMediaResolution,
    GeminiModalities,
    GeminiVADParams,
    InputParams,
    language_to_gemini_language,
)
from pipecat.transcriptions.language import Language
from pipecat.utils.types import NotGiven, is_given

from realtime_resumption.gemini import LiveOptions, sliding_window
from realtime_resumption.transport import GenerationSettings, ResponseModality

DEFAULT_VOICE: Final = "Charon"
_S = TypeVar("_S", bound=GeminiLiveLLMSettings)
_T = TypeVar("_T")

_GENERATION_DEFAULTS: Final[dict[str, object]] = {
    "frequency_penalty": None,
    "max_tokens": 4096,
    "presence_penalty": None,
    "temperature": None,
    "top_k": None,
    "top_p": None,
    "seed": None,
    "media_resolution": GeminiMediaResolution.UNSPECIFIED,
    "thinking": {},
    "enable_affective_dialog": False,
    "proactivity": {},
}
"""The stock defaults of the settings that become the transport's ``GenerationSettings``."""

GENERATION_FIELDS: Final = frozenset(_GENERATION_DEFAULTS)

_GENERATION_NAMES: Final = {"max_tokens": "max_output_tokens"}
"""The settings whose ``GenerationSettings`` field has another name."""

SETUP_FIELDS: Final = ("system_instruction", "voice", "modalities", *sorted(GENERATION_FIELDS))
"""The settings a session update carries to the model's setup."""


class _Warns(Protocol):
    def _warn_init_param_moved_to_settings(
        self, param_name: str, settings_field: str | None = None, stacklevel: int = 3
    ) -> None: ...


def initial_settings(
    settings_class: type[_S],
    service: _Warns,
    *,
    default_model: str,
    system_instruction: str | None,
    model: str | None,
    voice_id: str,
    params: InputParams | None,
    settings: _S | None,
) -> _S:
    """The service's settings from its constructor arguments, as the stock service builds
    them (deprecated arguments warn through ``service``)."""
    result = settings_class(
        model=default_model,
        system_instruction=system_instruction,
        voice=DEFAULT_VOICE,
        filter_incomplete_user_turns=False,
        user_turn_completion_config=None,
        modalities=GeminiModalities.AUDIO,
        language="en-US",
        vad=None,
        turn_coverage=None,
        context_window_compression={},
        extra={},
        **_GENERATION_DEFAULTS,  # type: ignore[arg-type]
    )
    if model is not None:
        service._warn_init_param_moved_to_settings("model", "model", stacklevel=4)
        result.model = model
    if voice_id != DEFAULT_VOICE:
        service._warn_init_param_moved_to_settings("voice_id", "voice", stacklevel=4)
        result.voice = voice_id
    if params is not None:
        service._warn_init_param_moved_to_settings("params", stacklevel=4)
        if not settings:
            _apply_params(result, params)
    if settings is not None:
        result.apply_update(settings)
    if isinstance(result.language, Language):
        result.language = language_to_gemini_language(result.language)
    if result.modalities == GeminiModalities.TEXT:
        logger.warning(
            f"Modality {GeminiModalities.TEXT.value!r} may not be supported by recent "
            "Gemini Live models."
        )
    return result


def _apply_params(result: GeminiLiveLLMSettings, params: InputParams) -> None:
    result.frequency_penalty = params.frequency_penalty
    result.max_tokens = params.max_tokens
    result.presence_penalty = params.presence_penalty
    result.temperature = params.temperature
    result.top_k = params.top_k
    result.top_p = params.top_p
    result.modalities = params.modalities or GeminiModalities.AUDIO
    result.language = language_to_gemini_language(params.language) if params.language else "en-US"
    result.media_resolution = params.media_resolution or GeminiMediaResolution.UNSPECIFIED
    result.vad = params.vad
    # Only what was given: a default ``enabled=False`` must not read as compression turned off.
    result.context_window_compression = (
        params.context_window_compression.model_dump(exclude_unset=True)
        if params.context_window_compression
        else {}
    )
    result.thinking = params.thinking or {}
    result.enable_affective_dialog = params.enable_affective_dialog or False
    result.proactivity = params.proactivity or {}
    if isinstance(params.extra, dict):
        result.extra = params.extra


def _given(value: _T | NotGiven) -> _T | None:
    return value if is_given(value) else None


def vad_disabled(settings: GeminiLiveLLMSettings) -> bool:
    """Server-side VAD is off: the pipeline's own turn frames drive activityStart/End."""
    vad = _given(settings.vad)
    return bool(vad and vad.disabled)


def realtime_input_config(settings: GeminiLiveLLMSettings) -> types.RealtimeInputConfig | None:
    """The ``realtimeInputConfig`` for the VAD and turn-coverage settings (None: defaults)."""
    vad: GeminiVADParams | None = _given(settings.vad)
    detection = types.AutomaticActivityDetection()
    configured = False
    if vad is not None:
        if vad.disabled is not None:
            detection.disabled = vad.disabled
            configured = True
        if vad.start_sensitivity:
            detection.start_of_speech_sensitivity = vad.start_sensitivity
            configured = True
        if vad.end_sensitivity:
            detection.end_of_speech_sensitivity = vad.end_sensitivity
            configured = True
        if vad.prefix_padding_ms is not None:
            detection.prefix_padding_ms = vad.prefix_padding_ms
            configured = True
        if vad.silence_duration_ms is not None:
            detection.silence_duration_ms = vad.silence_duration_ms
            configured = True
    coverage = _given(settings.turn_coverage)
    if not configured and not coverage:
        return None
    config = types.RealtimeInputConfig()
    if configured:
        config.automatic_activity_detection = detection
    if coverage:
        config.turn_coverage = coverage
    return config


def context_window_compression(
    settings: GeminiLiveLLMSettings,
) -> types.ContextWindowCompressionConfig | None:
    """The compression config: a sliding window (with the settings' ``trigger_tokens``) unless
    the settings turn compression off with an explicit ``enabled=False``. Stock Pipecat leaves
    it off unless enabled, so its audio calls end at the service's 15-minute cap; here a
    setting left alone turns it on."""
    cwc: Any = _given(settings.context_window_compression)
    if isinstance(cwc, dict):
        cwc = ContextWindowCompressionParams(**cwc)
    if cwc is None:
        cwc = ContextWindowCompressionParams()
    if "enabled" in cwc.model_fields_set and not cwc.enabled:
        return None
    return sliding_window(cwc.trigger_tokens)


def response_modality(settings: GeminiLiveLLMSettings) -> ResponseModality:
    """``text`` for the TEXT modality, else ``audio``."""
    return "text" if _given(settings.modalities) == GeminiModalities.TEXT else "audio"


def live_options(settings: GeminiLiveLLMSettings) -> dict[str, Any]:
    """``GeminiLiveTransport`` keyword arguments for ``settings`` (model, voice, language,
    modality, realtime input, compression and generation)."""
    return {
        "model": _given(settings.model) or "",
        "voice": _given(settings.voice),
        "language": _given(settings.language),
        "response_modality": response_modality(settings),
        "realtime_input_config": realtime_input_config(settings),
        "context_window_compression": context_window_compression(settings),
        "generation": generation(settings),
    }


def generation(settings: GeminiLiveLLMSettings) -> GenerationSettings:
    """The transport's generation settings for ``settings``, as the stock service sends them.
    An unset value, an unspecified media resolution and an empty ``thinking`` or
    ``proactivity`` leave the setting to the service."""
    resolution = _given(settings.media_resolution)
    return GenerationSettings(
        temperature=_given(settings.temperature),
        max_output_tokens=_given(settings.max_tokens),
        top_p=_given(settings.top_p),
        top_k=_given(settings.top_k),
        presence_penalty=_given(settings.presence_penalty),
        frequency_penalty=_given(settings.frequency_penalty),
        seed=_given(settings.seed),
        media_resolution=(
            resolution.value
            if resolution and resolution != GeminiMediaResolution.UNSPECIFIED
            else None
        ),
        thinking=_given(settings.thinking) or None,
        enable_affective_dialog=_given(settings.enable_affective_dialog) or None,
        proactivity=_given(settings.proactivity) or None,
    )


def _carried(settings: GeminiLiveLLMSettings, name: str) -> object:
    """What the setup carries for the setting ``name`` of ``settings``."""
    if name == "modalities":
        return response_modality(settings)
    if name in GENERATION_FIELDS:
        return getattr(generation(settings), _GENERATION_NAMES.get(name, name))
    return _given(getattr(settings, name))


def _in_setup(setup: LiveOptions, name: str) -> object:
    """What ``setup`` carries for the setting ``name``."""
    if name == "modalities":
        return setup.response_modality
    if name in GENERATION_FIELDS:
        return getattr(setup.generation, _GENERATION_NAMES.get(name, name))
    return getattr(setup, name)


def roll_back(
    settings: GeminiLiveLLMSettings, earlier: Sequence[GeminiLiveLLMSettings], setup: LiveOptions
) -> list[str]:
    """Put back into ``settings`` each setting ``setup`` does not carry (the transport went
    back to it after the service refused a changed one), from the newest of ``earlier`` (the
    settings before each update since the setup last worked) that ``setup`` carries; returns
    the names put back. A setting no earlier state explains (the context's own instruction,
    a stored setup taken over) stays as it is."""
    restored = []
    for name in SETUP_FIELDS:
        wanted = _in_setup(setup, name)
        if _carried(settings, name) == wanted:
            continue
        for state in reversed(earlier):
            if _carried(state, name) == wanted:
                setattr(settings, name, copy.deepcopy(getattr(state, name)))
                restored.append(name)
                break
    return restored
