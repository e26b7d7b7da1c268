"""Server messages as the transport sees them: one google-genai message in, typed events out.

The order of the events is the order the transport acts on them: usage first (it rides on
messages that also carry audio, a tool call or a goAway, and a ``final`` figure must be tied
to the turn it closes), then the model's parts, grounding, transcriptions, and the turn
signals in the order interrupted, generationComplete, turnComplete.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from google.genai import types

from realtime_resumption.duration import parse_duration
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
