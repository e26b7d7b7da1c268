"""``TransportCallbacks``: the framework's callbacks on a transport, as attributes.

The interface's ``on_*`` callbacks (``LLMTransport``) and the two that report moves, each
``None`` until the framework sets it: plain functions, called on the event loop; one that
raises is logged and changes nothing else. Both providers' transports take them from here
(``GeminiLiveTransport``, ``OpenAIRealtimeTransport``): one declaration, so the adapters
set the same attributes on either. :func:`callbacks_of` is what each generation effect becomes
among them, for both transports.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from realtime_resumption.generation import (
    Effect,
    FirstAudio,
    GenerationEnded,
    GenerationStarted,
    ReasoningDone,
    ReasoningStarted,
    TextDone,
    TurnCompleted,
    TurnInterrupted,
)
from realtime_resumption.move_reports import HandleKind, MoveReason, MoveReport
from realtime_resumption.transport import (
    ConnectionLifecycleEvent,
    GenerationEndReason,
    ProviderEvidenceEvent,
    RealtimeLLMUsage,
    ReasoningInfo,
    ToolCall,
    TransportErrorEvent,
    TransportUsageMetadata,
)


class TransportCallbacks:
    """The framework's callbacks (see the module documentation)."""

    def __init__(self) -> None:
        self.on_audio_output: Callable[[bytes], None] | None = None
        self.on_tool_call: Callable[[Sequence[ToolCall]], None] | None = None
        self.on_tool_call_cancel: Callable[[Sequence[str]], None] | None = None
        self.on_turn_complete: Callable[[int | None], None] | None = None
        self.on_interrupted: Callable[[int | None], None] | None = None
        self.on_input_transcription: Callable[[str], None] | None = None
        self.on_output_transcription: Callable[[str], None] | None = None
        self.on_session_ready: Callable[[str], None] | None = None
        self.on_error: Callable[[TransportErrorEvent], None] | None = None
        self.on_close: Callable[[int | None, str | None], None] | None = None
        self.on_model_turn_start: Callable[[str | None], None] | None = None
        self.on_generation_start: Callable[[str], None] | None = None
        self.on_generation_end: Callable[[str, GenerationEndReason], None] | None = None
        self.on_first_audio_chunk: Callable[[], None] | None = None
        self.on_text_output: Callable[[str], None] | None = None
        self.on_text_done: Callable[[], None] | None = None
        self.on_speech_started: Callable[[], None] | None = None
        self.on_user_speech_stopped: Callable[[], None] | None = None
        self.on_go_away: Callable[[str | None, float | None], None] | None = None
        self.on_resumption_update: Callable[[str | None, bool, int | None], None] | None = None
        self.on_credential_expiry: Callable[[], None] | None = None
        self.on_grounding_metadata: Callable[[Mapping[str, Any]], None] | None = None
        self.on_realtime_llm_usage: Callable[[RealtimeLLMUsage], None] | None = None
        self.on_usage_metadata: Callable[[TransportUsageMetadata], None] | None = None
        self.on_connection_lifecycle: Callable[[ConnectionLifecycleEvent], None] | None = None
        self.on_reasoning_start: Callable[[], None] | None = None
        self.on_reasoning_done: Callable[[ReasoningInfo], None] | None = None
        self.on_reasoning_summary: Callable[[str], None] | None = None
        self.on_cache_bust: (
            Callable[[Literal["instructions_changed", "tools_changed"]], None] | None
        ) = None
        self.on_provider_evidence: Callable[[ProviderEvidenceEvent], None] | None = None
        self.on_move: Callable[[MoveReport], None] | None = None
        """A move between connections finished (outcome resumed, rebuilt or lost): why, the
        input gap, the input held and replayed, the attempts, whether it cut an answer."""
        self.on_move_started: Callable[[MoveReason, HandleKind], None] | None = None
        """A move began: why, and which kind of handle it resumes from (``none``: rebuild,
        always on OpenAI Realtime, which keeps nothing across sessions)."""


def callbacks_of(effect: Effect) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    """The callbacks (name, arguments), in order, that one of the generation tracker's
    effects becomes."""
    if isinstance(effect, GenerationStarted):
        return (
            ("on_model_turn_start", (effect.generation_id,)),
            ("on_generation_start", (effect.generation_id,)),
        )
    if isinstance(effect, GenerationEnded):
        return (("on_generation_end", (effect.generation_id, effect.reason)),)
    if isinstance(effect, FirstAudio):
        return (("on_first_audio_chunk", ()),)
    if isinstance(effect, TextDone):
        return (("on_text_done", ()),)
    if isinstance(effect, TurnCompleted):
        return (("on_turn_complete", (effect.server_turn_id,)),)
    if isinstance(effect, TurnInterrupted):
        return (("on_interrupted", (effect.server_turn_id,)),)
    if isinstance(effect, ReasoningStarted):
        return (("on_reasoning_start", ()),)
    if isinstance(effect, ReasoningDone):
        return (("on_reasoning_done", (ReasoningInfo(effect.duration),)),)
    return ()
