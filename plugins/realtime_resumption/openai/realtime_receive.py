"""``RealtimeReceiver``: every server event of an OpenAI Realtime call, to the session's state
and to the framework's callbacks.

A connection's events reach the session they belong to: each feeds that session's
``ConversationState`` (a session being dialled, or set up by a move, is followed too); only the
serving session's reach the framework (audio, transcripts, text, function calls, the server
VAD, usage, errors), through the generation tracker where they open or end an answer
(``CallState.apply``), and then tell the moves whether the call is at a turn boundary.
"""

from __future__ import annotations

from typing import Final, Literal

from loguru import logger

from realtime_resumption.openai.call_state import CallState, OpenSession, call_arguments
from realtime_resumption.openai.realtime_connection import RealtimeConnection
from realtime_resumption.openai.realtime_dialling import RealtimeDialler
from realtime_resumption.openai.realtime_moves import RealtimeMoves
from realtime_resumption.openai.realtime_server_events import (
    AudioDelta,
    FunctionArgumentsDone,
    InputTranscriptCompleted,
    ItemAnnounced,
    Malformed,
    OutputTextDelta,
    ResponseCreated,
    ResponseDone,
    ServerError,
    ServerEvent,
    SessionEvent,
    SpeechStarted,
    SpeechStopped,
)
from realtime_resumption.transport import ToolCall, TransportError, TransportErrorEvent

FATAL_ERROR_CODES: Final = frozenset(
    {
        "invalid_api_key",
        "insufficient_quota",
        "credit_balance_exhausted",
        "account_deactivated",
        "billing_hard_limit_reached",
    }
)
"""Server ``error`` codes (or types) after which no session of this client can serve the
call: the key is refused, or the account can pay for nothing more. A new session would be
refused the same way, so the call ends (``on_error`` not recoverable, then ``on_close``).
The list is the one LiveKit's OpenAI plugin ends its session on
(``livekit/agents/llm/_realtime/openai.py``, ``_FATAL_ERROR_CODES``), matched on the code or
the type as it does: the service moved codes between the two fields before. Every other
``error`` is recoverable: one client event refused (the session goes on), or the older
``session_expired`` notice of the cap (the close that follows is rebuilt from)."""


class RealtimeReceiver:
    """Routes each connection's events (see the module documentation)."""

    def __init__(self, state: CallState, dialler: RealtimeDialler, moves: RealtimeMoves) -> None:
        self._s = state
        self._dialler = dialler
        self._moves = moves

    def on_event(self, conn: RealtimeConnection, event: ServerEvent) -> None:
        """What connection ``conn`` read: to the session it belongs to."""
        s = self._s
        session = s.session
        moves = self._moves
        for held in (session, self._dialler.pending, moves.opened, moves.candidate):
            if held is not None and held.conn is conn:
                held.state.receive(event)
                if isinstance(event, SessionEvent) and event.created:
                    held.created_at = s.now()
                if held is session:
                    self._dispatch(held, event)
                    moves.timing.update_boundary()
                return

    def _dispatch(self, session: OpenSession, event: ServerEvent) -> None:
        s = self._s
        tracker = s.tracker
        now = s.now()
        if isinstance(event, AudioDelta):
            s.audio_item = event.item_id
            s.apply(tracker.model_output(now, "audio"))
            if not tracker.suppressing:
                s.emit("on_audio_output", event.audio)
        elif isinstance(event, OutputTextDelta):
            kind: Literal["transcript", "text"] = (
                "transcript" if event.modality == "audio" else "text"
            )
            s.apply(tracker.model_output(now, kind))
            if not tracker.suppressing:
                name = "on_output_transcription" if kind == "transcript" else "on_text_output"
                s.emit(name, event.delta)
        elif isinstance(event, FunctionArgumentsDone):
            self._function_call(now, event)
        elif isinstance(event, ResponseCreated):
            s.response_requested = False
        elif isinstance(event, ResponseDone):
            self._response_done(now, event)
        elif isinstance(event, SpeechStarted):
            s.apply(tracker.user_turn(now))
            s.emit("on_speech_started")
        elif isinstance(event, SpeechStopped):
            s.emit("on_user_speech_stopped")
        elif isinstance(event, InputTranscriptCompleted):
            tracker.user_spoke()
            s.emit("on_input_transcription", event.transcript)
            if event.usage is not None:
                s.emit("on_realtime_llm_usage", event.usage)
        elif isinstance(event, ItemAnnounced):
            s.unconfirmed.pop(event.item.id, None)
        elif isinstance(event, ServerError):
            what = event.code or event.error_type
            error = TransportError(f"the service reported an error: {what}")
            if event.code in FATAL_ERROR_CODES or event.error_type in FATAL_ERROR_CODES:
                self._moves.end_here(error, 1000, f"the service refused the client ({what})")
            else:
                s.emit("on_error", TransportErrorEvent(error, recoverable=True))
        elif isinstance(event, Malformed):
            logger.warning("{}: a malformed server event ({})", s.callbacks, event.reason)

    def _function_call(self, now: float, event: FunctionArgumentsDone) -> None:
        s = self._s
        if s.tracker.suppressing:
            return  # a cancelled answer's call: never to be answered
        args = call_arguments(event.arguments)
        s.calls[event.call_id] = event.name
        s.apply(s.tracker.tool_calls(now, [event.call_id]))
        s.emit("on_tool_call", [ToolCall(event.call_id, event.name, args)])

    def _response_done(self, now: float, event: ResponseDone) -> None:
        s = self._s
        if event.usage is not None:
            s.emit("on_realtime_llm_usage", event.usage)
        ours = s.cancelled == event.response_id
        if ours:
            s.cancelled = None
        if event.status == "cancelled" and not ours:
            # The server's VAD heard the user over the answer (``turn_detected``).
            s.apply(s.tracker.interrupted(now))
        else:
            if event.status == "completed":
                self._moves.served()
            s.apply(s.tracker.generation_complete(now))
            s.apply(
                s.tracker.turn_complete(
                    now, tools_pending=bool(s.calls), tool_call_may_follow=False
                )
            )
        self._moves.answer_finished()
