"""``RealtimeSends``: every send of the app on an OpenAI Realtime call, checked, then posted to
the session that serves the call, or held while a move replaces it.

Each send is checked once (type, size: a clear error, nothing sent) and made the client event
that carries it. The move machine's gate says what the serving session takes during a move
(everything, audio only, or nothing); what it does not take is held, in order, within
``max_queued_events`` (``SendQueueFullError`` past it), and goes to the next session at the
switch (``take_held``). Posting follows what the session is given: the audio appended (and,
with a store, the chunks a record may still need), a commit or a clear, an answer asked for,
the items created until their echo confirms them.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Literal

from loguru import logger

from realtime_resumption.move_machine import InputGate
from realtime_resumption.openai.call_state import CallState, OpenSession, new_item_id
from realtime_resumption.openai.realtime_options import MAX_EVENT_BYTES
from realtime_resumption.openai.realtime_server_events import ResponseDone
from realtime_resumption.transport import (
    CancelResponseOptions,
    ConnectError,
    ContentTurn,
    GenerationOverrides,
    MessageTooLargeError,
    NotConnectedError,
    SendQueueFullError,
    ToolCallOrphanedError,
    ToolResult,
    UnknownToolCallError,
)

WAIT_FOR_DONE: Final = 2.0
"""Seconds ``cancel_response(wait_for_done=True)`` waits for the cancelled ``response.done``."""
RECORD_BLOCK_MS: Final = 1000
"""While the user is quiet, the input a record keeps starts on a block of this many ms of
the session's input (up to a block more quiet than the session would be given): it moves
once a block, so the beats between append the audio sent since instead of writing the record
whole."""
REPLAY_APPEND_MS: Final = 20
"""Milliseconds of input per ``input_audio_buffer.append`` when a new session is given the
input the old one held uncommitted: the frame size frameworks stream (Pipecat sends 20 ms
frames), so the replayed audio reaches the service as the live audio did."""

Event = dict[str, Any]
"""A client event, as the SDK posts it."""


class RealtimeSends:
    """The app's sends (see the module documentation). ``keeps_sent``: a store keeps the call,
    so the audio sent is kept for its record; ``serving`` says whether a session serves the
    call or a move brings the next one up; ``boundary_changed`` hears of each send that may
    take the call off a turn boundary."""

    def __init__(
        self,
        state: CallState,
        *,
        keeps_sent: bool,
        serving: Callable[[], bool],
        boundary_changed: Callable[[], None],
    ) -> None:
        self._s = state
        self._keeps_sent = keeps_sent
        self._serving = serving
        self._boundary_changed = boundary_changed
        self._held: deque[tuple[Event, bytes | None]] = deque()
        self._gate = InputGate.OPEN

    # --- the move's gate and the input it holds ---------------------------------------------

    @property
    def held(self) -> Sequence[tuple[Event, bytes | None]]:
        """Client events (with the audio of an append) waiting for a session to take them."""
        return tuple(self._held)

    def set_gate(self, gate: InputGate) -> None:
        """What the serving session takes from now on (the move machine's ``Gate``)."""
        self._gate = gate

    def take_held(self) -> list[tuple[Event, bytes | None]]:
        """The input held during a move, in order, for the next session; none is held after."""
        held, self._held = list(self._held), deque()
        return held

    def clear_held(self) -> None:
        """Drop the input held (the call is over)."""
        self._held.clear()

    # --- the app's sends --------------------------------------------------------------------

    def send_audio(self, audio: bytes) -> None:
        """Append PCM16 user audio to the input buffer."""
        if not isinstance(audio, bytes | bytearray | memoryview):
            raise TypeError(f"audio must be bytes, not {type(audio).__name__}")
        data = bytes(audio)
        if len(data) % 2:
            raise ValueError("PCM16 audio must have an even number of bytes")
        if not data:
            return
        if len(data) * 4 // 3 > MAX_EVENT_BYTES:
            raise MessageTooLargeError(
                f"an audio chunk of {len(data)} bytes exceeds the service's event limit"
            )
        encoded = base64.b64encode(data).decode()
        self._send({"type": "input_audio_buffer.append", "audio": encoded}, audio=data)

    def commit_audio(self) -> None:
        """End the user's turn now (``input_audio_buffer.commit``), unless the server's turn
        detection commits by itself."""
        if self._s.config.turn_detection is not None:
            return
        self._send({"type": "input_audio_buffer.commit"})

    def clear_audio(self) -> None:
        """Drop input audio the service holds uncommitted (``input_audio_buffer.clear``)."""
        self._send({"type": "input_audio_buffer.clear"})

    def send_content(self, turns: Sequence[ContentTurn], turn_complete: bool) -> None:
        """Add text turns to the conversation; with ``turn_complete``, ask for an answer."""
        if isinstance(turns, str | bytes) or not isinstance(turns, Sequence):
            raise TypeError("turns must be a sequence of ContentTurn")
        for turn in turns:
            if not isinstance(turn, ContentTurn) or not isinstance(turn.text, str):
                raise TypeError("turns must be ContentTurn values with text")
            if turn.role not in ("user", "model"):
                raise ValueError(f"a turn's role is 'user' or 'model', not {turn.role!r}")
        self.require_session()
        for turn in turns:
            if turn.role == "user":
                content = [{"type": "input_text", "text": turn.text}]
                role = "user"
            else:
                part = "output_text" if self._s.flavour == "ga" else "text"
                content = [{"type": part, "text": turn.text}]
                role = "assistant"
            self._create_item({"type": "message", "role": role, "content": content})
        if turns and turns[-1].role == "user":
            self._s.apply(self._s.tracker.user_turn(self._s.now()))
        if turn_complete:
            self._request_response()

    def send_file(self, data: bytes, mime_type: str) -> None:
        """Send an image (``input_image``) as a user item; other files are refused."""
        if not isinstance(data, bytes | bytearray):
            raise TypeError(f"data must be bytes, not {type(data).__name__}")
        if not isinstance(mime_type, str) or not mime_type.startswith("image/"):
            raise ValueError(f"OpenAI Realtime takes images only, not {mime_type!r}")
        url = f"data:{mime_type};base64,{base64.b64encode(bytes(data)).decode()}"
        if len(url) > MAX_EVENT_BYTES:
            raise MessageTooLargeError(f"an image of {len(data)} bytes exceeds the event limit")
        self.require_session()
        content = [{"type": "input_image", "image_url": url}]
        self._create_item({"type": "message", "role": "user", "content": content})

    def send_tool_result(self, result: ToolResult) -> None:
        """Give a function call its output and, unless the result is ``silent``, ask for the
        answer that uses it."""
        if not isinstance(result, ToolResult):
            raise TypeError(f"result must be a ToolResult, not {type(result).__name__}")
        calls = self._s.calls
        if result.id in self._s.orphaned:
            raise ToolCallOrphanedError(result.id)
        if result.id not in calls:
            raise UnknownToolCallError(f"no open function call has the id {result.id!r}")
        try:
            output = json.dumps(result.response, default=str)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"the result of {result.name!r} is not JSON: {exc}") from None
        self.require_session()
        del calls[result.id]
        item = {"type": "function_call_output", "call_id": result.id, "output": output}
        self._create_item(item)
        if result.scheduling != "silent":
            self._request_response()

    def trigger_generation(
        self, instructions: str | None, overrides: GenerationOverrides | None
    ) -> None:
        """Ask for an answer (``response.create``); ``instructions`` for this answer only."""
        if instructions is not None and not isinstance(instructions, str):
            raise TypeError("instructions must be a string")
        if overrides is not None and overrides.reasoning_effort is not None:
            raise ValueError("OpenAI Realtime has no reasoning_effort override")
        self.require_session()
        self._request_response(instructions)

    async def cancel_response(self, options: CancelResponseOptions | None) -> None:
        """Cancel the answer in flight and, with ``truncate``, cut its audio item where
        playback stopped. Never raises."""
        s = self._s
        try:
            opts = options or CancelResponseOptions()
            session = s.session
            if session is None or not session.conn.open:
                return
            response = session.state.response_in_progress
            done: asyncio.Future[Any] | None = None
            if response is not None:
                s.cancelled = response
                if opts.wait_for_done:
                    done = session.conn.expect(
                        lambda e: isinstance(e, ResponseDone) and e.response_id == response
                    )
                session.conn.post({"type": "response.cancel"})
            s.apply(s.tracker.cancel(s.now()))
            self._truncate(session, opts.truncate)
            if done is not None:
                try:
                    async with asyncio.timeout(WAIT_FOR_DONE):
                        await done
                except (TimeoutError, ConnectError):
                    pass
                finally:
                    done.cancel()
        except Exception:
            logger.exception("{}: cancel_response failed", s.callbacks)

    def truncate_answer(self, heard: float) -> None:
        """Cut the last answer's audio item at ``heard`` seconds of playback. Never raises."""
        s = self._s
        session = s.session
        if session is None or not session.conn.open:
            return
        try:
            self._truncate(session, heard)
        except Exception:
            logger.exception("{}: truncate_answer failed", s.callbacks)

    # --- posting ----------------------------------------------------------------------------

    def require_session(self) -> None:
        """Raise ``NotConnectedError`` unless a session serves the call (or a move brings
        the next one up)."""
        if self._s.handed_over:
            raise NotConnectedError("the call was handed over to another process")
        if self._s.closed or not self._serving():
            raise NotConnectedError("no session: call connect() first")

    def _send(self, event: Event, *, audio: bytes | None = None) -> None:
        """Post ``event`` to the session, or hold it while none takes it (a move)."""
        self.require_session()
        session = self._s.session
        takes = self._gate is InputGate.OPEN or (
            self._gate is InputGate.MEDIA_ONLY and audio is not None
        )
        if session is None or not takes or self._held:
            if len(self._held) >= self._s.options.max_queued_events:
                raise SendQueueFullError("the input held during a move is full")
            self._held.append((event, audio))
            return
        self.post(session, event, audio)
        if audio is None:
            # Audio alone changes nothing until the server says what it heard.
            self._boundary_changed()

    def post(self, session: OpenSession, event: Event, audio: bytes | None) -> None:
        """Post ``event`` (with the audio of an append) to ``session`` now."""
        kind = event["type"]
        session.conn.post(event)
        if audio is not None:
            if self._keeps_sent:
                self._keep_sent(session, audio)
            session.state.appended(audio)
        elif kind == "input_audio_buffer.commit":
            session.state.sent_commit()
        elif kind == "input_audio_buffer.clear":
            session.state.sent_clear()
        elif kind == "response.create":
            self._s.response_requested = True
        elif kind == "conversation.item.create":
            self._s.unconfirmed[event["item"]["id"]] = event

    def replay_audio(self, session: OpenSession, audio: bytes, event: Mapping[str, Any]) -> int:
        """Append ``audio`` to ``session`` in ``REPLAY_APPEND_MS`` chunks, each an ``event``
        (an ``input_audio_buffer.append``) with its audio; returns the events posted."""
        step = REPLAY_APPEND_MS * self._s.bytes_per_ms
        posted = 0
        for start in range(0, len(audio), step):
            chunk = audio[start : start + step]
            self.post(session, {**event, "audio": base64.b64encode(chunk).decode()}, chunk)
            posted += 1
        return posted

    def _keep_sent(self, session: OpenSession, audio: bytes) -> None:
        """Keep ``audio`` for the record, and drop what no record needs."""
        state, sent = session.state, session.sent
        sent.append((state.appended_bytes, audio))
        keep_from = state.uncommitted_from - RECORD_BLOCK_MS * self._s.bytes_per_ms
        while sent and sent[0][0] + len(sent[0][1]) <= keep_from:
            sent.popleft()

    def _create_item(self, item: dict[str, Any]) -> None:
        self._send({"type": "conversation.item.create", "item": {"id": new_item_id(), **item}})

    def _request_response(self, instructions: str | None = None) -> None:
        event: dict[str, Any] = {"type": "response.create"}
        if instructions is not None:
            event["response"] = {"instructions": instructions}
        self._send(event)

    def _truncate(self, session: OpenSession, at: float | Literal["generated"] | None) -> None:
        item_id = self._s.audio_item
        if at is None or item_id is None:
            return
        held = session.state.item(item_id)
        if held is None:
            return
        # The service refuses a truncate past the audio the item holds: what it sent, or what
        # an earlier truncate left of it.
        left = held.audio_ms if held.heard_ms is None else held.heard_ms
        if at == "generated":
            end_ms = left
        elif isinstance(at, int | float) and at >= 0:
            end_ms = min(int(at * 1000), left)
        else:
            logger.warning("{}: truncate must be seconds >= 0 or 'generated'", self._s.callbacks)
            return
        if held.heard_ms is not None and end_ms >= held.heard_ms:
            return
        session.conn.post(
            {
                "type": "conversation.item.truncate",
                "item_id": item_id,
                "content_index": 0,
                "audio_end_ms": end_ms,
            }
        )
        # What the user heard is known now; a second cancel before the server's
        # ``conversation.item.truncated`` must not cut past it.
        session.state.truncate(item_id, end_ms)
