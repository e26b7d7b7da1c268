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
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Literal

from google.genai import types
from livekit import rtc
from livekit.agents import JobContext, get_job_context, llm
from livekit.agents.types import NOT_GIVEN, NotGivenOr
from livekit.agents.utils import images, is_given
from livekit.plugins.google.utils import create_tools_config
from opentelemetry import context as otel_context

from realtime_resumption import RecordError
from realtime_resumption.move_reports import MoveReport
from realtime_resumption.redaction import Secret, secret
from realtime_resumption.store import StoreError
from realtime_resumption.transport import (
    ContentTurn,
    GenerationEndReason,
    GenerationSettings,
    NotConnectedError,
    ReplayItem,
    SessionLostError,
    SessionUpdate,
    SetupRefusedError,
    ToolCall,
    ToolCallOrphanedError,
    ToolResult,
    TransportError,
    TransportErrorEvent,
    UnknownToolCallError,
)

from ..audio_input import InputAudio
from ..events import SessionMoved
from ..generations import Generation, GenerationStreams
from ..log import logger
from ..pending_reply import PendingReply, failed_reply
from ..session_events import SessionEvents
from ..session_tasks import SessionTasks
from ..session_updates import merged
from ..transcripts import Utterance
from .chat_mirror import ChatMirror
from .options import Options, warn_vertex_scheduling_unsupported

GENERATE_REPLY_TIMEOUT = 5.0
"""Seconds ``generate_reply`` waits for its generation once the request can reach the
service, as the Google plugin does (see ``RealtimeSession.generate_reply``)."""

UPDATE_TIMEOUT = 10.0
"""Seconds an update of the setup (instructions, tools, voice, temperature, tool behaviour)
waits for the session to run on a connection set up with it: the move waits for the answer in
progress to end, then takes a setup (seconds on the live service)."""

WORKER_SHUTDOWN = "parent process shutdown"
"""The reason a LiveKit job shuts down with when its worker closes it (a drain that ran out of
time, a deploy): the one shutdown after which its call goes on in another worker."""

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

    def __init__(
        self,
        realtime_model: llm.RealtimeModel,
        options: Options,
        *,
        on_setup_rolled_back: Callable[[Options, Options], None] | None = None,
    ) -> None:
        super().__init__(realtime_model)
        self._opts = options
        self._on_setup_rolled_back = on_setup_rolled_back
        """Told the options a refused setup carried and those the session went back to (the
        model rolls its own back)."""
        self._tools = llm.ToolContext.empty()
        self._mirror = ChatMirror()
        self._input_audio = InputAudio()
        self._phase: _Phase = "idle"
        self._in_activity = False
        self._pending_config: SessionUpdate | None = None
        self._setup_waiters: list[asyncio.Future[None]] = []
        self._streams = GenerationStreams(
            audio_output=options.response_modality == "audio",
            on_open=self._generation_opened,
            on_close=self._generation_closed,
        )
        self._utterance: Utterance | None = None
        self._quiet_interrupt = False
        self._reply = PendingReply(
            GENERATE_REPLY_TIMEOUT,
            held=lambda: self._phase == "dialling" or self._transport.moving,
            # A reply cancelled by its caller (an AgentActivity interrupted) stops its answer.
            on_cancelled=self.interrupt,
        )
        self._session_events = SessionEvents(self, realtime_model)
        self._user_turn_ended_at: float | None = None
        self._answer_elicited = False
        self._fatal = False
        self._lost_because: BaseException | None = None
        """Why the first connection could not be had (phase ``lost``)."""
        self._job = _job_keeping(options)
        """The LiveKit job this session runs in, when its model has a store (None otherwise)."""
        if self._job is not None:
            self._job.add_shutdown_callback(self._job_shut_down)
        self._tasks = SessionTasks()
        self._transport = options.transport(tools=[])
        telemetry = self._transport.telemetry
        if telemetry is not None:
            # Made inside the AgentSession's span: the session's spans nest under it.
            session_span = otel_context.get_current()
            telemetry.parent = lambda: session_span
        self._wire()
        # The connect begins now: the transport holds what is sent from here on until the
        # first connection is set up (or the connect fails for good), across its retries.
        conn = options.conn_options
        self._connecting = self._transport.connect(
            retry=(0.0, *(conn.retry_interval,) * conn.max_retry),
            resumption_handle=options.resumption_handle,
        )
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

    @property
    def session_resumption_handle(self) -> Secret | None:
        """The latest handle the server marked resumable (before the first connection, the
        one ``session_resumption`` gave), as the Google plugin's property; None before any.
        Save it to resume the conversation later with
        ``RealtimeModel(session_resumption=SessionResumptionConfig(handle=...))``. It is a
        secret: its ``repr`` is redacted; log ``realtime_resumption.redact(handle)``."""
        handle = self._transport.resumption_handle
        if handle is None and self._phase in ("idle", "dialling"):
            handle = self._opts.resumption_handle
        return None if handle is None else secret(handle)

    async def update_instructions(self, instructions: str) -> None:
        """New system instructions. A model that takes them in the session (gemini-3.8-live
        on Vertex AI) gets them on the live connection at once. Otherwise the live connection
        cannot take them, so the session moves (once no answer is in progress) to one set up
        with them. Returns once they are live, so the next turn is answered with them, or
        after ``UPDATE_TIMEOUT`` (10 s, logged; the move still comes). Of several updates in
        a row, the last wins."""
        if instructions == self._opts.instructions:
            return
        self._opts.instructions = instructions
        await self._update(SessionUpdate(instructions=instructions))

    async def update_tools(self, tools: list[llm.Tool]) -> None:
        """New tools: taken in the session where the model takes them, else the session
        moves to a connection set up with them; returns as ``update_instructions`` does."""
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
        if (
            is_given(tool_response_scheduling)
            and tool_response_scheduling != self._opts.tool_response_scheduling
        ):
            self._opts.tool_response_scheduling = tool_response_scheduling
            if self._opts.vertexai:
                warn_vertex_scheduling_unsupported()
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
            self._tasks.spawn(self._update(update))

    def push_audio(self, frame: rtc.AudioFrame) -> None:
        """User audio, resampled to 16 kHz mono; held during a move and delivered after."""
        for pcm in self._input_audio.convert(frame):
            self._send(functools.partial(self._transport.send_audio, pcm))

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
        ``RealtimeError`` when none began within ``GENERATE_REPLY_TIMEOUT`` (5 s) of the
        request reaching the service. A newer call supersedes a pending one.

        One outcome, a reply or an error: while the session moves (or first connects) the
        request waits for the new connection, so the clock does not run out then; it starts
        again, whole, when the move ends. A move is bounded by ``resumption`` and
        ``retry_budget``; a lost session fails the request."""
        if is_given(tools) or is_given(tool_choice):
            logger.warning("per-response tools and tool_choice are not supported; ignored")
        if self._phase in ("lost", "closed"):
            why = f": {self._lost_because}" if self._phase == "lost" else ""
            return failed_reply(f"the session is {self._phase}{why}")
        fut = self._reply.ask()
        if self._in_activity:
            self._in_activity = False
            self._send(self._transport.send_activity_end)
        text = instructions if is_given(instructions) else None
        self._send(lambda: self._elicit(text))
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
            self._tasks.spawn(self._transport.cancel_response())

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

    async def hand_over(self) -> None:
        """Hand the call to another worker (a drain, a deploy) before this session closes:
        see ``GeminiLiveTransport.hand_over`` (the model needs a ``store``). The session
        takes no more input; the worker that joins the room next takes the call over."""
        # The call goes on elsewhere: its connection's close is no lost session.
        self._fatal = True
        try:
            await self._transport.hand_over()
        except BaseException:
            self._fatal = False
            raise

    async def aclose(self) -> None:
        """Close the connection and end every stream; nothing keeps running after.

        In a LiveKit job, with a store: the session closing with its AgentSession while the
        call runs (the job shutting down: LiveKit closes the session before it runs the
        job's shutdown callbacks) hands the call over instead (``hand_over``); the job's
        shutdown reason then decides: the worker's own shutdown (a drain, a deploy) keeps the
        call's state for the worker the room goes to next, any other reason deletes it."""
        if self._phase == "closed":
            return
        if self._job is not None and self._phase == "ready" and _closing(self._job):
            try:
                await self.hand_over()
            except (TransportError, StoreError) as error:
                logger.warning("the call was not handed over; it ends here: %s", error)
        self._phase = "closed"
        self._check_setup()
        self._main.cancel()
        await asyncio.wait({self._main})
        self._connecting.close()  # (not awaited when closed before the connect's first step)
        await self._transport.disconnect()
        await self._tasks.cancel()
        self._streams.close()
        self._reply.close()

    async def _job_shut_down(self, reason: str) -> None:
        if reason != WORKER_SHUTDOWN:
            # The job ended for the call's own sake (the room closed, the app shut it down):
            # a call handed over at its close goes on nowhere.
            await self._transport.forget_handed_over()

    # --- connecting and sending ---------------------------------------------------------------

    async def _connect(self) -> None:
        # AgentActivity configures a new session (instructions, chat context, tools) right
        # after making it: let that land in the first setup.
        await asyncio.sleep(0)
        started = time.perf_counter()
        self._phase = "dialling"
        try:
            # ``conn_options``: ``max_retry`` retries ``retry_interval`` apart (jittered), each
            # failed attempt a recoverable error (through ``on_error``); the connection's
            # ``timeout`` bounds each setup.
            await self._connecting
        except (TransportError, StoreError, RecordError) as error:
            # Another worker driving the call, or a record this version cannot read, is no
            # failed dial: the session is lost at once, as after the last failed attempt.
            logger.warning("connecting to Gemini Live failed", extra={"error": str(error)})
            self._lose(error)
            self._session_events.error(error, recoverable=False)
            return
        self._report_connection_acquired(time.perf_counter() - started)
        self._phase = "ready"
        self._reply.restart()
        pending, self._pending_config = self._pending_config, None
        if pending is not None:
            await self._transport.update_session(pending)
        self._check_setup()

    def _lose(self, error: BaseException) -> None:
        """The first connection cannot be had: the session is lost, and a reply waiting for
        it fails now, with the reason."""
        self._phase = "lost"
        self._lost_because = error
        self._streams.close()
        self._check_setup()
        self._reply.fail(f"the session could not connect: {error}")

    def _send(self, send: Callable[[], None]) -> None:
        """Deliver now: the transport holds it while the first connection sets up (its
        retries included) or the session moves. Nothing goes once the session is over."""
        if self._phase not in ("lost", "closed"):
            self._deliver(send)

    def _deliver(self, send: Callable[[], None]) -> None:
        try:
            send()
        except NotConnectedError:
            # The transport ended the session (it is reported through on_error, on_close).
            logger.debug("input dropped: the session is over")

    async def _update(self, update: SessionUpdate) -> None:
        phase = self._phase
        if phase == "dialling":
            # The dial in flight was set up without it: apply it once connected (a move).
            self._pending_config = merged(self._pending_config, update)
        elif phase in ("idle", "ready"):
            await self._transport.update_session(update)
        if phase in ("dialling", "ready"):
            await self._setup_live()

    async def _setup_live(self) -> None:
        """Wait (``UPDATE_TIMEOUT``) until the session runs on a connection set up with every
        update so far, or is over. The transport moves to it: at once on a connection that has
        answered nothing, else at the next resumable point."""
        if self._setup_settled():
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._setup_waiters.append(waiter)
        try:
            async with asyncio.timeout(UPDATE_TIMEOUT):
                await waiter
        except TimeoutError:
            logger.warning(
                "the new setup is not live yet; the session moves to it at the next chance",
                extra={"waited": UPDATE_TIMEOUT},
            )
        finally:
            if waiter in self._setup_waiters:
                self._setup_waiters.remove(waiter)

    def _setup_settled(self) -> bool:
        if self._phase in ("lost", "closed"):
            return True
        return self._phase == "ready" and not self._transport.pending_setup_change

    def _check_setup(self, *, over: bool = False) -> None:
        """Release the updates waiting for their setup, once it is live (or ``over``: the
        session ended)."""
        if not over and not self._setup_settled():
            return
        waiters, self._setup_waiters = self._setup_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _gemini_tools(self) -> list[types.Tool]:
        tools, _ = create_tools_config(
            self._tools, tool_behavior=self._opts.tool_behavior, use_parameters_json_schema=False
        )
        return tools

    def _replay(self, turns: Sequence[ContentTurn]) -> None:
        self._transport.replay_history([ReplayItem(t.role, text=t.text) for t in turns])

    def _send_turns(self, turns: Sequence[ContentTurn], user_text: Sequence[str]) -> None:
        if self._opts.live_text and self._transport.model_traits.mid_session_client_content:
            # gemini-3.8-live takes content with roles mid-session: the turns up to the
            # model's last go as history (no answer asked for), the user's turns after it as
            # realtime input, which asks for the answer.
            last = max((i for i, t in enumerate(turns) if t.role == "model"), default=-1)
            if last >= 0:
                self._replay(turns[: last + 1])
            asked = [t.text for t in turns[last + 1 :]]
            if asked:
                self._transport.send_live_text([ContentTurn("user", "\n".join(asked))])
                self._answer_elicited = True
            return
        if self._opts.live_text:
            # Gemini 3.x before 3.8 takes no conversation content after its first turn: the
            # user's text goes as realtime input, which asks for the answer itself.
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
            self._session_events.error(error, recoverable=True)
        except UnknownToolCallError:
            # A call of an earlier session, from history: sending it would strand the model.
            logger.info("tool result of another session not sent", extra={"call_id": result.id})

    def _elicit(self, instructions: str | None) -> None:
        self._reply.requested_at = time.time()
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

    # --- what the transport reports -----------------------------------------------------------

    def _wire(self) -> None:
        t = self._transport
        t.on_generation_start = self._answer_started
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
        t.on_speech_started = self._streams.user_speech
        t.on_user_speech_stopped = self._user_stopped
        t.on_interrupted = self._interrupted
        t.on_turn_complete = self._turn_complete
        t.on_realtime_llm_usage = self._session_events.usage
        t.on_error = self._transport_error
        t.on_move = self._moved
        t.on_close = self._closed

    def _generation_opened(self, generation: Generation) -> None:
        # As the Google plugin: a pending generate_reply takes the next generation to open;
        # any other is announced as the user's speech first, which stops a playout still
        # going (the answer it interrupts is over already, and this one must not be cancelled).
        if not self._reply.claims(generation):
            self._quiet_interrupt = True
            try:
                self.emit("input_speech_started", llm.InputSpeechStartedEvent())
            finally:
                self._quiet_interrupt = False
        self._session_events.generation_created(generation, self._reply)

    def _answer_started(self, generation_id: str) -> None:
        self._streams.answer_started(generation_id)
        generation = self._streams.current
        if generation is not None and generation.requested_at is None:
            generation.requested_at = (
                self._reply.requested_at if generation.user_initiated else self._user_turn_ended_at
            )

    def _generation_closed(self, generation: Generation) -> None:
        # As the Google plugin: the user's turn is over when its generation is (LiveKit's
        # user state goes back to listening then), and their words are final.
        self.emit(
            "input_speech_stopped", llm.InputSpeechStoppedEvent(user_transcription_enabled=False)
        )
        self._finish_utterance()
        for item in generation.chat_items():
            self._mirror.add(item)

    def _answer_ended(self, generation_id: str, reason: GenerationEndReason) -> None:
        if reason not in (GenerationEndReason.GENERATION_COMPLETE, GenerationEndReason.INTERRUPTED):
            logger.info("answer ended", extra={"reason": reason.value})
        self._streams.answer_ended(generation_id, reason)

    def _tool_calls(self, calls: Sequence[ToolCall]) -> None:
        self._streams.tool_calls(
            calls, answer_goes_on=all(self._transport.non_blocking(call.name) for call in calls)
        )

    def _tool_calls_cancelled(self, ids: Sequence[str]) -> None:
        logger.info("the model cancelled tool calls", extra={"call_ids": list(ids)})

    def _input_transcription(self, delta: str) -> None:
        if not delta:
            return
        self._streams.user_speech()
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

    def _user_stopped(self) -> None:
        # The speech stop LiveKit sees comes with the end of the turn's generation, as with
        # the Google plugin; this only times the answer.
        self._user_turn_ended_at = time.time()

    def _interrupted(self, server_turn_id: int | None) -> None:
        # The provider heard the user over its answer: a barge-in.
        if not self._reply.pending:
            self.emit("input_speech_started", llm.InputSpeechStartedEvent())

    def _turn_complete(self, server_turn_id: int | None) -> None:
        self._streams.turn_complete()

    def _transport_error(self, event: TransportErrorEvent) -> None:
        if isinstance(event.error, SetupRefusedError):
            self._roll_back_options()
        if not event.recoverable:
            self._fatal = True
        self._session_events.error(event.error, recoverable=event.recoverable)

    def _roll_back_options(self) -> None:
        """The service refused the changed setup and the transport went back to the one that
        worked: so do this session's options, and the model's where it gave the refused
        values (a new session of the model would ask for them again)."""
        setup = self._transport.setup
        refused = replace(self._opts)
        if setup.voice is not None:
            self._opts.voice = setup.voice
        self._opts.generation = replace(
            self._opts.generation, temperature=setup.generation.temperature
        )
        behaviors = {
            declaration.behavior
            for tool in setup.tools
            for declaration in tool.function_declarations or ()
        }
        if len(behaviors) == 1:
            # (No declaration says nothing of the behaviour the setup would give them.)
            (behavior,) = behaviors
            self._opts.tool_behavior = behavior if behavior is not None else NOT_GIVEN
        if self._on_setup_rolled_back is not None:
            self._on_setup_rolled_back(refused, self._opts)

    def _moved(self, report: MoveReport) -> None:
        self._check_setup()
        self._session_events.moved(report, self._reply)

    def _closed(self, code: int | None, reason: str | None) -> None:
        self._streams.close()
        self._check_setup(over=True)
        self._reply.fail("the Gemini Live session closed")
        if self._phase == "closed" or self._fatal:
            return
        # The transport only ends a session for good when it could not be carried on.
        self._fatal = True
        self._session_events.error(
            SessionLostError(f"the Gemini Live session closed ({code}, {reason})"),
            recoverable=False,
        )


def _job_keeping(options: Options) -> JobContext | None:
    """The job this session runs in, when its model keeps calls in a store."""
    return get_job_context(required=False) if options.store is not None else None


def _closing(job: JobContext) -> bool:
    """Whether the job's AgentSession is closing (not one agent handing off to another, which
    closes a RealtimeSession and goes on)."""
    try:
        session = job.primary_session
    except RuntimeError:
        return False
    # No public flag: AgentSession sets it when its close begins, before the models close.
    closing = getattr(session, "_is_closing", None)
    return bool(closing()) if callable(closing) else False
