"""Transport callbacks → Pipecat frames, in the order the transport reported them.

The transport calls plain functions from its receive loop; frames are pushed with ``await``.
``ResponseFrames`` puts each callback on one queue and a single task (owned by the service)
pushes the frames, so they leave in exactly the order of the callbacks. The answer's frames
follow the provider's turn, as the stock service's do: ``LLMFullResponseStartFrame`` comes with
the answer's first output (with ``TTSStartedFrame`` when it is audio), and
``TTSStoppedFrame``/``LLMFullResponseEndFrame`` come at ``turnComplete`` (or when the generation
ends first: an interruption, a move), so the end of speech is never delayed. The transport's
generation brackets the whole answer: a tool call that finishes it after ``turnComplete``, and
the response its result brings, stay inside one ``GenerationStartedFrame``/``GenerationEndedFrame``
pair, and a pair never straddles a move. The frames of one answer:

    GenerationStartedFrame
    (TranscriptionFrame upstream: the user's unfinished sentence, flushed)
    TTSStartedFrame, LLMFullResponseStartFrame            on its first audio or transcript
    TTSAudioRawFrame…, LLMTextFrame + TTSTextFrame per transcript delta
    (FunctionCallsStartedFrame, FunctionCallInProgressFrame, … through run_function_calls)
    [InterruptionFrame both ways, when the provider interrupted it]
    LLMSearchResponseFrame                                when it was grounded
    TTSStoppedFrame, LLMFullResponseEndFrame
    MetricsFrame (LLM usage)
    GenerationEndedFrame
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol

from google.genai import types
from loguru import logger
from pipecat.frames.frames import (
    Frame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    LLMThoughtEndFrame,
    LLMThoughtStartFrame,
    LLMThoughtTextFrame,
    MetricsFrame,
    TranscriptionFrame,
    TTSAudioRawFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.metrics.metrics import LLMTokenUsage
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.google.frames import LLMSearchOrigin, LLMSearchResponseFrame, LLMSearchResult
from pipecat.utils.text.base_text_aggregator import TextType
from pipecat.utils.time import time_now_iso8601

from realtime_resumption.frames import (
    GenerationEndedFrame,
    GenerationStartedFrame,
    GoAwayFrame,
    SessionLostFrame,
    SessionMovedFrame,
    SessionMoveMetricsData,
    SessionMovingFrame,
    SessionResumptionUpdateFrame,
)
from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.move_reports import HandleKind, MoveOutcome, MoveReason, MoveReport
from realtime_resumption.pipecat.transcription import FLUSH_AFTER, UserTranscript
from realtime_resumption.transport import (
    GenerationEndReason,
    SetupRefusedError,
    ToolCall,
    TransportErrorEvent,
    TransportUsageMetadata,
)

if TYPE_CHECKING:
    from realtime_resumption.openai import OpenAIRealtimeTransport

OUTPUT_SAMPLE_RATE: Final = 24_000

_Handler = Callable[..., Awaitable[None]]


class FrameSink(Protocol):
    """What ``ResponseFrames`` needs from the service that owns it (a Pipecat
    ``LLMService`` has all of it)."""

    async def push_frame(self, frame: Frame, direction: FrameDirection = ...) -> None: ...

    @property
    def name(self) -> str: ...

    @property
    def metrics_enabled(self) -> bool: ...

    async def broadcast_interruption(self) -> None: ...

    async def stop_ttfb_metrics(self) -> None: ...

    async def start_llm_usage_metrics(self, tokens: LLMTokenUsage) -> None: ...

    async def push_error(
        self,
        error_msg: str,
        exception: Exception | None = ...,
        fatal: bool = ...,
        category: Any = ...,
        force_treat_as_permanent: bool = ...,
    ) -> None: ...


class ResponseFrames:
    """Translates one transport's callbacks into frames pushed by ``sink``.

    ``on_tool_calls`` runs the calls (the service turns them into ``run_function_calls``);
    ``on_answer_end`` is awaited after each answer's last frame (the service releases an
    ``EndFrame`` it held for the answer); ``on_setup_refused`` is called as the transport
    rolls a refused setup back, before its ``ErrorFrame`` (the service rolls its settings back
    with it).
    """

    def __init__(
        self,
        sink: FrameSink,
        *,
        on_tool_calls: Callable[[Sequence[ToolCall]], Awaitable[None]],
        on_answer_end: Callable[[], Awaitable[None]],
        on_setup_refused: Callable[[], None] = lambda: None,
        model: Callable[[], str | None] = lambda: None,
        provider: str = "Gemini Live",
    ) -> None:
        self._sink = sink
        self._provider = provider
        self._on_setup_refused = on_setup_refused
        self._model = model
        self._on_tool_calls = on_tool_calls
        self._on_answer_end = on_answer_end
        # A ``None`` handler marks the end (``finish``).
        self._queue: asyncio.Queue[tuple[_Handler | None, tuple[Any, ...]]] = asyncio.Queue()
        self._transcript = UserTranscript()
        self._flush_timer: asyncio.TimerHandle | None = None
        self._generation: str | None = None
        self._response_started = False
        self._tts_started = False
        self._interruption_sent = False
        self._usage: LLMTokenUsage | None = None
        self._grounding: Mapping[str, Any] | None = None
        self._answer_text = ""
        self._answers = 0

    # --- state the service reads --------------------------------------------------------------

    @property
    def responding(self) -> bool:
        """An answer is open (between its start and its end)."""
        return self._generation is not None

    @property
    def answers(self) -> int:
        """Answers opened so far."""
        return self._answers

    # --- wiring -------------------------------------------------------------------------------

    def bind(self, transport: GeminiLiveTransport | OpenAIRealtimeTransport) -> None:
        """Set every callback of ``transport`` this translator turns into frames."""
        put = self._put
        transport.on_generation_start = put(self._generation_start)
        transport.on_generation_end = put(self._generation_end)
        transport.on_turn_complete = put(self._turn_complete)
        transport.on_audio_output = put(self._audio)
        transport.on_output_transcription = put(self._output_transcript)
        transport.on_text_output = put(self._text)
        transport.on_reasoning_summary = put(self._thought)
        transport.on_grounding_metadata = put(self._grounding_metadata)
        transport.on_usage_metadata = put(self._usage_metadata)
        transport.on_tool_call = put(self._tool_calls)
        transport.on_tool_call_cancel = put(self._tool_calls_cancelled)
        transport.on_interrupted = put(self._interrupted)
        transport.on_input_transcription = put(self._input_transcript)
        transport.on_go_away = put(self._go_away)
        transport.on_move_started = put(self._move_started)
        transport.on_move = put(self._moved)
        transport.on_resumption_update = put(self._resumption_update)
        error = put(self._error)

        def on_error(event: TransportErrorEvent) -> None:
            # At once, not in turn with the frames: the transport has just gone back to the
            # setup that worked, and an update made from now on starts from it.
            if isinstance(event.error, SetupRefusedError):
                self._on_setup_refused()
            error(event)

        transport.on_error = on_error

    def in_turn(self, handler: _Handler) -> Callable[..., None]:
        """A callback that runs ``handler`` in turn with the frames of the other callbacks
        (for the callbacks a service binds itself)."""
        return self._put(handler)

    def _put(self, handler: _Handler) -> Callable[..., None]:
        queue = self._queue

        def enqueue(*args: Any) -> None:
            queue.put_nowait((handler, args))

        return enqueue

    async def run(self) -> None:
        """Push frames for the callbacks, in order, until ``finish`` (or cancelled)."""
        while True:
            handler, args = await self._queue.get()
            if handler is None:
                return
            try:
                await handler(*args)
            except Exception:
                logger.exception(f"{self._sink}: failed to turn a transport event into frames")

    def finish(self) -> None:
        """``run`` returns once it pushed the frames of every callback made so far (call it
        after the transport disconnected: nothing more comes)."""
        self._queue.put_nowait((None, ()))

    def close(self) -> None:
        """Stop the transcription timer; what is still queued is dropped."""
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None
        while not self._queue.empty():
            self._queue.get_nowait()

    # --- local interruption -------------------------------------------------------------------

    async def interrupted_locally(self) -> None:
        """The pipeline interrupted the bot (an upstream ``InterruptionFrame``): its audio
        stops now, as with the stock service; the pair ends with the generation."""
        if self._tts_started:
            self._tts_started = False
            await self._sink.push_frame(TTSStoppedFrame())

    # --- the answer ---------------------------------------------------------------------------

    async def _generation_start(self, generation_id: str) -> None:
        self._answers += 1
        self._generation = generation_id
        self._response_started = False
        self._tts_started = False
        self._interruption_sent = False
        self._usage = None
        self._grounding = None
        self._answer_text = ""
        await self._sink.push_frame(GenerationStartedFrame(generation_id=generation_id))
        # The user's words go into the context before the answer's.
        await self._flush_transcript()

    async def _start_response(self, *, audio: bool) -> None:
        await self._sink.stop_ttfb_metrics()
        if self._response_started:
            return
        self._response_started = True
        if audio:
            self._tts_started = True
            await self._sink.push_frame(TTSStartedFrame())
        await self._sink.push_frame(LLMFullResponseStartFrame())

    async def _audio(self, pcm: bytes) -> None:
        await self._start_response(audio=True)
        await self._sink.push_frame(
            TTSAudioRawFrame(audio=pcm, sample_rate=OUTPUT_SAMPLE_RATE, num_channels=1)
        )

    async def _output_transcript(self, text: str) -> None:
        await self._start_response(audio=True)
        self._answer_text += text
        # RTVI shows LLMTextFrames; the context takes the TTSTextFrames (so not both).
        llm_text = LLMTextFrame(text)
        llm_text.append_to_context = False
        await self._sink.push_frame(llm_text)
        tts_text = TTSTextFrame(text, text_type=TextType.SENTENCE)
        tts_text.includes_inter_frame_spaces = True
        await self._sink.push_frame(tts_text)

    async def _text(self, text: str) -> None:
        await self._start_response(audio=False)
        self._answer_text += text
        await self._sink.push_frame(LLMTextFrame(text))

    async def _thought(self, text: str) -> None:
        await self._start_response(audio=False)
        # Gemini sends whole thoughts, so each is bracketed on its own.
        await self._sink.push_frame(LLMThoughtStartFrame())
        await self._sink.push_frame(LLMThoughtTextFrame(text))
        await self._sink.push_frame(LLMThoughtEndFrame())

    async def _grounding_metadata(self, metadata: Mapping[str, Any]) -> None:
        if self._generation is None:
            await self._sink.push_frame(search_response(metadata, self._answer_text))
        else:
            self._grounding = metadata

    async def _usage_metadata(self, usage: TransportUsageMetadata) -> None:
        await self.report_tokens(token_usage(usage.raw))

    async def report_tokens(self, tokens: LLMTokenUsage) -> None:
        """Report an answer's token usage: with its end, after its last frame, when it is
        open (as the stock services), at once otherwise."""
        if self._generation is None:
            await self._sink.start_llm_usage_metrics(tokens)
        else:
            # Reported with the answer's end, after its last frame, as the stock service does.
            self._usage = tokens

    async def _tool_calls(self, calls: Sequence[ToolCall]) -> None:
        await self._on_tool_calls(calls)

    async def _tool_calls_cancelled(self, call_ids: Sequence[str]) -> None:
        logger.info(f"{self._sink}: the model cancelled tool call(s) {list(call_ids)}")

    async def _interrupted(self, server_turn_id: int | None) -> None:
        if self._interruption_sent:
            self._interruption_sent = False
            return
        await self._sink.broadcast_interruption()

    async def _generation_end(self, generation_id: str, reason: GenerationEndReason) -> None:
        if generation_id != self._generation:
            logger.warning(f"{self._sink}: end of unknown generation {generation_id} ignored")
            return
        sink = self._sink
        if reason is GenerationEndReason.INTERRUPTED:
            # The interruption first, as the stock service: the aggregator closes the
            # assistant's message on it.
            self._interruption_sent = True
            await sink.broadcast_interruption()
        await self._end_response()
        self._generation = None
        await sink.push_frame(GenerationEndedFrame(generation_id=generation_id, reason=reason))
        await self._on_answer_end()

    async def _turn_complete(self, server_turn_id: int | None) -> None:
        # The answer's output ends with the provider's turn, when the stock service ends it;
        # the generation stays open while a tool call may still finish the answer (the
        # output that follows it opens a response of its own, as with the stock service).
        if self._generation is not None:
            await self._end_response()

    async def _end_response(self) -> None:
        sink = self._sink
        if self._grounding is not None:
            await sink.push_frame(search_response(self._grounding, self._answer_text))
        if self._tts_started:
            await sink.push_frame(TTSStoppedFrame())
        if self._response_started:
            await sink.push_frame(LLMFullResponseEndFrame())
        if self._usage is not None:
            await sink.start_llm_usage_metrics(self._usage)
        self._response_started = self._tts_started = False
        self._usage, self._grounding, self._answer_text = None, None, ""

    # --- the user's transcription -------------------------------------------------------------

    async def _input_transcript(self, delta: str) -> None:
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None
        for sentence in self._transcript.add(delta):
            await self._push_transcription(sentence)
        if self._transcript.pending:
            self._flush_timer = asyncio.get_running_loop().call_later(
                FLUSH_AFTER, self._put(self._flush_transcript)
            )

    async def _flush_transcript(self) -> None:
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None
        text = self._transcript.flush()
        if text:
            await self._push_transcription(text)

    async def _push_transcription(self, text: str) -> None:
        await self._sink.push_frame(
            TranscriptionFrame(text=text, user_id="", timestamp=time_now_iso8601()),
            FrameDirection.UPSTREAM,
        )

    # --- the session --------------------------------------------------------------------------

    async def _go_away(self, notice: str | None, seconds: float | None) -> None:
        await self._sink.push_frame(GoAwayFrame(time_left=seconds))

    async def _move_started(self, reason: MoveReason, handle_kind: HandleKind) -> None:
        await self._sink.push_frame(SessionMovingFrame(reason=reason, handle_kind=handle_kind))

    async def _moved(self, report: MoveReport) -> None:
        sink = self._sink
        if sink.metrics_enabled:
            # The move's figures, for metrics observers, as Pipecat's own MetricsFrames go.
            data = SessionMoveMetricsData.from_report(
                report, processor=sink.name, model=self._model()
            )
            await sink.push_frame(MetricsFrame(data=[data]))
        if report.outcome is MoveOutcome.LOST:
            # The transport reports the loss through on_error next: SessionLostFrame there.
            logger.warning(f"{self._sink}: move {report.number} lost the session")
            return
        await self._sink.push_frame(SessionMovedFrame(report=report))

    async def _resumption_update(
        self, handle: str | None, resumable: bool, last_consumed: int | None
    ) -> None:
        await self._sink.push_frame(
            SessionResumptionUpdateFrame(resumable=resumable, handle=handle)
        )

    async def _error(self, event: TransportErrorEvent) -> None:
        error = event.error
        exception = error if isinstance(error, Exception) else None
        if event.recoverable:
            await self._sink.push_error(f"{self._provider}: {error}", exception=exception)
            return
        await self._sink.push_frame(SessionLostFrame(error=str(error)))
        await self._sink.push_error(
            f"{self._provider} session lost: {error}",
            exception=exception,
            force_treat_as_permanent=True,
        )


def token_usage(raw: Mapping[str, Any]) -> LLMTokenUsage:
    """Pipecat's token usage from Gemini's usage metadata: tool-use prompt tokens count as
    input and thinking tokens as output; the total is their sum."""
    usage = types.UsageMetadata.model_validate(raw)
    prompt = (usage.prompt_token_count or 0) + (usage.tool_use_prompt_token_count or 0)
    completion = (usage.response_token_count or 0) + (usage.thoughts_token_count or 0)
    return LLMTokenUsage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=prompt + completion,
        cache_read_input_tokens=usage.cached_content_token_count,
        reasoning_tokens=usage.thoughts_token_count,
        input_audio_tokens=_audio_tokens(usage.prompt_tokens_details),
        output_audio_tokens=_audio_tokens(usage.response_tokens_details),
        cache_read_input_audio_tokens=_audio_tokens(usage.cache_tokens_details),
    )


def _audio_tokens(details: list[types.ModalityTokenCount] | None) -> int | None:
    # Gemini leaves out modalities without tokens: absent is "not reported", not zero.
    for entry in details or ():
        if entry.modality == types.MediaModality.AUDIO:
            return entry.token_count
    return None


def search_response(metadata: Mapping[str, Any], text: str) -> LLMSearchResponseFrame:
    """The ``LLMSearchResponseFrame`` for an answer's grounding metadata."""
    grounding = types.GroundingMetadata.model_validate(metadata)
    entry = grounding.search_entry_point
    origins: list[LLMSearchOrigin] = []
    by_chunk: dict[int, LLMSearchOrigin] = {}
    for index, chunk in enumerate(grounding.grounding_chunks or ()):
        if chunk.web:
            origin = LLMSearchOrigin(site_uri=chunk.web.uri, site_title=chunk.web.title)
            by_chunk[index] = origin
            origins.append(origin)
    for support in grounding.grounding_supports or ():
        if support.segment is None or not support.grounding_chunk_indices:
            continue
        for index in support.grounding_chunk_indices:
            if index in by_chunk:
                by_chunk[index].results.append(
                    LLMSearchResult(
                        text=support.segment.text or "",
                        confidence=list(support.confidence_scores or ()),
                    )
                )
    return LLMSearchResponseFrame(
        search_result=text,
        origins=origins,
        rendered_content=entry.rendered_content if entry else None,
    )
