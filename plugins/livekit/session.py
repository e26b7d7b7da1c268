"""``RealtimeSession``: LiveKit's realtime session API over ``GeminiLiveTransport``.

The transport owns the connection and its moves; the session translates. LiveKit calls become
transport sends (held until the first setup completes), and the transport's callbacks become
LiveKit events: ``generation_created`` (see ``generations``), speech and transcription events,
``metrics_collected``, ``error``, and, after each move, ``session_moved`` and
``session_reconnected``.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from google.genai import types
from livekit import rtc
from livekit.agents import llm
from livekit.agents.types import NOT_GIVEN, NotGivenOr
from livekit.agents.utils import images, is_given
from livekit.plugins.google.utils import create_tools_config

from realtime_resumption.moves import MoveOutcome, MoveReport
from realtime_resumption.transport import (
    ContentTurn,
    GenerationEndReason,
    GenerationSettings,
    NotConnectedError,
    RealtimeLLMUsage,
    ReconnectState,
    ReplayItem,
    SessionLostError,
    SessionUpdate,
    ToolCall,
    ToolCallOrphanedError,
    ToolResult,
    TransportError,
    TransportErrorEvent,
    UnknownToolCallError,
)

from .audio_input import InputAudio
from .chat_mirror import ChatMirror
from .events import SessionMoved, SessionMovedEvent
from .generations import Generation, GenerationStreams
from .log import logger
from .metrics import answer_metrics
from .options import Options
from .transcripts import Utterance

if TYPE_CHECKING:
    from .model import RealtimeModel

GENERATE_REPLY_TIMEOUT = 5.0
"""Seconds ``generate_reply`` waits for its generation, as the Google plugin does."""

_Phase = Literal["idle", "dialling", "ready", "lost", "closed"]
"""``lost``: the first connection could not be set up; ``closed``: ``aclose`` was called."""


class RealtimeSession(llm.RealtimeSession[SessionMoved]):
    """One Gemini Live conversation, kept alive across connections by the transport.

    Made by ``RealtimeModel.session()``; it connects at once. ``chat_ctx`` mirrors what the
    server holds, under the ids LiveKit uses, so AgentActivity's updates send only what is
    new. ``interrupt`` cancels the answer in progress (``cancel_response``); ``truncate`` is a
    no-op (Gemini cannot truncate; ``message_truncation`` is False). Events beyond LiveKit's:
    ``session_moved`` (``SessionMovedEvent``) after each move.
    """

    def __init__(self, realtime_model: RealtimeModel, options: Options) -> None:
        super().__init__(realtime_model)
        self._model = realtime_model
        self._opts = options
        self._tools = llm.ToolContext.empty()
        self._mirror = ChatMirror()
        self._input_audio = InputAudio()
        self._phase: _Phase = "idle"
        self._before_dial: list[Callable[[], None]] = []
        self._dialled: list[Callable[[], None]] = []
        """Sends (but audio) handed to the transport during a first dial that may fail."""
        self._in_activity = False
        self._pending_config: SessionUpdate | None = None
        self._streams = GenerationStreams(
            audio_output=options.response_modality == "audio",
            on_open=self._generation_opened,
            on_close=self._generation_closed,
        )
        self._utterance: Utterance | None = None
        self._user_speaking = False
        self._quiet_interrupt = False
        self._reply: asyncio.Future[llm.GenerationCreatedEvent] | None = None
        self._reply_requested_at: float | None = None
        self._user_turn_ended_at: float | None = None
        self._last_generation: Generation | None = None
        self._answer_elicited = False
        self._fatal = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._transport = options.transport(tools=[])
        self._wire()
        self._main = asyncio.create_task(self._connect(), name="realtime-resumption-connect")

    def __repr__(self) -> str:
        return f"RealtimeSession({self._transport!r}, {self._phase})"

    # --- LiveKit's abstract members -----------------------------------------------------------

    @property
    def chat_ctx(self) -> llm.ChatContext:
        """What the server holds (a copy), under LiveKit's ids."""
        return self._mirror.copy()

    @property
    def tools(self) -> llm.ToolContext:
        return self._tools.copy()

    async def update_instructions(self, instructions: str) -> None:
        """New system instructions: the live connection cannot take them, so the session
        moves (at the next resumable point) to one set up with them."""
        if instructions == self._opts.instructions:
            return
        self._opts.instructions = instructions
        await self._update(SessionUpdate(instructions=instructions))

    async def update_tools(self, tools: list[llm.Tool]) -> None:
        """New tools: the session moves to a connection set up with them."""
        tool_ctx = llm.ToolContext(tools)
        if tool_ctx == self._tools:
            return
        self._tools = tool_ctx
        await self._update(SessionUpdate(tools=self._gemini_tools()))

    async def update_chat_ctx(self, chat_ctx: llm.ChatContext) -> None:
        """Send what ``chat_ctx`` holds that the server lacks: turns as context (no answer
        is asked for), tool results as tool responses."""
        # The chat context AgentActivity gives a new session is its history: quiet context.
        first = self._phase == "idle"
        outgoing = self._mirror.update(
            chat_ctx,
            vertexai=self._opts.vertexai,
            scheduling=self._opts.tool_response_scheduling,
            silent_scheduling=(
                not self._opts.vertexai and self._opts.tool_behavior == types.Behavior.NON_BLOCKING
            ),
        )
        if outgoing.turns:
            if first and self._opts.resumption_handle is None:
                items = tuple(outgoing.turns)
                self._send(lambda: self._replay(items))
            elif first:
                logger.debug("the resumed session holds the conversation already")
            else:
                self._send(lambda: self._send_turns(outgoing.turns, outgoing.user_text))
        for result in outgoing.results:
            self._send(functools.partial(self._send_tool_result, result))

    def update_options(
        self,
        *,
        tool_choice: NotGivenOr[llm.ToolChoice | None] = NOT_GIVEN,
        voice: NotGivenOr[str] = NOT_GIVEN,
        temperature: NotGivenOr[float] = NOT_GIVEN,
        tool_behavior: NotGivenOr[types.Behavior] = NOT_GIVEN,
        tool_response_scheduling: NotGivenOr[types.FunctionResponseScheduling] = NOT_GIVEN,
    ) -> None:
        """A new voice, temperature or tool behaviour moves the session to a connection set up
        with it. ``tool_choice`` other than auto is not supported by Gemini Live (logged)."""
        if is_given(tool_choice) and tool_choice not in (None, "auto"):
            logger.warning(
                "Gemini Live has no per-session tool_choice; it stays 'auto'",
                extra={"tool_choice": tool_choice},
            )
        if is_given(tool_response_scheduling):
            self._opts.tool_response_scheduling = tool_response_scheduling
        update = SessionUpdate()
        if is_given(voice) and voice != self._opts.voice:
            self._opts.voice = voice
            update = SessionUpdate(voice=voice)
        if is_given(tool_behavior) and tool_behavior != self._opts.tool_behavior:
            self._opts.tool_behavior = tool_behavior
            update = replace(update, tools=self._gemini_tools())
        if is_given(temperature) and temperature != self._opts.generation.temperature:
            change = GenerationSettings(temperature=temperature)
            self._opts.generation = self._opts.generation.merged(change)
            update = replace(update, generation=change)
        if update != SessionUpdate():
            self._spawn(self._update(update))

    def push_audio(self, frame: rtc.AudioFrame) -> None:
        """User audio, resampled to 16 kHz mono; held during a move and delivered after."""
        for pcm in self._input_audio.convert(frame):
            self._send(functools.partial(self._transport.send_audio, pcm), audio=True)

    def push_video(self, frame: rtc.VideoFrame) -> None:
        """A video frame, encoded as the model's ``image_encode_options`` say."""
        data = images.encode(frame, self._opts.image_encode_options)
        self._send(lambda: self._transport.send_file(data, "image/jpeg"))

    def generate_reply(
        self,
        *,
        instructions: NotGivenOr[str] = NOT_GIVEN,
        tool_choice: NotGivenOr[llm.ToolChoice] = NOT_GIVEN,
        tools: NotGivenOr[list[llm.Tool]] = NOT_GIVEN,
    ) -> asyncio.Future[llm.GenerationCreatedEvent]:
        """Ask for an answer; the future resolves with its generation, or fails with
        ``RealtimeError`` after 5 s. A newer call supersedes a pending one."""
        if is_given(tools) or is_given(tool_choice):
            logger.warning("per-response tools and tool_choice are not supported; ignored")
        loop = asyncio.get_running_loop()
        previous, self._reply = self._reply, None
        if previous is not None and not previous.done():
            logger.warning("generate_reply called while another is pending; cancelling it")
            previous.cancel("superseded by a new generate_reply call")
        fut: asyncio.Future[llm.GenerationCreatedEvent] = loop.create_future()
        if self._phase in ("lost", "closed"):
            fut.set_exception(llm.RealtimeError(f"the session is {self._phase}"))
            return fut
        self._reply = fut
        if self._in_activity:
            self._in_activity = False
            self._send(self._transport.send_activity_end)
        text = instructions if is_given(instructions) else None
        self._send(lambda: self._elicit(text))

        def _timed_out() -> None:
            if not fut.done():
                fut.set_exception(
                    llm.RealtimeError("generate_reply timed out waiting for generation_created")
                )

        timer = loop.call_later(GENERATE_REPLY_TIMEOUT, _timed_out)

        def _done(f: asyncio.Future[llm.GenerationCreatedEvent]) -> None:
            timer.cancel()
            current = self._reply is f
            if current:
                self._reply = None
            if f.cancelled() and current:
                self.interrupt()

        fut.add_done_callback(_done)
        return fut

    def commit_audio(self) -> None:
        """The user's turn is over (client-side turn detection): ``audioStreamEnd`` lets the
        provider end it now."""
        self._send(self._transport.commit_audio)

    def clear_audio(self) -> None:
        """Nothing to clear: Gemini keeps no uncommitted input buffer a client can drop."""
        self._transport.clear_audio()

    def interrupt(self) -> None:
        """Stop the answer in progress (``cancel_response``): the rest of its output is
        dropped and its generation ends. Nothing happens when none is in progress, or when
        ``activity_handling`` is ``NO_INTERRUPTION``."""
        if self._quiet_interrupt or not self._opts.interrupts or self._phase in ("lost", "closed"):
            return
        if self._opts.manual_activity:
            # The client marks the user's turns: a new activity is what interrupts.
            self.start_user_activity()
        if self._streams.answering:
            self._spawn(self._transport.cancel_response())

    def start_user_activity(self) -> None:
        """The user began speaking, with automatic activity detection disabled
        (``activityStart``); ``generate_reply`` ends the activity."""
        if self._opts.manual_activity and not self._in_activity:
            self._in_activity = True
            self._send(self._transport.send_activity_start)

    def truncate(
        self,
        *,
        message_id: str,
        modalities: list[Literal["text", "audio"]],
        audio_end_ms: int,
        audio_transcript: NotGivenOr[str] = NOT_GIVEN,
    ) -> None:
        """A no-op: Gemini Live cannot truncate what it said (``message_truncation`` is
        False, so LiveKit does not call it)."""

    async def aclose(self) -> None:
        """Close the connection and end every stream; nothing keeps running after."""
        if self._phase == "closed":
            return
        self._phase = "closed"
        self._before_dial.clear()
        self._main.cancel()
        await asyncio.wait({self._main})
        await self._transport.disconnect()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(set(self._tasks))
        self._streams.close()
        if self._reply is not None and not self._reply.done():
            self._reply.cancel("session closed")

    # --- connecting and sending ---------------------------------------------------------------

    async def _connect(self) -> None:
        # AgentActivity configures a new session (instructions, chat context, tools) right
        # after making it: let that land in the first setup.
        await asyncio.sleep(0)
        conn = self._opts.conn_options
        for attempt in range(conn.max_retry + 1):
            started = time.perf_counter()
            dial = asyncio.create_task(self._dial(), name="realtime-resumption-dial")
            try:
                # The dial runs up to its first wait before this task goes on: from now on
                # the transport holds what is sent until the setup completes.
                await asyncio.sleep(0)
                self._phase = "dialling"
                before, self._before_dial = self._before_dial, []
                for send in before:
                    self._send(send)
                await dial
            except TransportError as error:
                last = attempt == conn.max_retry
                logger.warning(
                    "connecting to Gemini Live failed",
                    extra={"attempt": attempt + 1, "error": str(error)},
                )
                self._emit_error(error, recoverable=not last)
                if last:
                    self._phase = "lost"
                    self._streams.close()
                    return
                # The failed dial discarded what it held: all but audio goes to the next one,
                # and so does what arrives meanwhile (audio in that gap is lost, as on a drop).
                self._phase = "idle"
                self._before_dial[:0] = self._dialled
                self._dialled = []
                pending, self._pending_config = self._pending_config, None
                if pending is not None:
                    await self._transport.update_session(pending)
                await asyncio.sleep(conn.retry_interval)
                continue
            finally:
                if not dial.done():
                    dial.cancel()
                    await asyncio.wait({dial})
            self._dialled = []
            self._report_connection_acquired(time.perf_counter() - started)
            break
        self._phase = "ready"
        pending, self._pending_config = self._pending_config, None
        if pending is not None:
            await self._transport.update_session(pending)

    async def _dial(self) -> None:
        handle = self._opts.resumption_handle
        if handle is not None:
            await self._transport.reconnect(ReconnectState(resumption_handle=handle))
        else:
            await self._transport.connect()

    def _send(self, send: Callable[[], None], *, audio: bool = False) -> None:
        """Deliver now (the transport holds it while a connection sets up or the session
        moves), or, before a first dial began, as soon as it does; audio that arrives while
        no connection is being set up (between failed first attempts) is dropped."""
        if self._phase == "idle":
            if not audio:
                self._before_dial.append(send)
        elif self._phase in ("dialling", "ready"):
            if self._phase == "dialling" and not audio:
                self._dialled.append(send)
            self._deliver(send)

    def _deliver(self, send: Callable[[], None]) -> None:
        try:
            send()
        except NotConnectedError:
            # Only between failed first attempts: nothing takes input then.
            logger.debug("input dropped: no connection is being set up")

    async def _update(self, update: SessionUpdate) -> None:
        if self._phase == "dialling":
            # The dial in flight was set up without it: apply it once connected (a move).
            self._pending_config = _merge(self._pending_config, update)
        elif self._phase in ("idle", "ready"):
            await self._transport.update_session(update)

    def _gemini_tools(self) -> list[types.Tool]:
        tools, _ = create_tools_config(
            self._tools, tool_behavior=self._opts.tool_behavior, use_parameters_json_schema=False
        )
        return tools

    def _replay(self, turns: Sequence[ContentTurn]) -> None:
        self._transport.replay_history([ReplayItem(t.role, text=t.text) for t in turns])

    def _send_turns(self, turns: Sequence[ContentTurn], user_text: Sequence[str]) -> None:
        if self._opts.live_text:
            # Gemini 3.x takes no conversation content after its first turn: the user's
            # text goes as realtime input, which asks for the answer itself.
            if user_text:
                self._transport.send_live_text([ContentTurn("user", "\n".join(user_text))])
                self._answer_elicited = True
            return
        self._transport.send_content(turns, turn_complete=False)

    def _send_tool_result(self, result: ToolResult) -> None:
        try:
            self._transport.send_tool_result(result)
        except ToolCallOrphanedError as error:
            # The call's session was left behind by a move (its answer ended): the model may
            # ask again. Worth an event, not the end of the session.
            logger.warning("tool result not sent", extra={"call_id": result.id})
            self._emit_error(error, recoverable=True)
        except UnknownToolCallError:
            # A call of an earlier session, from history: sending it would strand the model.
            logger.info("tool result of another session not sent", extra={"call_id": result.id})

    def _elicit(self, instructions: str | None) -> None:
        self._reply_requested_at = time.time()
        if self._opts.live_text:
            if instructions:
                text = f"<instructions>\n{instructions}\n</instructions>"
                self._transport.send_live_text([ContentTurn("user", text)])
            elif not self._answer_elicited:
                logger.debug("nothing to ask with: the next answer resolves generate_reply")
            self._answer_elicited = False
            return
        # Gemini answers a completed turn: "." completes it, as the Google plugin does.
        turns = [ContentTurn("model", instructions)] if instructions else []
        self._transport.send_content([*turns, ContentTurn("user", ".")], turn_complete=True)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- what the transport reports -----------------------------------------------------------

    def _wire(self) -> None:
        t = self._transport
        t.on_generation_start = self._streams.answer_started
        t.on_generation_end = self._answer_ended
        t.on_audio_output = self._streams.audio
        t.on_text_done = self._streams.media_done
        if self._opts.response_modality == "audio" and self._opts.output_audio_transcription:
            # What the model says; its text parts are not spoken and stay out of captions.
            t.on_output_transcription = self._streams.text
        else:
            t.on_text_output = self._streams.text
        t.on_tool_call = self._tool_calls
        t.on_tool_call_cancel = self._tool_calls_cancelled
        t.on_input_transcription = self._input_transcription
        t.on_speech_started = self._speech_started
        t.on_user_speech_stopped = self._user_stopped
        t.on_interrupted = self._interrupted
        t.on_turn_complete = self._turn_complete
        t.on_realtime_llm_usage = self._usage
        t.on_error = self._transport_error
        t.on_move = self._moved
        t.on_close = self._closed

    def _generation_opened(self, generation: Generation) -> None:
        self._last_generation = generation
        if generation.continuation:
            self.emit("generation_created", generation.event(user_initiated=False))
            return
        if self._utterance is not None:
            self._utterance.answered = True
        reply = self._reply
        user_initiated = reply is not None and not reply.done()
        generation.requested_at = (
            self._reply_requested_at if user_initiated else self._user_turn_ended_at
        )
        if not user_initiated:
            # A new answer supersedes any playout still going, as the Google plugin does;
            # the answer it interrupts is over already, and this one must not be cancelled.
            self._quiet_interrupt = True
            try:
                if not self._user_speaking:
                    self.emit("input_speech_started", llm.InputSpeechStartedEvent())
                    self._user_speaking = True
            finally:
                self._quiet_interrupt = False
        self._speech_stopped()
        event = generation.event(user_initiated=user_initiated)
        if user_initiated and reply is not None:
            reply.set_result(event)
        self.emit("generation_created", event)

    def _generation_closed(self, generation: Generation) -> None:
        if self._utterance is not None and self._utterance.answered:
            self._finish_utterance()
        for call in generation.function_calls:
            self._mirror.add(call)
        if generation.output_text:
            self._mirror.add(
                llm.ChatMessage(
                    role="assistant", content=[generation.output_text], id=generation.response_id
                )
            )

    def _answer_ended(self, generation_id: str, reason: GenerationEndReason) -> None:
        if reason not in (GenerationEndReason.GENERATION_COMPLETE, GenerationEndReason.INTERRUPTED):
            logger.info("answer ended", extra={"reason": reason.value})
        self._streams.answer_ended(generation_id, reason)

    def _tool_calls(self, calls: Sequence[ToolCall]) -> None:
        self._streams.tool_calls(calls)

    def _tool_calls_cancelled(self, ids: Sequence[str]) -> None:
        logger.info("the model cancelled tool calls", extra={"call_ids": list(ids)})

    def _input_transcription(self, delta: str) -> None:
        if not delta:
            return
        self._speech_started()
        if self._utterance is None:
            self._utterance = Utterance()
        self._utterance.add(delta)
        self._user_turn_ended_at = time.time()
        if self._utterance.text:
            self.emit(
                "input_audio_transcription_completed",
                llm.InputTranscriptionCompleted(
                    item_id=self._utterance.item_id,
                    transcript=self._utterance.text,
                    is_final=False,
                    turn_started_at=self._utterance.started_at,
                ),
            )

    def _finish_utterance(self) -> None:
        utterance, self._utterance = self._utterance, None
        if utterance is None or not utterance.text:
            return
        self.emit(
            "input_audio_transcription_completed",
            llm.InputTranscriptionCompleted(
                item_id=utterance.item_id,
                transcript=utterance.text,
                is_final=True,
                turn_started_at=utterance.started_at,
            ),
        )
        message = llm.ChatMessage(role="user", content=[utterance.text], id=utterance.item_id)
        message.created_at = utterance.started_at
        self._mirror.add(message)

    def _speech_started(self) -> None:
        if not self._user_speaking:
            self._user_speaking = True
            self.emit("input_speech_started", llm.InputSpeechStartedEvent())

    def _user_stopped(self) -> None:
        self._user_turn_ended_at = time.time()
        self._speech_stopped()

    def _speech_stopped(self) -> None:
        if self._user_speaking:
            self._user_speaking = False
            self.emit(
                "input_speech_stopped",
                llm.InputSpeechStoppedEvent(user_transcription_enabled=False),
            )

    def _interrupted(self, server_turn_id: int | None) -> None:
        # The provider heard the user over its answer: a barge-in.
        if self._reply is None:
            self._speech_started()

    def _turn_complete(self, server_turn_id: int | None) -> None:
        self._streams.turn_complete()
        if self._streams.current is None and self._utterance is not None:
            if self._utterance.answered:
                self._finish_utterance()

    def _usage(self, usage: RealtimeLLMUsage) -> None:
        generation = self._last_generation
        if usage.phase != "final" or generation is None:
            return
        self.emit(
            "metrics_collected",
            answer_metrics(
                usage,
                generation,
                label=self._model.label,
                model=self._model.model,
                provider=self._model.provider,
            ),
        )

    def _transport_error(self, event: TransportErrorEvent) -> None:
        if not event.recoverable:
            self._fatal = True
        self._emit_error(event.error, recoverable=event.recoverable)

    def _moved(self, report: MoveReport) -> None:
        logger.info("session moved", extra={"move": report.as_dict()})
        self.emit("session_moved", SessionMovedEvent(report))
        if report.outcome is not MoveOutcome.LOST:
            self.emit("session_reconnected", llm.RealtimeSessionReconnectedEvent())

    def _closed(self, code: int | None, reason: str | None) -> None:
        self._streams.close()
        if self._phase == "closed" or self._fatal:
            return
        # The transport only ends a session for good when it could not be carried on.
        self._fatal = True
        self._emit_error(
            SessionLostError(f"the Gemini Live session closed ({code}, {reason})"),
            recoverable=False,
        )

    def _emit_error(self, error: BaseException, *, recoverable: bool) -> None:
        self.emit(
            "error",
            llm.RealtimeModelError(
                timestamp=time.time(),
                label=self._model.label,
                error=error if isinstance(error, Exception) else RuntimeError(str(error)),
                recoverable=recoverable,
            ),
        )


def _merge(first: SessionUpdate | None, second: SessionUpdate) -> SessionUpdate:
    if first is None:
        return second
    return SessionUpdate(
        instructions=second.instructions if second.instructions is not None else first.instructions,
        tools=second.tools if second.tools is not None else first.tools,
        voice=second.voice if second.voice is not None else first.voice,
    )
