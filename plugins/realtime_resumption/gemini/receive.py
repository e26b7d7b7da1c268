"""What the server says, applied: each event updates the session's state and reaches the
framework through the transport's callbacks.

:class:`Receiver` belongs to one transport and sees only the current connection's messages.
Besides the callbacks, it feeds the session's bookkeeping: the generation lifecycle, the tool
calls, the conversation history (for a rebuild), the input buffer's resumption points, and the
rotation (turn boundaries, handles, goAway, the resume watchdog).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from google.genai import types
from loguru import logger

from realtime_resumption.gemini import server_events
from realtime_resumption.generation import OutputKind
from realtime_resumption.transport import (
    RealtimeLLMUsage,
    ToolCall,
    TransportError,
    TransportErrorEvent,
    TransportUsageMetadata,
)

if TYPE_CHECKING:
    from realtime_resumption.gemini.connection import LiveConnection
    from realtime_resumption.gemini.input_path import InputPath
    from realtime_resumption.gemini.state import TransportState
    from realtime_resumption.gemini.watchdog import UserTurnRetainer
    from realtime_resumption.generation import GenerationTracker
    from realtime_resumption.handles import HandleRef
    from realtime_resumption.history import ConversationHistory
    from realtime_resumption.tool_calls import ToolCallTracker


class TurnSignals(Protocol):
    """What the receiver tells the session's mover (``gemini.rotation``): turn boundaries,
    handles and goAway. Each call only records the fact or starts a move in tasks of the
    mover's own; none calls back into the receiver."""

    def turn_started(self) -> None: ...
    def turn_ended(self) -> None: ...
    def served(self) -> None: ...
    def user_turn(self) -> None: ...
    def answered(self) -> None: ...
    def go_away(self, seconds: float | None) -> None: ...
    def resumption_update(self, handle: HandleRef | None, resumable: bool) -> None: ...


class Receiver:
    """Applies the current connection's server messages; see the module documentation."""

    def __init__(
        self,
        session: TransportState,
        rotation: TurnSignals,
        *,
        tracker: GenerationTracker,
        input_path: InputPath,
        tools: ToolCallTracker,
        history: ConversationHistory,
        retained_turn: UserTurnRetainer,
    ) -> None:
        self._s = session
        self._rotation = rotation
        self._tracker = tracker
        self._input = input_path
        self._tools = tools
        self._history = history
        self._retained_turn = retained_turn
        self._translator = server_events.Translator()
        self._interrupted = False
        """The server turn in progress was interrupted: user input began a new turn."""
        self._odd_byte = b""
        """The last byte of a model audio chunk of odd length: the first half of a PCM16
        sample whose second half starts the next chunk."""
        self._audio_from: LiveConnection | None = None

    def message(self, conn: LiveConnection, message: types.LiveServerMessage) -> None:
        """A message from ``conn``, the current connection."""
        s = self._s
        try:
            now = s.now()
            for event in self._translator.events(message):
                self._dispatch(event, now)
                if conn is not s.current:
                    break
            s.schedule_tick()
        except Exception:
            logger.exception("{}: failed to handle a server message", s.callbacks)

    def _dispatch(self, event: server_events.Event, now: float) -> None:
        s = self._s
        tracker = self._tracker
        if isinstance(event, server_events.ModelAudio):
            self._model_output(now, "audio")
            pcm = self._whole_samples(event.data)
            if pcm and not tracker.suppressing and not s.quiesced:
                s.call(s.callbacks.on_audio_output, pcm)
        elif isinstance(event, server_events.Usage):
            self._usage(event)
        elif isinstance(event, server_events.OutputTranscript):
            self._model_output(now, "transcript")
            if not tracker.suppressing:
                self._history.model_transcript(event.text)
                s.call(s.callbacks.on_output_transcription, event.text)
        elif isinstance(event, server_events.InputTranscript):
            tracker.user_spoke()
            self._history.user_transcript(event.text)
            self._rotation.turn_started()
            self._rotation.user_turn()
            s.call(s.callbacks.on_input_transcription, event.text)
        elif isinstance(event, server_events.ModelText):
            self._model_output(now, "text")
            if not tracker.suppressing:
                self._history.model_text(event.text)
                s.call(s.callbacks.on_text_output, event.text)
        elif isinstance(event, server_events.ModelThought):
            self._model_output(now, "thought")
            if not tracker.suppressing:
                s.call(s.callbacks.on_reasoning_summary, event.text)
        elif isinstance(event, server_events.TurnComplete):
            self._turn_complete(now)
        elif isinstance(event, server_events.GenerationComplete):
            s.apply(tracker.generation_complete(now))
        elif isinstance(event, server_events.Interrupted):
            self._interrupted = True
            self._odd_byte = b""
            self._history.interrupted()
            self._rotation.answered()
            s.apply(tracker.interrupted(now))
        elif isinstance(event, server_events.ToolCalls):
            self._tool_calls(event, now)
        elif isinstance(event, server_events.ToolCallsCancelled):
            self._tool_calls_cancelled(event, now)
        elif isinstance(event, server_events.ResumptionUpdate):
            self._resumption_update(event, now)
        elif isinstance(event, server_events.GoAway):
            logger.info("{}: goAway, time left {}", s.callbacks, event.time_left)
            s.call(s.callbacks.on_go_away, event.time_left, event.seconds)
            self._rotation.go_away(event.seconds)
        elif isinstance(event, server_events.Grounding):
            if not tracker.suppressing:
                s.call(s.callbacks.on_grounding_metadata, event.metadata)
        elif isinstance(event, server_events.SpeechStarted):
            s.apply(tracker.user_turn(now))
            self._rotation.turn_started()
            self._rotation.user_turn()
            s.call(s.callbacks.on_speech_started)
        elif isinstance(event, server_events.SpeechStopped):
            self._rotation.user_turn()
            s.call(s.callbacks.on_user_speech_stopped)

    def _whole_samples(self, data: bytes) -> bytes:
        """``data`` as whole PCM16 samples. The service may split a sample between chunks:
        an odd last byte is carried to the next chunk of the same turn and connection, so
        the framework never gets half a sample (which would shift every later sample by a
        byte, turning the answer into noise). A byte left over when the turn ends has no
        other half and is dropped."""
        conn = self._s.current
        if conn is not self._audio_from:
            self._audio_from, self._odd_byte = conn, b""
        if self._odd_byte:
            data = self._odd_byte + data
            self._odd_byte = b""
        if len(data) % 2:
            data, self._odd_byte = data[:-1], data[-1:]
        return data

    def _model_output(self, now: float, kind: OutputKind) -> None:
        s = self._s
        s.apply(self._tracker.model_output(now, kind))
        if kind in ("audio", "text") and s.current is not None and s.answers_prove_input:
            self._input.model_answered(s.current)
        # An output transcription trailing a finished turn is no sign of a new one.
        if kind != "transcript" or self._tracker.active_server_turn_id is not None:
            self._rotation.turn_started()
        self._rotation.answered()

    def _turn_complete(self, now: float) -> None:
        s = self._s
        self._odd_byte = b""
        busy = self._tools.busy
        self._history.turn_complete()
        self._input.turn_completed()
        self._retained_turn.clear()
        self._rotation.answered()
        s.apply(
            self._tracker.turn_complete(
                now, tools_pending=busy, tool_call_may_follow=s.tool_calls_possible
            )
        )
        interrupted, self._interrupted = self._interrupted, False
        # An interrupted turn ends because the user began another: that one is in progress,
        # and the handle that follows is no place to move.
        if not busy and not interrupted:
            self._rotation.turn_ended()
            self._rotation.served()

    def _tool_calls(self, event: server_events.ToolCalls, now: float) -> None:
        s = self._s
        if self._tracker.suppressing:
            logger.info(
                "{}: {} tool call(s) of a cancelled answer dropped", s.callbacks, len(event.calls)
            )
            return
        calls = event.calls
        if event.without_id and not s.results_without_id:
            calls = self._unanswerable(event)
            if not calls:
                return
        conn = s.current
        assert conn is not None
        self._tools.calls_issued(calls, conn.dial_gen, now)
        for call in calls:
            self._history.tool_call(call)
        self._rotation.turn_started()
        self._rotation.answered()
        s.apply(self._tracker.tool_calls(now, [call.id for call in calls]))
        s.without_id.update(event.without_id)
        s.call(s.callbacks.on_tool_call, calls)

    def _unanswerable(self, event: server_events.ToolCalls) -> tuple[ToolCall, ...]:
        """Calls without an id on the Gemini API, which refuses a result without one: they
        cannot be answered, so they are not run (running one would act for nothing, and
        waiting for its result would hold the answer and every planned move). They are
        reported through ``on_error`` (recoverable); the rest of the calls go on."""
        s = self._s
        names = [call.name for call in event.calls if call.id in event.without_id]
        logger.warning("{}: tool call(s) without an id not run: {}", s.callbacks, names)
        error = TransportError(
            f"Gemini sent {len(names)} tool call(s) without an id ({', '.join(names)}): the "
            "Gemini API takes no result without one, so they were not run"
        )
        s.call(s.callbacks.on_error, TransportErrorEvent(error, recoverable=True))
        return tuple(call for call in event.calls if call.id not in event.without_id)

    def _tool_calls_cancelled(self, event: server_events.ToolCallsCancelled, now: float) -> None:
        s = self._s
        conn = s.current
        assert conn is not None
        for call_id in self._tools.calls_cancelled(event.ids, conn.dial_gen):
            self._input.withdraw_result(call_id)
        s.apply(self._tracker.tool_calls_cancelled(now, tools_pending=self._tools.busy))
        s.call(s.callbacks.on_tool_call_cancel, event.ids)

    def _resumption_update(self, event: server_events.ResumptionUpdate, now: float) -> None:
        s = self._s
        conn = s.current
        assert conn is not None
        text, resumable = event.handle, event.resumable
        handle = None
        if text is not None:
            handle = s.handle_issued(
                text,
                conn,
                now,
                resumable=resumable,
                last_consumed_index=event.last_consumed_client_message_index,
            )
        s.call(
            s.callbacks.on_resumption_update,
            text,
            resumable,
            event.last_consumed_client_message_index,
        )
        self._rotation.resumption_update(handle, resumable)

    def _usage(self, event: server_events.Usage) -> None:
        s = self._s
        s.call(
            s.callbacks.on_usage_metadata,
            TransportUsageMetadata(event.prompt_tokens, event.total_tokens, event.raw),
        )
        tracker = self._tracker
        s.call(
            s.callbacks.on_realtime_llm_usage,
            RealtimeLLMUsage(
                provider="gemini_live",
                kind="response",
                phase="final" if event.final else "update",
                unit="tokens",
                input_tokens=event.prompt_tokens,
                output_tokens=event.response_tokens,
                total_tokens=event.total_tokens,
                modality_breakdown=event.breakdown,
                server_turn_id=tracker.active_server_turn_id,
                server_turn_winding_down=event.final or tracker.winding_down,
                provider_raw=event.raw,
            ),
        )
