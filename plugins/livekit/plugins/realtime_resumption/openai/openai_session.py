"""``RealtimeSession``: LiveKit's realtime session API over ``OpenAIRealtimeTransport``.

The transport owns the session and its moves; this translates. LiveKit calls become transport
sends (held until the first session is set up, and by the transport during a move), and the
transport's callbacks become LiveKit events: ``generation_created`` (see ``generations``),
speech and transcription events, ``metrics_collected``, ``error``, and after each move
``session_moved`` and ``session_reconnected``.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol, TypedDict

import openai
from livekit import rtc
from livekit.agents import llm
from livekit.agents.types import NOT_GIVEN, APIConnectOptions, NotGivenOr
from livekit.agents.utils import images, is_given

from realtime_resumption.move_reports import MoveReason, MoveReport
from realtime_resumption.openai import (
    OpenAIRealtimeOptions,
    OpenAIRealtimeTransport,
    SessionConfig,
)
from realtime_resumption.store import SessionStore, StoreError, StoreOptions
from realtime_resumption.transport import (
    CancelResponseOptions,
    ContentTurn,
    GenerationEndReason,
    NotConnectedError,
    SessionUpdate,
    ToolCall,
    ToolResult,
    TransportError,
    TransportErrorEvent,
)

from ..audio_input import InputAudio
from ..events import SessionMoved
from ..generations import Generation, GenerationStreams
from ..log import logger
from ..pending_reply import PendingReply, failed_reply
from ..session_events import ModelNames, SessionEvents
from ..session_tasks import SessionTasks
from ..session_updates import merged

GENERATE_REPLY_TIMEOUT = 10.0
"""Seconds ``generate_reply`` waits for its generation once the request can reach the
service, as the OpenAI plugin does."""

INPUT_SAMPLE_RATE = 24_000

_Phase = Literal["dialling", "ready", "lost", "closed"]


class StoreKeywords(TypedDict, total=False):
    """The store a session's transport keeps its call in (``OpenAIRealtimeTransport``'s
    keywords of that name)."""

    store: SessionStore
    session_key: str
    store_options: StoreOptions | None


class ModelSettings(ModelNames, Protocol):
    """What a session reads of the model that made it (``RealtimeModel``): the model is
    typed by what it gives, so the model can import the session and not the reverse."""

    @property
    def config(self) -> SessionConfig: ...
    @property
    def realtime_options(self) -> OpenAIRealtimeOptions: ...
    @property
    def conn_options(self) -> APIConnectOptions: ...
    def client(self) -> openai.AsyncOpenAI: ...
    def store_keywords(self) -> StoreKeywords: ...


class RealtimeSession(llm.RealtimeSession[SessionMoved]):
    """One OpenAI Realtime conversation, carried across sessions by the transport.

    Made by ``RealtimeModel.session()``; it connects at once. ``interrupt`` cancels the answer
    in progress; ``truncate`` cuts its stored audio where playback stopped.
    """

    def __init__(self, realtime_model: llm.RealtimeModel, settings: ModelSettings) -> None:
        super().__init__(realtime_model)
        self._model = settings
        self._chat_ctx = llm.ChatContext.empty()
        self._tools = llm.ToolContext.empty()
        self._input_audio = InputAudio(rate=INPUT_SAMPLE_RATE)
        self._phase: _Phase = "dialling"
        self._starting = True
        """Nothing was dialled yet: what the app gives now is the call's start (AgentActivity
        configures a new session right after making it), which a call taken over from the
        store has already."""
        self._held: list[tuple[Callable[[], None], bool]] = []
        """Sends made before the first session is set up, each marked when it gives the
        session the chat context of the call's start."""
        self._held_updates: list[tuple[SessionUpdate, bool]] = []
        """Updates made before the first session is set up, each with ``_starting`` then."""
        self._moving = False
        self._streams = GenerationStreams(
            audio_output=settings.config.output_modality == "audio",
            on_open=self._generation_opened,
            on_close=self._generation_closed,
        )
        self._reply = PendingReply(
            GENERATE_REPLY_TIMEOUT, held=lambda: self._phase == "dialling" or self._moving
        )
        self._session_events = SessionEvents(self, settings)
        self._user_turn_ended_at: float | None = None
        self._fatal = False
        self._tasks = SessionTasks()
        self._transport = OpenAIRealtimeTransport(
            settings.client(),
            settings.config,
            settings.realtime_options,
            **settings.store_keywords(),
        )
        self._wire()
        self._main = asyncio.create_task(self._connect(), name="realtime-resumption-connect")

    def __repr__(self) -> str:
        return f"RealtimeSession({self._transport!r}, {self._phase})"

    # --- LiveKit's abstract members -----------------------------------------------------------

    @property
    def chat_ctx(self) -> llm.ChatContext:
        """The conversation as this session saw it (a copy)."""
        return self._chat_ctx.copy()

    @property
    def tools(self) -> llm.ToolContext:
        return self._tools.copy()

    async def update_instructions(self, instructions: str) -> None:
        """New instructions, applied in the live session (``session.update``)."""
        await self._update(SessionUpdate(instructions=instructions))

    async def update_tools(self, tools: list[llm.Tool]) -> None:
        """New tools, applied in the live session."""
        self._tools = llm.ToolContext(tools)
        declared: list[dict[str, Any]] = []
        for tool in self._tools.function_tools.values():
            if isinstance(tool, llm.FunctionTool):
                declared.append(llm.utils.build_legacy_openai_schema(tool, internally_tagged=True))
            else:
                schema = dict(tool.info.raw_schema)
                schema.pop("meta", None)  # (the service refuses it, as the OpenAI plugin notes)
                declared.append(schema)
        await self._update(SessionUpdate(tools=declared))

    async def update_chat_ctx(self, chat_ctx: llm.ChatContext) -> None:
        """Send what ``chat_ctx`` holds that the conversation lacks: messages as items (no
        answer is asked for), function outputs as tool results. The chat context a new session
        is given before it dials is the call's start: a call taken over from the store holds
        its own conversation already, and is not given it (as on Gemini)."""
        start = self._starting
        known = {item.id for item in self._chat_ctx.items}
        turns: list[ContentTurn] = []
        for item in chat_ctx.items:
            if item.id in known:
                continue
            self._chat_ctx.items.append(item)
            if item.type == "message" and item.role in ("user", "assistant") and item.text_content:
                turns.append(
                    ContentTurn("user" if item.role == "user" else "model", item.text_content)
                )
            elif item.type == "function_call_output":
                result = ToolResult(
                    id=item.call_id, name=item.name, response={"output": item.output}
                )
                self._send(functools.partial(self._send_tool_result, result), start=start)
        if turns:
            self._send(
                lambda: self._transport.send_content(turns, turn_complete=False), start=start
            )

    def update_options(
        self,
        *,
        tool_choice: NotGivenOr[llm.ToolChoice | None] = NOT_GIVEN,
        voice: NotGivenOr[str] = NOT_GIVEN,
        speed: NotGivenOr[float] = NOT_GIVEN,
        **unsupported: Any,
    ) -> None:
        """A new voice is applied in the live session (``session.update``). A new
        ``tool_choice`` or ``speed`` given to the model reaches its new sessions only: the
        transport's update has no field for them (logged)."""
        ignored = [n for n, v in (("tool_choice", tool_choice), ("speed", speed)) if is_given(v)]
        if ignored or unsupported:
            logger.warning(
                "options not applied to the live session",
                extra={"options": [*ignored, *sorted(unsupported)]},
            )
        if is_given(voice):
            self._tasks.spawn(self._update(SessionUpdate(voice=voice)))

    def push_audio(self, frame: rtc.AudioFrame) -> None:
        """User audio, as 24 kHz mono PCM16; held during a move and delivered after."""
        for pcm in self._input_audio.convert(frame):
            self._send(functools.partial(self._transport.send_audio, pcm))

    def push_video(self, frame: rtc.VideoFrame) -> None:
        """A video frame, as a JPEG image item."""
        data = images.encode(frame, images.EncodeOptions())
        self._send(lambda: self._transport.send_file(data, "image/jpeg"))

    def generate_reply(
        self,
        *,
        instructions: NotGivenOr[str] = NOT_GIVEN,
        tool_choice: NotGivenOr[llm.ToolChoice] = NOT_GIVEN,
        tools: NotGivenOr[list[llm.Tool]] = NOT_GIVEN,
    ) -> asyncio.Future[llm.GenerationCreatedEvent]:
        """Ask for an answer; the future resolves with its generation, or fails with
        ``RealtimeError`` when none began within ``GENERATE_REPLY_TIMEOUT`` of the request
        reaching the service. Asked during a move, the new session gives the answer: the
        clock waits for the move, then starts again, whole."""
        if is_given(tools) or is_given(tool_choice):
            logger.warning("per-response tools and tool_choice are not supported; ignored")
        if self._phase in ("lost", "closed"):
            return failed_reply(f"the session is {self._phase}")
        fut = self._reply.ask()
        text = instructions if is_given(instructions) else None

        def ask() -> None:
            self._reply.requested_at = time.time()
            self._transport.trigger_generation(text)

        self._send(ask)
        return fut

    def commit_audio(self) -> None:
        """End the user's turn (``input_audio_buffer.commit``; nothing with server VAD)."""
        self._send(self._transport.commit_audio)

    def clear_audio(self) -> None:
        """Drop uncommitted input audio (``input_audio_buffer.clear``)."""
        self._send(self._transport.clear_audio)

    def interrupt(self) -> None:
        """Cancel the answer in progress (``response.cancel``)."""
        if self._phase == "ready" and self._streams.answering:
            self._tasks.spawn(self._transport.cancel_response())

    def truncate(
        self,
        *,
        message_id: str,
        modalities: list[Literal["text", "audio"]],
        audio_end_ms: int,
        audio_transcript: NotGivenOr[str] = NOT_GIVEN,
    ) -> None:
        """Cut the last answer's stored audio where playback stopped, so the model does not
        remember saying what the user never heard. The transport truncates only through
        ``cancel_response``, which would also cancel an answer in progress: with a newer
        answer under way the truncation is skipped (logged)."""
        if self._phase != "ready" or "audio" not in modalities:
            return
        if self._streams.answering:
            logger.debug("truncation skipped: a newer answer is in progress")
            return
        options = CancelResponseOptions(truncate=audio_end_ms / 1000)
        self._tasks.spawn(self._transport.cancel_response(options))

    async def aclose(self) -> None:
        """Close the session and end every stream; nothing keeps running after."""
        if self._phase == "closed":
            return
        self._phase = "closed"
        self._main.cancel()
        await asyncio.wait({self._main})
        await self._transport.disconnect()
        await self._tasks.cancel()
        self._streams.close()
        self._reply.close()

    # --- connecting and sending ---------------------------------------------------------------

    async def _connect(self) -> None:
        # AgentActivity configures a new session (instructions, chat context, tools) right
        # after making it: let that land in the first configuration.
        await asyncio.sleep(0)
        self._starting = False
        conn = self._model.conn_options
        started = time.perf_counter()
        error: BaseException | None = None
        for attempt in range(conn.max_retry + 1):
            if attempt:
                await asyncio.sleep(conn.retry_interval)
            try:
                async with asyncio.timeout(conn.timeout):
                    # One dial per attempt: ``conn_options`` spaces the attempts here.
                    await self._transport.connect(retry=False)
            except (TransportError, StoreError, TimeoutError) as exc:
                # StoreError: another process drives the call (LeaseHeldError).
                error = exc
                self._session_events.error(exc, recoverable=attempt < conn.max_retry)
                continue
            self._report_connection_acquired(time.perf_counter() - started)
            self._phase = "ready"
            # A call taken over goes on from its stored conversation and setup, as on Gemini:
            # the chat context and the updates the agent starts with would overwrite them.
            taken_over = self._transport.taken_over
            if taken_over:
                logger.info("a call taken over from the store; the agent's start not sent")
            held, self._held = self._held, []
            for send, start in held:
                if not (start and taken_over):
                    self._deliver(send)
            self._reply.restart()
            pending: SessionUpdate | None = None
            for update, start in self._held_updates:
                if not (start and taken_over):
                    pending = merged(pending, update)
            self._held_updates = []
            if pending is not None:
                await self._transport.update_session(pending)
            return
        logger.warning("connecting to OpenAI Realtime failed", extra={"error": str(error)})
        self._phase = "lost"
        self._held.clear()
        self._held_updates.clear()
        self._streams.close()
        self._reply.fail(f"the session could not connect: {error}")

    def _send(self, send: Callable[[], None], *, start: bool = False) -> None:
        """Deliver ``send`` once the first session is set up, at once after. ``start``: it
        gives the session the call's starting chat context (not sent to a call taken over)."""
        if self._phase == "dialling":
            self._held.append((send, start))
        elif self._phase == "ready":
            self._deliver(send)

    def _deliver(self, send: Callable[[], None]) -> None:
        try:
            send()
        except NotConnectedError:
            logger.debug("input dropped: the session is over")
        except TransportError as error:
            self._session_events.error(error, recoverable=True)

    async def _update(self, update: SessionUpdate) -> None:
        if self._phase == "dialling":
            # The dial in flight may have sent its configuration already: the update is
            # sent again once the session is set up.
            self._held_updates.append((update, self._starting))
        await self._transport.update_session(update)

    def _send_tool_result(self, result: ToolResult) -> None:
        try:
            self._transport.send_tool_result(result)
        except TransportError as error:
            logger.warning("tool result not sent", extra={"call_id": result.id})
            self._session_events.error(error, recoverable=True)

    # --- what the transport reports -----------------------------------------------------------

    def _wire(self) -> None:
        t = self._transport
        t.on_generation_start = self._streams.answer_started
        t.on_generation_end = self._answer_ended
        t.on_audio_output = self._streams.audio
        t.on_text_done = self._streams.media_done
        if self._model.config.output_modality == "audio":
            t.on_output_transcription = self._streams.text
        else:
            t.on_text_output = self._streams.text
        t.on_tool_call = self._tool_calls
        t.on_input_transcription = self._input_transcription
        t.on_speech_started = self._speech_started
        t.on_user_speech_stopped = self._speech_stopped
        t.on_turn_complete = lambda _turn: self._streams.turn_complete()
        t.on_realtime_llm_usage = self._session_events.usage
        t.on_error = self._transport_error
        t.on_move_started = self._move_started
        t.on_move = self._moved
        t.on_close = self._closed

    def _generation_opened(self, generation: Generation) -> None:
        answers = self._reply.claims(generation)
        generation.requested_at = self._reply.requested_at if answers else self._user_turn_ended_at
        self._session_events.generation_created(generation, self._reply)

    def _generation_closed(self, generation: Generation) -> None:
        self._chat_ctx.items.extend(generation.chat_items())

    def _answer_ended(self, generation_id: str, reason: GenerationEndReason) -> None:
        self._streams.answer_ended(generation_id, reason)

    def _tool_calls(self, calls: Sequence[ToolCall]) -> None:
        self._streams.tool_calls(calls)

    def _speech_started(self) -> None:
        self.emit("input_speech_started", llm.InputSpeechStartedEvent())

    def _speech_stopped(self) -> None:
        self._user_turn_ended_at = time.time()
        self.emit(
            "input_speech_stopped",
            llm.InputSpeechStoppedEvent(
                user_transcription_enabled=self._model.config.transcription is not None
            ),
        )

    def _input_transcription(self, transcript: str) -> None:
        message = llm.ChatMessage(role="user", content=[transcript])
        self._chat_ctx.items.append(message)
        self.emit(
            "input_audio_transcription_completed",
            llm.InputTranscriptionCompleted(
                item_id=message.id, transcript=transcript, is_final=True
            ),
        )

    def _transport_error(self, event: TransportErrorEvent) -> None:
        if not event.recoverable:
            self._fatal = True
        self._session_events.error(event.error, recoverable=event.recoverable)

    def _move_started(self, reason: MoveReason, _handle: object) -> None:
        self._moving = True

    def _moved(self, report: MoveReport) -> None:
        self._moving = False
        self._session_events.moved(report, self._reply)

    def _closed(self, code: int | None, reason: str | None) -> None:
        self._streams.close()
        self._reply.fail("the OpenAI Realtime session closed")
        if self._phase == "closed" or self._fatal:
            return
        self._fatal = True
        self._phase = "lost"
        self._session_events.error(
            TransportError(f"the OpenAI Realtime session closed ({code}, {reason})"),
            recoverable=False,
        )
