"""What the server says, applied: each event updates the session's state and reaches the
framework through the transport's callbacks.

:class:`Receiver` belongs to one transport and sees only the current connection's messages.
Besides the callbacks, it feeds the session's bookkeeping: the generation lifecycle, the tool
calls, the conversation history (for a rebuild), the input buffer's resumption points, and the
rotation (turn boundaries, handles, goAway, the resume watchdog).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from google.genai import types
from loguru import logger

from realtime_resumption.gemini import wire
from realtime_resumption.generation import OutputKind
from realtime_resumption.transport import RealtimeLLMUsage, TransportUsageMetadata

if TYPE_CHECKING:
    from realtime_resumption.gemini.connection import _Connection
    from realtime_resumption.gemini.transport import GeminiLiveTransport


class Receiver:
    """Applies the current connection's server messages; see the module documentation."""

    def __init__(self, transport: GeminiLiveTransport) -> None:
        self._t = transport
        self._translator = wire.Translator()
        self._interrupted = False
        """The server turn in progress was interrupted: user input began a new turn."""

    def message(self, conn: _Connection, message: types.LiveServerMessage) -> None:
        """A message from ``conn``, the current connection."""
        t = self._t
        try:
            now = t._now()
            for event in self._translator.events(message):
                self._dispatch(event, now)
                if conn is not t._current:
                    break
            t._schedule_tick()
        except Exception:
            logger.exception("{}: failed to handle a server message", t)

    def _dispatch(self, event: wire.Event, now: float) -> None:
        t = self._t
        tracker = t._tracker
        if isinstance(event, wire.ModelAudio):
            self._model_output(now, "audio")
            if not tracker.suppressing and not t._quiesced:
                t._call(t.on_audio_output, event.data)
        elif isinstance(event, wire.Usage):
            self._usage(event)
        elif isinstance(event, wire.OutputTranscript):
            self._model_output(now, "transcript")
            if not tracker.suppressing:
                t._history.model_transcript(event.text)
                t._call(t.on_output_transcription, event.text)
        elif isinstance(event, wire.InputTranscript):
            t._history.user_transcript(event.text)
            t._rotation.turn_started()
            t._rotation.user_turn()
            t._call(t.on_input_transcription, event.text)
        elif isinstance(event, wire.ModelText):
            self._model_output(now, "text")
            if not tracker.suppressing:
                t._history.model_text(event.text)
                t._call(t.on_text_output, event.text)
        elif isinstance(event, wire.ModelThought):
            self._model_output(now, "thought")
            if not tracker.suppressing:
                t._call(t.on_reasoning_summary, event.text)
        elif isinstance(event, wire.TurnComplete):
            self._turn_complete(now)
        elif isinstance(event, wire.GenerationComplete):
            t._apply(tracker.generation_complete(now))
        elif isinstance(event, wire.Interrupted):
            self._interrupted = True
            t._history.interrupted()
            t._rotation.answered()
            t._apply(tracker.interrupted(now))
        elif isinstance(event, wire.ToolCalls):
            self._tool_calls(event, now)
        elif isinstance(event, wire.ToolCallsCancelled):
            self._tool_calls_cancelled(event, now)
        elif isinstance(event, wire.ResumptionUpdate):
            self._resumption_update(event, now)
        elif isinstance(event, wire.GoAway):
            logger.info("{}: goAway, time left {}", t, event.time_left)
            t._call(t.on_go_away, event.time_left, event.seconds)
            t._rotation.go_away(event.seconds)
        elif isinstance(event, wire.Grounding):
            if not tracker.suppressing:
                t._call(t.on_grounding_metadata, event.metadata)
        elif isinstance(event, wire.SpeechStarted):
            t._rotation.turn_started()
            t._rotation.user_turn()
            t._call(t.on_speech_started)
        elif isinstance(event, wire.SpeechStopped):
            t._rotation.user_turn()
            t._call(t.on_user_speech_stopped)

    def _model_output(self, now: float, kind: OutputKind) -> None:
        t = self._t
        t._apply(t._tracker.model_output(now, kind))
        # An output transcription trailing a finished turn is no sign of a new one.
        if kind != "transcript" or t._tracker.active_server_turn_id is not None:
            t._rotation.turn_started()
        t._rotation.answered()

    def _turn_complete(self, now: float) -> None:
        t = self._t
        busy = t._tools.busy
        t._history.turn_complete()
        t._input.outbox.turn_completed()
        t._user_turn.clear()
        t._rotation.answered()
        t._apply(t._tracker.turn_complete(now, tools_pending=busy))
        interrupted, self._interrupted = self._interrupted, False
        # An interrupted turn ends because the user began another: that one is in progress,
        # and the handle that follows is no place to move.
        if not busy and not interrupted:
            t._rotation.turn_ended()

    def _tool_calls(self, event: wire.ToolCalls, now: float) -> None:
        t = self._t
        if t._tracker.suppressing:
            logger.info("{}: {} tool call(s) of a cancelled answer dropped", t, len(event.calls))
            return
        conn = t._current
        assert conn is not None
        t._tools.calls_issued(event.calls, conn.dial_gen, now)
        for call in event.calls:
            t._history.tool_call(call)
        t._rotation.turn_started()
        t._rotation.answered()
        t._apply(t._tracker.tool_calls(now, [call.id for call in event.calls]))
        t._without_id.update(event.without_id)
        t._call(t.on_tool_call, event.calls)

    def _tool_calls_cancelled(self, event: wire.ToolCallsCancelled, now: float) -> None:
        t = self._t
        conn = t._current
        assert conn is not None
        for call_id in t._tools.calls_cancelled(event.ids, conn.dial_gen):
            t._input.withdraw_result(call_id)
        t._apply(t._tracker.tool_calls_cancelled(now, tools_pending=t._tools.busy))
        t._call(t.on_tool_call_cancel, event.ids)

    def _resumption_update(self, event: wire.ResumptionUpdate, now: float) -> None:
        t = self._t
        conn = t._current
        assert conn is not None
        handle, resumable = event.handle, event.resumable
        if handle is not None:
            t._secrets.add(handle)
            if resumable:
                t._handle = handle
            t._input.outbox.record_handle(
                handle,
                conn.dial_gen,
                now,
                resumable=resumable,
                last_consumed_index=event.last_consumed_client_message_index,
            )
            t._tools.handle_recorded(handle, conn.dial_gen, resumable=resumable)
        t._call(
            t.on_resumption_update,
            handle,
            resumable,
            event.last_consumed_client_message_index,
        )
        t._rotation.resumption_update(handle, resumable)

    def _usage(self, event: wire.Usage) -> None:
        t = self._t
        t._call(
            t.on_usage_metadata,
            TransportUsageMetadata(event.prompt_tokens, event.total_tokens, event.raw),
        )
        tracker = t._tracker
        t._call(
            t.on_realtime_llm_usage,
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
