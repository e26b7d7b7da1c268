"""The conversation on one connection: user turns, answers, tool calls and resumption updates.

A user turn ends on ``client_content`` with ``turnComplete``, on realtime text, on
``audioStreamEnd`` or ``activityEnd`` after input, or when speech is followed by
``vad_silence`` of silent audio (measured in audio time). The answer is then paced chunk by
chunk; user speech (or a new turn) during an answer interrupts it, and cancels its pending
tool calls. With ``tool_call_after_turn_complete`` an answer that calls tools sends its first
chunk and a turnComplete before the toolCall. With ``non_blocking_tools`` the answer goes on
past a call (unless the call's function is declared ``BLOCKING``), and the call's response is
taken whenever it comes, by its scheduling. ``contextUpdate`` is taken in the session only with
``in_session_updates``; ``client_content`` after realtime input, in a session that seeds its
history with content (``historyConfig``), only with ``mid_session_client_content``. Resumption updates follow the profile: Gemini
issues handles only when no answer is running (``{}`` otherwise), Vertex marks every update
resumable, mid-answer too, and sends the post-turn handle after a short delay.

A dead conversation (``faults.dead_after_resume``) sends its first resumption update (or not
even that) and then nothing at all: it records what the client sends and never reacts to it.
Sends never wait for the emulated network: frames cross it in order while the model goes on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import replace
from typing import Any, Literal, Protocol

from loguru import logger

from . import wire
from .answers import answer_text, called_functions, usage
from .audio import (
    ANSWER_RATE,
    USER_RATE,
    UserAudioDecoder,
    answer_audio,
    pcm_duration,
    rms,
    user_audio_seqs,
)
from .faults import DeadResume, TriggerEvent
from .hub import Api, Hub
from .ledger import (
    ClientMessageRecord,
    ConnectionRecord,
    ContextUpdateRecord,
    ToolResultRecord,
    TurnRecord,
)
from .sessions import Session
from .snapshot import AnswerProgress, HistoryTurn, Outcome, PendingInput, SessionState


class ServingConnection(Protocol):
    """What a conversation needs of the connection that serves it
    (``served_connection.Connection``)."""

    hub: Hub[Any]
    api: Api
    record: ConnectionRecord | None
    message_index: int

    async def send(
        self,
        message: wire.ServerMessage,
        *,
        kind: str,
        turn: int | None = None,
        chunk: int | None = None,
        handle_index: int | None = None,
    ) -> asyncio.Future[bool]: ...

    async def post_go_away(
        self, time_left: float | None, close_at_deadline: bool, silence: bool
    ) -> asyncio.Future[bool]: ...

    async def close(self, code: int, reason: str | None = None) -> None: ...

    def spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]: ...

    def input_waiting(self) -> int: ...


RESULT_TURN_TEXT = "(function result)"
"""The ``user_text`` of an answer to a non-blocking call's response (no user spoke it)."""

_SCHEDULINGS = ("INTERRUPT", "WHEN_IDLE", "SILENT")


def _rate(mime_type: str) -> int:
    for param in mime_type.split(";")[1:]:
        key, _, value = param.strip().partition("=")
        if key == "rate" and value.isdigit() and int(value) > 0:
            return int(value)
    return USER_RATE


class Conversation:
    """The model side of one connection, over the session state it restored or started."""

    def __init__(
        self,
        conn: ServingConnection,
        session: Session,
        state: SessionState,
        setup: wire.Setup,
        *,
        dead: DeadResume | None = None,
    ) -> None:
        self._conn = conn
        self._session = session
        self._setup = setup
        self._config = conn.hub.config
        self.state = state
        self._dead = dead is not None
        self._first_update = (
            dead.first_update if dead is not None else self._config.update_after_setup
        )
        self._decoder = UserAudioDecoder()
        self._answer_task: asyncio.Task[None] | None = None
        self._awaited: dict[str, str] = {}
        self._tools_done = asyncio.Event()
        self._blocking = frozenset(setup.blocking_functions)
        self._idle_results: list[str] = []
        """Non-blocking calls whose response waits for the answer in progress to end."""
        self._realtime_seen = False
        self._activity = False
        self._audio_time = 0.0
        self._speech_end = 0.0
        self._vertex = self._config.profile == "vertex"

    # --- resumption updates and scripted goAways -------------------------------------------

    async def _update(self, *, resumable: bool) -> None:
        resumption = self._setup.resumption
        if resumption is None:
            return
        last = self._conn.message_index if resumption.transparent else None
        if not resumable:
            message = wire.resumption_update(None, False, last)
            await self._conn.send(message, kind="resumption_update")
            return
        assert self._conn.record is not None
        entry = self._conn.hub.sessions.issue_handle(
            self._session,
            self.state.snapshot(),
            now=self._conn.hub.now(),
            connection=self._conn.record.index,
            last_consumed_index=last,
            consumed_through=self._conn.message_index,
            input_waiting=self._conn.input_waiting(),
        )
        await self._conn.send(
            wire.resumption_update(entry.token, True, last),
            kind="resumption_update",
            handle_index=entry.record.index,
        )

    async def _fire(self, event: TriggerEvent, turn: int | None, chunk: int | None = None) -> None:
        trigger = self._conn.hub.faults.take_trigger(event, self._session.id, turn, chunk)
        if trigger is not None:
            await self._conn.post_go_away(
                trigger.time_left, trigger.close_at_deadline, trigger.silence
            )

    async def start(self) -> None:
        """Called once setupComplete was sent: the service says nothing more until it has
        something to say, unless ``update_after_setup`` (or a dead resume's first update,
        which makes a dead connection look alive)."""
        if self._first_update:
            await self._update(resumable=True)

    # --- client messages -------------------------------------------------------------------

    async def handle(self, message: wire.ClientMessage, entry: ClientMessageRecord) -> None:
        """Consume one client message (its effect on the state happens before any await)."""
        if isinstance(message, wire.RealtimeInput):
            entry.mime_types = tuple(
                e.mime_type for e in message.events if isinstance(e, wire.Audio | wire.Video)
            )
            entry.audio_bytes = sum(
                len(e.data) for e in message.events if isinstance(e, wire.Audio)
            )
        if isinstance(message, wire.RealtimeInput):
            self._realtime_seen = True
        if self._dead:
            self._record_only(message, entry)
        elif isinstance(message, wire.ClientContent):
            self._record_content(message, entry)
            if self._refuses_content():
                logger.debug("emulator: content after realtime input is refused")
                await self._conn.close(1007)
                return
            if message.text:
                self._add_pending(text=message.text)
            if message.turn_complete:
                await self._end_user_turn(force=True)
        elif isinstance(message, wire.RealtimeInput):
            for event in message.events:
                await self._realtime(event, entry)
        elif isinstance(message, wire.ToolResponse):
            await self._take_results(self._tool_response(message, entry))
        elif isinstance(message, wire.ContextUpdate):
            await self._context_update(message)

    def _refuses_content(self) -> bool:
        return (
            self._setup.history_in_client_content
            and self._realtime_seen
            and not self._config.mid_session_client_content
        )

    async def _context_update(self, message: wire.ContextUpdate) -> None:
        assert self._conn.record is not None
        instruction = message.system_instruction
        changed = instruction is not None and instruction != self.state.system_instruction
        policy = self._config.instruction_change
        refused = not self._config.in_session_updates or (changed and policy == "refuse")
        outcome: Literal["applied", "ignored", "refused"] = (
            "refused" if refused else "ignored" if changed and policy == "ignore" else "applied"
        )
        self._session.record.context_updates.append(
            ContextUpdateRecord(self._conn.record.index, instruction, message.functions, outcome)
        )
        if refused:
            logger.debug("emulator: a setup change in the session is refused")
            await self._conn.close(1007)
            return
        if message.functions is not None:
            self.state.functions = message.functions
            self._blocking = frozenset(message.blocking_functions)
        if changed and outcome == "applied":
            assert instruction is not None
            self.state.system_instruction = instruction

    def _record_content(self, message: wire.ClientContent, entry: ClientMessageRecord) -> None:
        entry.text = message.text
        entry.turns = message.turns
        entry.turn_complete = message.turn_complete
        entry.audio_seqs = tuple(s for a in message.audio for s in user_audio_seqs(a.data))
        entry.mime_types = tuple(a.mime_type for a in message.audio)

    def _record_only(self, message: wire.ClientMessage, entry: ClientMessageRecord) -> None:
        """What a dead session does with a message: the ledger sees it, the model does not."""
        if isinstance(message, wire.ClientContent):
            self._record_content(message, entry)
        elif isinstance(message, wire.RealtimeInput):
            seqs: list[int] = []
            for event in message.events:
                if isinstance(event, wire.Audio):
                    chunks = self._decoder.feed(event.data)
                    seqs += self._session.record.receive_audio(chunks, self._config.vad_threshold)
                elif isinstance(event, wire.Text):
                    entry.text = event.text
            entry.audio_seqs = tuple(seqs)
        elif isinstance(message, wire.ToolResponse):
            self._tool_response(message, entry)  # taken, never answered: the model is dead

    def _add_pending(
        self,
        *,
        text: str | None = None,
        words: tuple[str, ...] = (),
        speech: bool = False,
        silence: float | None = None,
    ) -> None:
        p = self.state.pending
        self.state.pending = replace(
            p,
            parts=p.parts + ((text,) if text else ()) + words,
            words=p.words + len(words),
            speech=p.speech or speech,
            silence=p.silence if silence is None else silence,
        )

    async def _realtime(self, event: wire.RealtimeEvent, entry: ClientMessageRecord) -> None:
        if isinstance(event, wire.Audio):
            await self._audio(event, entry)
        elif isinstance(event, wire.Text):
            entry.text = event.text
            self._add_pending(text=event.text)
            await self._end_user_turn(force=True)
        elif isinstance(event, wire.AudioStreamEnd):
            if self.state.pending.speech:
                await self._end_user_turn()
        elif isinstance(event, wire.ActivityStart):
            self._activity = True
            started = not self.state.pending.speech
            self._add_pending(speech=True)
            if started:
                await self._speech_started(self._audio_time)
        elif isinstance(event, wire.ActivityEnd):
            self._activity = False
            self._speech_end = self._audio_time
            await self._end_user_turn()

    async def _audio(self, audio: wire.Audio, entry: ClientMessageRecord) -> None:
        chunks = self._decoder.feed(audio.data)
        seqs = tuple(self._session.record.receive_audio(chunks, self._config.vad_threshold))
        words = tuple(c.word for c in chunks if c.word)
        self.state.consumed_audio.extend(seqs)
        entry.audio_seqs = seqs
        duration = pcm_duration(audio.data, _rate(audio.mime_type))
        chunk_start = self._audio_time
        self._audio_time += duration
        if not self._setup.automatic_activity_detection:
            if self._activity:
                self._add_pending(words=words)
                await self._transcribe(words)
            return
        pending = self.state.pending
        if rms(audio.data) >= self._config.vad_threshold:
            self._add_pending(words=words, speech=True, silence=0.0)
            self._speech_end = self._audio_time
            if not pending.speech:
                await self._speech_started(chunk_start)
            await self._transcribe(words)
        elif pending.speech:
            silence = pending.silence + duration
            self._add_pending(words=words, silence=silence)
            await self._transcribe(words)
            if silence >= self._config.scaled(self._config.vad_silence):
                await self._end_user_turn()

    async def _transcribe(self, words: tuple[str, ...]) -> None:
        if not self._setup.input_transcription:
            return
        before = self.state.pending.words - len(words)
        for i, word in enumerate(words):
            text = word if before + i == 0 else f" {word}"
            await self._conn.send(wire.input_transcription(text), kind="input_transcription")

    async def _speech_started(self, offset: float) -> None:
        if self._config.voice_activity:
            message = wire.voice_activity(True, offset)
            await self._conn.send(message, kind="voice_activity")
        if self._setup.interrupts:
            await self._interrupt()

    def _tool_response(
        self, message: wire.ToolResponse, entry: ClientMessageRecord
    ) -> list[tuple[str, str]]:
        """Record the responses; returns (call id, scheduling) of the running non-blocking
        calls they answer."""
        record = self._session.record
        running = self.state.running_tools
        ids = []
        taken: list[tuple[str, str]] = []
        for response in message.responses:
            call_id = response.id
            if call_id is None:
                # Without an id, a response answers the awaited call of the same name.
                call_id = next(
                    (
                        i
                        for calls in (self._awaited, running)
                        for i, n in calls.items()
                        if n == response.name
                    ),
                    None,
                )
            label = call_id or f"<no id: {response.name}>"
            ids.append(label)
            if call_id is not None and call_id in self._awaited:
                del self._awaited[call_id]
            elif call_id is not None and call_id in running:
                del running[call_id]
                scheduling = response.scheduling
                taken.append((call_id, scheduling if scheduling in _SCHEDULINGS else "WHEN_IDLE"))
            elif call_id is None or call_id not in self._session.issued_calls:
                logger.debug("emulator: stranded tool response {}", label)
                record.stranded_tool_responses.append(label)
            else:
                record.unawaited_tool_responses.append(call_id)
        entry.tool_response_ids = tuple(ids)
        if not self._awaited:
            self._tools_done.set()
        return taken

    async def _take_results(self, taken: list[tuple[str, str]]) -> None:
        """Act on the responses to non-blocking calls, each by its scheduling."""
        assert self._conn.record is not None
        for call_id, scheduling in taken:
            record = ToolResultRecord(call_id, self._conn.record.index, scheduling)
            self._session.record.tool_results_taken.append(record)
            if scheduling == "SILENT":
                continue
            if scheduling == "INTERRUPT":
                await self._interrupt()
            if self.state.answer is None:
                self._start_answer(RESULT_TURN_TEXT, answers_result=call_id)
            else:
                self._idle_results.append(call_id)

    def _answer_idle_result(self) -> None:
        """The answer in progress is over: answer the first response that waited for it."""
        if self._idle_results and self.state.answer is None:
            call_id = self._idle_results.pop(0)
            self._start_answer(RESULT_TURN_TEXT, answers_result=call_id)

    # --- turns and answers -----------------------------------------------------------------

    async def _end_user_turn(self, *, force: bool = False) -> None:
        pending = self.state.pending
        if pending.empty and not force:
            return
        self.state.pending = PendingInput()
        if pending.speech and self._config.voice_activity:
            message = wire.voice_activity(False, self._speech_end)
            await self._conn.send(message, kind="voice_activity")
        await self._interrupt()
        self._start_answer(pending.text)

    def _start_answer(self, user_text: str, *, answers_result: str | None = None) -> None:
        session = self._session
        turn = session.new_turn()
        names = called_functions(user_text, self.state.functions) if answers_result is None else []
        calls = [(session.new_call_id(), name) for name in names]
        planned = self._config.answer_chunks
        assert self._conn.record is not None
        session.record.turns[turn] = TurnRecord(
            turn,
            self._conn.record.index,
            user_text,
            planned,
            tool_calls=[i for i, _ in calls],
            answers_result=answers_result,
        )
        self.state.answer = AnswerProgress(
            turn, user_text, planned, tool_calls=tuple(i for i, _ in calls)
        )
        self._answer_task = self._conn.spawn(self._answer(turn, calls))

    def _finish_answer(self, outcome: Outcome) -> AnswerProgress | None:
        """Move the answer in progress to the history, ended with ``outcome``."""
        answer = self.state.answer
        if answer is None:
            return None
        self.state.answer = None
        self._answer_task = None
        self.state.history.append(
            HistoryTurn(
                answer.turn,
                answer.user_text,
                answer.planned,
                answer.produced,
                outcome,
                answer.tool_calls,
            )
        )
        self._session.record.turns[answer.turn].outcome = outcome
        return answer

    def _usage(self, answer: AnswerProgress) -> dict[str, int]:
        return usage(answer.user_text, answer.produced, vertex_api=self._conn.api == "vertex")

    async def _interrupt(self) -> None:
        """Stop the answer in progress (if any) as interrupted."""
        task = self._answer_task
        answer = self._finish_answer("interrupted")
        if answer is None:
            return
        if task is not None:
            task.cancel()
            await asyncio.wait({task})
        pending_calls = list(self._awaited)
        self._awaited.clear()
        turn = answer.turn
        if pending_calls:
            message = wire.tool_call_cancellation(pending_calls)
            await self._conn.send(message, kind="tool_call_cancellation", turn=turn)
        await self._conn.send(wire.interrupted(), kind="interrupted", turn=turn)
        message = wire.turn_complete(self._usage(answer))
        await self._conn.send(message, kind="turn_complete", turn=turn)
        await self._after_turn(turn)

    async def _answer(self, turn: int, calls: list[tuple[str, str]]) -> None:
        conn = self._conn
        record = self._session.record.turns[turn]
        await self._update(resumable=self._vertex)
        first = 0
        if calls:
            if self._config.tool_call_after_turn_complete:
                # The call that completes the answer comes after a turn boundary.
                await self._chunk(turn, 0)
                first = 1
                assert self.state.answer is not None
                message = wire.turn_complete(self._usage(self.state.answer))
                await conn.send(message, kind="turn_complete", turn=turn)
            await self._call_tools(turn, calls)
        for k in range(first, record.planned):
            await self._chunk(turn, k)
        await conn.send(wire.generation_complete(), kind="generation_complete", turn=turn)
        answer = self._finish_answer("complete")
        assert answer is not None
        await conn.send(wire.turn_complete(self._usage(answer)), kind="turn_complete", turn=turn)
        await self._after_turn(turn)
        self._answer_idle_result()

    async def _call_tools(self, turn: int, calls: list[tuple[str, str]]) -> None:
        """Send the toolCall and wait (bounded) until every call that holds the answer has its
        response; non-blocking ones run on without holding it."""
        config, conn = self._config, self._conn
        holds = [(i, n) for i, n in calls if self._holds(n)]
        self._awaited = dict(holds)
        self.state.running_tools.update((i, n) for i, n in calls if not self._holds(n))
        self._tools_done.clear()
        await conn.send(wire.tool_call(calls), kind="tool_call", turn=turn)
        await self._fire("tool_call", turn)
        await self._update(resumable=self._vertex)
        if not holds:
            return
        try:
            await asyncio.wait_for(self._tools_done.wait(), config.scaled(config.hang_limit))
        except TimeoutError:
            logger.debug("emulator: no tool response in time; answering without it")
            self._awaited.clear()
        if self.state.answer is not None:
            self.state.answer = replace(self.state.answer, awaiting_tools=False)

    def _holds(self, function: str) -> bool:
        """Whether a call of ``function`` holds its answer until the response comes."""
        return not self._config.non_blocking_tools or function in self._blocking

    async def _chunk(self, turn: int, k: int) -> None:
        """Produce chunk ``k`` of answer ``turn`` after one pacing interval."""
        config, conn = self._config, self._conn
        record = self._session.record.turns[turn]
        await asyncio.sleep(config.scaled(config.chunk_interval))
        if self.state.answer is not None:
            self.state.answer = replace(self.state.answer, produced=k + 1)
        record.produced = k + 1
        text = answer_text(turn, k)
        if self._setup.text_modality:
            delivered = await conn.send(wire.text_part(text), kind="text", turn=turn, chunk=k)
        else:
            data = answer_audio(turn, k, ms=config.chunk_ms)
            message = wire.audio_part(data, ANSWER_RATE)
            delivered = await conn.send(message, kind="audio", turn=turn, chunk=k)
            if self._setup.output_transcription:
                message = wire.output_transcription(text)
                await conn.send(message, kind="output_transcription", turn=turn, chunk=k)
        delivered.add_done_callback(record.count_delivery)
        await self._fire("chunk", turn, k)
        if self._vertex and k + 1 == record.planned // 2:
            await self._update(resumable=True)

    async def _after_turn(self, turn: int) -> None:
        """The handle that follows a turn (Vertex: after a delay), then the idle moment."""
        if self._vertex and self._setup.resumption is not None:
            low, high = self._config.handle_delay
            delay = self._conn.hub.rng.uniform(low, high)
            self._conn.spawn(self._delayed_handle(turn, self._config.scaled(delay)))
            return
        await self._update(resumable=True)
        if self.state.answer is None:
            await self._fire("idle", turn)

    async def _delayed_handle(self, turn: int, delay: float) -> None:
        await asyncio.sleep(delay)
        await self._update(resumable=True)
        if self.state.answer is None:
            await self._fire("idle", turn)

    def close(self) -> None:
        """The connection ended: an answer still running is cut."""
        answer = self.state.answer
        if answer is not None:
            record = self._session.record.turns[answer.turn]
            if record.outcome == "running":
                record.outcome = "cut"
