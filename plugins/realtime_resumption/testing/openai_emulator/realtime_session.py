"""One OpenAI Realtime session: its connection, configuration, conversation, input buffer,
server VAD and responses.

The protocol's rules, with their sources (API reference "Realtime client events" / "server
events"; the ``openai`` SDK 3.63's types under ``openai/types/realtime/``):

- ``session.created`` opens the session (after ``session_created_latency``); client events sent
  before it wait. ``session.update`` answers ``session.updated`` with the whole session, or an
  ``error`` (GA needs ``session.type``: ``RealtimeSessionCreateRequest.type`` is required).
- ``input_audio_buffer.append`` (base64 PCM16 24 kHz) fills the buffer. With server VAD
  (``turn_detection``, on by default), read frame by frame whatever the appends' size
  (``input_buffer``), audio at or above the threshold's level starts speech
  (``speech_started`` with ``audio_start_ms``, the prefix padding included, and the coming
  item's ``item_id``; with ``interrupt_response`` it cancels the response in progress,
  ``status_details.reason`` ``turn_detected``), and ``silence_duration_ms`` of quieter audio
  (scaled) ends it (``speech_stopped`` with ``audio_end_ms``, the silence included, then
  ``committed`` and the user item, then a response when ``create_response``); the rest of
  the append fills the buffer again. Before speech only the last ``prefix_padding_ms`` is
  kept.
  ``input_audio_buffer.commit`` commits by hand (less than 100 ms: the documented
  ``input_audio_buffer_commit_empty`` error); ``clear`` empties it (``cleared``).
- A committed or created item is announced with ``conversation.item.added`` then
  ``conversation.item.done`` (GA; openai/openai-openapi issue 518), or
  ``conversation.item.created`` (beta). Input transcription, when the session asks for it,
  arrives apart, ``transcription_latency`` later (``...input_audio_transcription.completed``).
- ``response.create`` while one is active: ``conversation_already_has_active_response``;
  ``response.cancel`` with none: ``response_cancel_not_active`` (the two codes Pipecat's
  client treats as non-fatal, ``llm.py:953-964``). ``response.metadata`` comes back in
  ``response.created`` (LiveKit matches ``client_event_id`` there).
- A response is ``response.created``, ``output_item.added``, ``conversation.item.added``,
  ``content_part.added``, then audio deltas at playback pace with transcript deltas, their
  ``done`` events, ``output_item.done`` and ``response.done``; or function calls
  (``output_item.added`` before ``function_call_arguments.*``: Pipecat tracks the call from the
  item, ``llm.py:1027``). ``rate_limits.updated`` follows ``response.done``.
- A ``function_call_output`` whose call is not in the conversation is refused with
  ``invalid_tool_call_id`` (livekit/agents issue 3344). ``conversation.item.truncate`` past
  the audio is refused ("Audio content of ... is already shorter than ...": the API reference,
  ``audio_end_ms``, "If the audio_end_ms is greater than the actual audio duration, the server
  will respond with an error"; after a truncate the actual audio is what it left), and cuts the
  item's transcript to what was heard; ``conversation.item.delete`` removes an item.
- Codes the references do not document (a bad frame, an unknown item id) are the emulator's
  own, spelt like the documented ones.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import random
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from loguru import logger
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from ..emulator import network
from ..emulator.answers import called_functions
from ..emulator.audio import ANSWER_RATE, UserAudioDecoder, answer_audio, rms
from ..emulator.listener import LiveConnections, received_close
from ..emulator.owned_tasks import OwnedTasks
from . import protocol
from .conversation_ledger import AnswerRecord, ItemRecord, Ledger, SessionRecord
from .input_buffer import VAD_FRAME_MS, InputBuffer
from .protocol import Flavour, ProtocolError, SessionConfig, field_of
from .replies import chunk_transcript, reply
from .scripted_faults import Faults
from .service_config import CAP_CLOSE_CODE, OpenAIEmulatorConfig, cap_reason

_BYTES_PER_MS = 2 * ANSWER_RATE // 1000
"""PCM16 mono at 24 kHz: the input and output format of every session here."""
_MIN_COMMIT_MS = 100


@dataclass
class Shared:
    """What the sessions of one emulator share."""

    config: OpenAIEmulatorConfig
    ledger: Ledger
    faults: Faults
    started_at: float
    rng: random.Random
    live: LiveConnections[ServedSession]
    turns: int = 0

    def now(self) -> float:
        """Seconds on the loop's clock since the emulator started."""
        return asyncio.get_running_loop().time() - self.started_at

    def new_id(self, prefix: str) -> str:
        """A fresh identifier shaped like the service's (``item_...``, ``resp_...``)."""
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
        return f"{prefix}_" + "".join(self.rng.choices(alphabet, k=21))

    def new_turn(self) -> int:
        """The next answer's number (unique in the emulator: chunk ids never repeat)."""
        self.turns += 1
        return self.turns


@dataclass
class _Item:
    """A conversation item as the service holds it: its wire form and its ledger record."""

    wire: dict[str, Any]
    record: ItemRecord
    chunks: list[str] = field(default_factory=list)
    """An answer's transcript, chunk by chunk (a truncate keeps the chunks heard)."""


@dataclass
class _Response:
    """The response in progress."""

    id: str
    answer: AnswerRecord
    task: asyncio.Task[None] | None = None
    item: dict[str, Any] | None = None
    output: list[dict[str, Any]] = field(default_factory=list)
    transcript: str = ""


class ServedSession:
    """Serves one connection; every task it starts is cancelled when it ends."""

    def __init__(
        self, ws: ServerConnection, shared: Shared, path: str, flavour: Flavour, model: str
    ) -> None:
        self._ws = ws
        self._shared = shared
        self._config = shared.config
        self.flavour: Flavour = flavour
        now = shared.now()
        cap = self._config.cap_seconds
        self.session = SessionConfig(
            id=shared.new_id("sess"),
            model=model,
            # Unix seconds, as the API reports them; the cap on the emulator's (scaled) clock.
            expires_at=0 if cap is None else int(time.time() + self._config.scaled(cap)),
        )
        self.record = SessionRecord(
            id=self.session.id,
            index=len(shared.ledger.sessions),
            path=path,
            flavour=flavour,
            opened_at=now,
            model=model,
        )
        shared.ledger.sessions.append(self.record)
        self._tasks = OwnedTasks("openai emulator: session task failed")
        self._closing = False
        self._events = 0
        self._items: list[_Item] = []
        self._decoder = UserAudioDecoder()
        self._buffer = InputBuffer()
        self._speech_item: str | None = None
        """The id the user item being spoken will have (``speech_started`` names it)."""
        self._response: _Response | None = None

    @property
    def session_id(self) -> str | None:
        """The session's id while it serves (None once it is closing)."""
        return None if self._closing else self.session.id

    # --- tasks, sending, closing ------------------------------------------------------------

    async def _send(self, event: dict[str, Any]) -> asyncio.Future[bool]:
        """Send a server event (GA name; spelt for the session's flavour); the future says
        whether it crossed the network: False at once if the session is closing, True at once
        for an event the flavour does not have (nothing was due)."""
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        name = protocol.spelt(event["type"], self.flavour)
        if name is None or self._closing:
            done.set_result(name is None)
            return done
        self._events += 1
        frame = json.dumps({**event, "type": name, "event_id": f"event_{self._events}"})
        return await network.send_crossing(self._ws, frame)

    async def _error(self, exc: ProtocolError, client_event_id: str | None) -> None:
        self.record.errors.append((exc.code, exc.message))
        await self._send(protocol.error_event(exc, client_event_id))

    def send_error(self, code: str | None, message: str, type_: str) -> None:
        """Send an ``error`` event no client event caused (in a task the session owns)."""
        if not self._closing:
            self._tasks.spawn(self._error(ProtocolError(message, code=code, type_=type_), None))

    def drop(self) -> None:
        """Abort the TCP connection: no close frame, the client sees 1006."""
        if self._closing:
            return
        self._closing = True
        self.record.closed_by = "drop"
        self.record.close_code = 1006
        self._ws.transport.abort()

    def close_with(self, code: int, reason: str) -> None:
        """Close with ``code`` and ``reason`` (in a task the session owns)."""
        if not self._closing:
            self._tasks.spawn(self._close(code, reason, "server"))

    async def _close(self, code: int, reason: str, by: Literal["server", "cap"]) -> None:
        if self._closing:
            return
        self._closing = True
        self.record.closed_by = by
        self.record.close_code, self.record.close_reason = code, reason
        await self._ws.close(code, reason)

    # --- the session's life -----------------------------------------------------------------

    async def run(self) -> None:
        """Serve the connection until it closes."""
        await self._shared.live.serve(self, self._run, self._finish)

    async def _run(self) -> None:
        config = self._config
        slow = self._shared.faults.take_session_created_latency()
        latency = config.scaled(config.session_created_latency if slow is None else slow)
        if latency > 0:
            try:
                await asyncio.wait_for(self._ws.wait_closed(), latency)
                return  # the client left before its session was created
            except TimeoutError:
                pass
        self.record.created_at = self._shared.now()
        await self._send({"type": "session.created", "session": self.session.to_wire(self.flavour)})
        cap = config.cap_seconds
        if cap is not None:
            self._tasks.spawn(self._end_at_cap(cap))
        async for raw in self._ws:
            await self._receive(raw)

    async def _end_at_cap(self, cap: float) -> None:
        """The cap, counted from ``session.created``: the 1001 close with the service's
        reason (the older ``session_expired`` error first, with ``cap_error_event``)."""
        await asyncio.sleep(self._config.scaled(cap))
        reason = cap_reason(cap)
        if self._config.cap_error_event:
            exc = ProtocolError(reason, code="session_expired")
            await self._error(exc, None)
        logger.debug("openai emulator: session {} reached its cap", self.session.id)
        await self._close(CAP_CLOSE_CODE, reason, "cap")

    async def _finish(self) -> None:
        self._closing = True
        await self._tasks.cancel_all()
        response = self._response
        if response is not None:
            response.answer.outcome = "cut"
        self.record.uncommitted_speech = self._buffer.speech
        record = self.record
        record.closed_at = self._shared.now()
        if record.closed_by is None:
            record.closed_by = "client"
            record.close_code, record.close_reason = received_close(self._ws)

    async def _receive(self, raw: str | bytes) -> None:
        client_event_id = None
        try:
            event = protocol.parse_client_event(raw)
            self.record.client_events[event["type"]] += 1
            client_event_id = event.get("event_id")
            if not isinstance(client_event_id, str):
                client_event_id = None
            await self._dispatch(event)
        except ProtocolError as exc:
            logger.debug("openai emulator: error for a client event: {}", exc.message)
            await self._error(exc, client_event_id)
        except ConnectionClosed:
            raise
        except Exception as exc:
            # A fault of the emulator's own: logged whole, answered as the service answers
            # its internal errors, and the session goes on (a test sees the error event).
            logger.opt(exception=exc).error("openai emulator: failed on a client event")
            error = ProtocolError(
                "The server had an error while processing your request.", type_="server_error"
            )
            await self._error(error, client_event_id)

    async def _dispatch(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        if kind == "session.update":
            self.session.update(field_of(event, "session", dict), self.flavour)
            await self._send(
                {"type": "session.updated", "session": self.session.to_wire(self.flavour)}
            )
        elif kind == "input_audio_buffer.append":
            await self._append(_audio(field_of(event, "audio", str), "audio"))
        elif kind == "input_audio_buffer.commit":
            await self._commit_by_client()
        elif kind == "input_audio_buffer.clear":
            self.record.cleared_speech.extend(self._buffer.clear())
            self._speech_item = None
            await self._send({"type": "input_audio_buffer.cleared"})
        elif kind == "conversation.item.create":
            await self._create_item(event)
        elif kind == "conversation.item.retrieve":
            item = self._item(field_of(event, "item_id", str))
            await self._send({"type": "conversation.item.retrieved", "item": item.wire})
        elif kind == "conversation.item.truncate":
            await self._truncate(event)
        elif kind == "conversation.item.delete":
            await self._delete(field_of(event, "item_id", str))
        elif kind == "response.create":
            await self._create_response(event.get("response"))
        elif kind == "response.cancel":
            if self._response is None:
                raise ProtocolError(
                    "Cancellation failed: no active response found",
                    code="response_cancel_not_active",
                )
            await self._cancel_response("client_cancelled")
        else:  # output_audio_buffer.clear
            raise ProtocolError(
                "output_audio_buffer.clear is only supported for WebRTC and SIP connections.",
                code="invalid_value",
                param="type",
            )

    # --- input audio and server VAD ---------------------------------------------------------

    def _vad_level(self) -> float:
        detection = self.session.turn_detection
        threshold = 0.5 if detection is None else float(detection["threshold"])
        # Each 0.1 of threshold doubles the level (0.99: no voice the emulator makes).
        return self._config.vad_level * 2 ** ((threshold - 0.5) * 10)

    async def _append(self, pcm: bytes) -> None:
        self._shared.ledger.audio_appended(self.record, self._shared.now())
        level = self._vad_level()
        frame = VAD_FRAME_MS * _BYTES_PER_MS
        for start in range(0, len(pcm), frame):
            await self._hear(pcm[start : start + frame], level)

    async def _hear(self, pcm: bytes, level: float) -> None:
        """One frame of the input: into the buffer, and the VAD's step on it."""
        chunks = self._decoder.feed(pcm)
        speech = tuple(c.seq for c in chunks if c.level >= level)
        self.record.received_speech.extend(speech)
        detection = self.session.turn_detection
        step = self._buffer.append(
            len(pcm) / _BYTES_PER_MS,
            speech,
            tuple(c.word for c in chunks if c.word),
            loud=rms(pcm) >= level,
            detection=detection,
            scale=self._config.time_scale,
        )
        if step is None or detection is None:
            return
        if step.kind == "started":
            self._speech_item = self._shared.new_id("item")
            await self._send(
                {
                    "type": "input_audio_buffer.speech_started",
                    "audio_start_ms": step.at_ms,
                    "item_id": self._speech_item,
                }
            )
            if detection.get("interrupt_response", True) and self._response is not None:
                await self._cancel_response("turn_detected")
            return
        item_id = self._speech_item or self._shared.new_id("item")
        await self._send(
            {
                "type": "input_audio_buffer.speech_stopped",
                "audio_end_ms": step.at_ms,
                "item_id": item_id,
            }
        )
        await self._commit(item_id)
        if detection.get("create_response", True) and self._response is None:
            await self._create_response(None)

    async def _commit_by_client(self) -> None:
        buffered = self._buffer.buffered_ms
        if buffered < _MIN_COMMIT_MS:
            raise ProtocolError(
                "Error committing input audio buffer: buffer too small. Expected at least "
                f"{_MIN_COMMIT_MS}ms of audio, but buffer only has {buffered:.2f}ms of audio.",
                code="input_audio_buffer_commit_empty",
            )
        await self._commit(self._speech_item or self._shared.new_id("item"))

    async def _commit(self, item_id: str) -> None:
        """The buffer becomes a user item (``committed``, then the item's events)."""
        speech, words = self._buffer.take()
        self._speech_item = None
        previous = self._items[-1].wire["id"] if self._items else None
        await self._send(
            {
                "type": "input_audio_buffer.committed",
                "previous_item_id": previous,
                "item_id": item_id,
            }
        )
        wire = {
            "id": item_id,
            "object": "realtime.item",
            "type": "message",
            "status": "completed",
            "role": "user",
            "content": [{"type": "input_audio", "transcript": None}],
        }
        record = ItemRecord(item_id, "message", "user", "speech", text=words, speech=speech)
        await self._add_item(_Item(wire, record), previous)
        if self.session.transcription is not None:
            self._tasks.spawn(self._transcribe(item_id, words))

    async def _transcribe(self, item_id: str, words: str) -> None:
        await asyncio.sleep(self._config.scaled(self._config.transcription_latency))
        item = next((i for i in self._items if i.wire["id"] == item_id), None)
        if item is not None:
            item.wire["content"][0]["transcript"] = words
        if words:
            await self._send(
                {
                    "type": "conversation.item.input_audio_transcription.delta",
                    "item_id": item_id,
                    "content_index": 0,
                    "delta": words,
                }
            )
        await self._send(
            {
                "type": "conversation.item.input_audio_transcription.completed",
                "item_id": item_id,
                "content_index": 0,
                "transcript": words,
                "usage": {"type": "duration", "seconds": 0},
            }
        )

    # --- conversation items -----------------------------------------------------------------

    def _item(self, item_id: str) -> _Item:
        for item in self._items:
            if item.wire["id"] == item_id:
                return item
        raise ProtocolError(
            f"Item with item_id '{item_id[:100]}' not found.",
            code="item_not_found",
            param="item_id",
        )

    async def _add_item(self, item: _Item, previous: str | None, *, done: bool = True) -> None:
        """Insert ``item`` after the item ``previous`` (``"root"``: first, None: last) and
        announce it (``added``, and ``done`` unless the item is still being produced)."""
        index = len(self._items)
        if previous == "root":
            index = 0
        elif previous is not None:
            index = next(i for i, it in enumerate(self._items) if it.wire["id"] == previous) + 1
        self._items.insert(index, item)
        self.record.items.append(item.record)
        after = self._items[index - 1].wire["id"] if index > 0 else None
        added = {"type": "conversation.item.added", "previous_item_id": after, "item": item.wire}
        await self._send(added)
        if done:
            await self._send({**added, "type": "conversation.item.done"})

    async def _create_item(self, event: dict[str, Any]) -> None:
        body = field_of(event, "item", dict)
        previous = event.get("previous_item_id")
        if previous is not None and previous != "root":
            if not isinstance(previous, str):
                raise ProtocolError(
                    "Invalid type for 'previous_item_id'.",
                    code="invalid_type",
                    param="previous_item_id",
                )
            self._item(previous)
        item_id = body.get("id") or self._shared.new_id("item")
        if not isinstance(item_id, str) or len(item_id) > 32:
            raise ProtocolError(
                "Invalid 'item.id': expected a string of at most 32 characters.",
                code="invalid_value",
                param="item.id",
            )
        if any(i.wire["id"] == item_id for i in self._items):
            raise ProtocolError(
                f"Item with item_id '{item_id}' already exists.",
                code="item_already_exists",
                param="item.id",
            )
        wire, record = self._read_item(body, item_id)
        await self._add_item(_Item(wire, record), previous)

    def _read_item(self, body: dict[str, Any], item_id: str) -> tuple[dict[str, Any], ItemRecord]:
        kind = body.get("type")
        wire: dict[str, Any] = {"id": item_id, "object": "realtime.item", "status": "completed"}
        if kind == "message":
            role = body.get("role")
            if role not in ("user", "assistant", "system"):
                raise ProtocolError(
                    f"Invalid value: '{str(role)[:100]}'. Supported values are: 'user', "
                    "'assistant', and 'system'.",
                    code="invalid_value",
                    param="item.role",
                )
            content = body.get("content")
            if not isinstance(content, list) or not all(isinstance(c, dict) for c in content):
                raise ProtocolError(
                    "Missing required parameter: 'item.content'.",
                    code="missing_required_parameter",
                    param="item.content",
                )
            texts: list[str] = []
            speech: list[int] = []
            parts = []
            for i, part in enumerate(content):
                parts.append(self._read_part(part, role, i, texts, speech))
            wire |= {"type": "message", "role": role, "content": parts}
            record = ItemRecord(
                item_id, "message", role, "client", text=" ".join(texts), speech=tuple(speech)
            )
            return wire, record
        if kind == "function_call":
            call_id = field_of(body, "call_id", str)
            name = field_of(body, "name", str)
            arguments = body.get("arguments") or "{}"
            wire |= {"type": "function_call", "call_id": call_id, "name": name}
            wire["arguments"] = arguments
            record = ItemRecord(item_id, "function_call", None, "client", text=name)
            record.call_id = call_id
            return wire, record
        if kind == "function_call_output":
            call_id = field_of(body, "call_id", str)
            output = field_of(body, "output", str)
            if not any(
                i.record.call_id == call_id and i.wire["type"] == "function_call"
                for i in self._items
            ):
                raise ProtocolError(
                    f"Tool call ID '{call_id[:100]}' not found in conversation.",
                    code="invalid_tool_call_id",
                    param="item.call_id",
                )
            wire |= {"type": "function_call_output", "call_id": call_id, "output": output}
            record = ItemRecord(item_id, "function_call_output", None, "client", text=output)
            record.call_id = call_id
            return wire, record
        raise ProtocolError(
            f"Invalid value: '{str(kind)[:100]}'. Supported values are: 'message', "
            "'function_call', and 'function_call_output'.",
            code="invalid_value",
            param="item.type",
        )

    def _read_part(
        self, part: dict[str, Any], role: str, index: int, texts: list[str], speech: list[int]
    ) -> dict[str, Any]:
        kind = part.get("type")
        allowed = {
            "user": ("input_text", "input_audio", "input_image"),
            "system": ("input_text",),
            "assistant": ("output_text", "output_audio", "text", "audio"),
        }[role]
        if kind not in allowed:
            raise ProtocolError(
                f"Invalid value: '{str(kind)[:100]}'. Supported values are: "
                + ", ".join(f"'{a}'" for a in allowed)
                + ".",
                code="invalid_value",
                param=f"item.content[{index}].type",
            )
        out = dict(part)
        if kind in ("input_text", "output_text", "text"):
            text = part.get("text")
            if not isinstance(text, str):
                raise ProtocolError(
                    f"Missing required parameter: 'item.content[{index}].text'.",
                    code="missing_required_parameter",
                    param=f"item.content[{index}].text",
                )
            texts.append(text)
        elif kind == "input_audio":
            pcm = _audio(part.get("audio"), f"item.content[{index}].audio")
            level = self._vad_level()
            chunks = UserAudioDecoder().feed(pcm)
            speech.extend(c.seq for c in chunks if c.level >= level)
            words = [c.word for c in chunks if c.word] or [part.get("transcript") or ""]
            texts.append(" ".join(w for w in words if w))
            out.pop("audio", None)
        elif kind in ("output_audio", "audio"):
            texts.append(str(part.get("transcript") or ""))
            out.pop("audio", None)
        return out

    async def _truncate(self, event: dict[str, Any]) -> None:
        item_id = field_of(event, "item_id", str)
        content_index = field_of(event, "content_index", int)
        end_ms = field_of(event, "audio_end_ms", int)
        item = self._item(item_id)
        answer = next((a for a in self.record.answers if a.item_id == item.wire["id"]), None)
        if item.wire.get("role") != "assistant" or answer is None or content_index != 0:
            raise ProtocolError(
                "Only assistant messages with audio can be truncated.",
                code="invalid_value",
                param="item_id",
            )
        # A truncated item's audio is what the truncate left: a later truncate past it is
        # refused like one past the audio produced.
        have = answer.produced * answer.chunk_ms
        if answer.heard_ms is not None:
            have = min(have, answer.heard_ms)
        if end_ms < 0 or end_ms > have:
            raise ProtocolError(
                f"Audio content of {have}ms is already shorter than {end_ms}ms",
                code="invalid_value",
                param="audio_end_ms",
            )
        answer.heard_ms = end_ms
        if answer.outcome == "complete" and end_ms < answer.planned * answer.chunk_ms:
            answer.outcome = "truncated"
        # What the user did not hear leaves the conversation: the transcript keeps the
        # chunks that started before the cut.
        kept = -(-end_ms // answer.chunk_ms)
        item.record.text = "".join(item.chunks[:kept]).strip()
        for part in item.wire.get("content", []):
            if "transcript" in part:
                part["transcript"] = item.record.text
        await self._send(
            {
                "type": "conversation.item.truncated",
                "item_id": item.wire["id"],
                "content_index": 0,
                "audio_end_ms": end_ms,
            }
        )

    async def _delete(self, item_id: str) -> None:
        item = next((i for i in self._items if i.wire["id"] == item_id), None)
        if item is None:
            raise ProtocolError(
                f"Error deleting item: the item with id '{item_id[:100]}' does not exist.",
                code="item_delete_invalid_item_id",
                param="item_id",
            )
        self._items.remove(item)
        item.record.deleted = True
        await self._send({"type": "conversation.item.deleted", "item_id": item_id})

    # --- responses ------------------------------------------------------------------------

    async def _create_response(self, params: Any) -> None:
        if self._response is not None:
            raise ProtocolError(
                "Conversation already has an active response in progress: "
                f"{self._response.id}. Wait until the response is finished before creating "
                "a new one.",
                code="conversation_already_has_active_response",
            )
        if params is not None and not isinstance(params, dict):
            raise ProtocolError(
                "Invalid type for 'response'.", code="invalid_type", param="response"
            )
        params = params or {}
        metadata = params.get("metadata")
        answer = AnswerRecord(
            response_id=self._shared.new_id("resp"),
            turn=self._shared.new_turn(),
            item_id=None,
            planned=0,
            chunk_ms=self._config.chunk_ms,
            metadata=metadata if isinstance(metadata, dict) else None,
        )
        self.record.answers.append(answer)
        response = _Response(answer.response_id, answer)
        self._response = response
        modalities = params.get("output_modalities") or params.get("modalities")
        text_only = (modalities or self.session.output_modalities) == ["text"]
        await self._send(
            {"type": "response.created", "response": self._wire(response, "in_progress")}
        )
        response.task = self._tasks.spawn(self._respond(response, text_only))

    def _wire(self, response: _Response, status: str, reason: str | None = None) -> dict[str, Any]:
        answer = response.answer
        out_tokens = answer.produced + len(answer.calls)
        return {
            "object": "realtime.response",
            "id": response.id,
            "status": status,
            "status_details": None if reason is None else {"type": status, "reason": reason},
            "output": list(response.output),
            "conversation_id": "conv_" + self.session.id.removeprefix("sess_"),
            "output_modalities": list(self.session.output_modalities),
            "max_output_tokens": self.session.max_output_tokens,
            "audio": {
                "output": {"format": dict(self.session.output_format), "voice": self.session.voice}
            },
            "metadata": answer.metadata,
            "usage": None
            if status == "in_progress"
            else {
                "total_tokens": out_tokens + 10,
                "input_tokens": 10,
                "output_tokens": out_tokens,
                "input_token_details": {
                    "cached_tokens": 0,
                    "text_tokens": 10,
                    "audio_tokens": 0,
                    "cached_tokens_details": {"text_tokens": 0, "audio_tokens": 0},
                },
                "output_token_details": {"text_tokens": out_tokens, "audio_tokens": 0},
            },
        }

    def _context(self) -> tuple[str, list[str], list[str], bool]:
        """The last user turn's words, the earlier user turns' words, the function outputs
        given since it, and whether it was already answered with calls."""
        user = [i for i, it in enumerate(self._items) if it.wire.get("role") == "user"]
        if not user:
            return "", [], [], False
        last = user[-1]
        after = self._items[last + 1 :]
        outputs = [i.record.text for i in after if i.wire["type"] == "function_call_output"]
        called = any(i.wire["type"] == "function_call" for i in after)
        earlier = [self._items[i].record.text for i in user[:-1]]
        return self._items[last].record.text, earlier, outputs, called

    async def _respond(self, response: _Response, text_only: bool) -> None:
        user_text, earlier, outputs, called = self._context()
        calls = [] if called else called_functions(user_text, self.session.function_names)
        await asyncio.sleep(self._config.scaled(self._config.first_audio_latency))
        if calls:
            await self._call(response, calls)
        else:
            await self._speak(response, reply(user_text, earlier, outputs), text_only)
        await self._done(response, "completed")

    async def _call(self, response: _Response, names: list[str]) -> None:
        """Function calls: each item before its arguments (Pipecat tracks calls from it)."""
        call_ids = []
        for index, name in enumerate(names):
            call_id = self._shared.new_id("call")
            call_ids.append(call_id)
            item_id = self._shared.new_id("item")
            wire = {
                "id": item_id,
                "object": "realtime.item",
                "type": "function_call",
                "status": "in_progress",
                "call_id": call_id,
                "name": name,
                "arguments": "",
            }
            head = {"response_id": response.id, "output_index": index}
            await self._send({"type": "response.output_item.added", **head, "item": wire})
            record = ItemRecord(item_id, "function_call", None, "model", text=name)
            record.call_id = call_id
            previous = self._items[-1].wire["id"] if self._items else None
            await self._add_item(_Item(wire, record), previous, done=False)
            arguments = "{}"
            ids = {**head, "item_id": item_id, "call_id": call_id}
            await self._send(
                {"type": "response.function_call_arguments.delta", **ids, "delta": arguments}
            )
            await self._send(
                {
                    "type": "response.function_call_arguments.done",
                    **ids,
                    "name": name,
                    "arguments": arguments,
                }
            )
            wire |= {"status": "completed", "arguments": arguments}
            await self._send(
                {"type": "conversation.item.done", "previous_item_id": previous, "item": wire}
            )
            await self._send({"type": "response.output_item.done", **head, "item": wire})
            response.output.append(wire)
        response.answer.calls = tuple(call_ids)
        response.answer.outcome = "complete"

    async def _speak(self, response: _Response, words: str, text_only: bool) -> None:
        """An answer: ``answer_chunks`` chunks at playback pace, audio (with its transcript)
        or text."""
        config, answer = self._config, response.answer
        answer.planned = config.answer_chunks
        item_id = self._shared.new_id("item")
        answer.item_id = item_id
        part_type = "text" if text_only else "audio"
        wire: dict[str, Any] = {
            "id": item_id,
            "object": "realtime.item",
            "type": "message",
            "status": "in_progress",
            "role": "assistant",
            "content": [],
        }
        response.item = wire
        head = {"response_id": response.id, "output_index": 0}
        part_ids = {**head, "item_id": item_id, "content_index": 0}
        await self._send({"type": "response.output_item.added", **head, "item": wire})
        record = ItemRecord(item_id, "message", "assistant", "model")
        item = _Item(wire, record)
        previous = self._items[-1].wire["id"] if self._items else None
        await self._add_item(item, previous, done=False)
        empty_part = (
            {"type": part_type, "transcript": ""} if not text_only else {"type": "text", "text": ""}
        )
        await self._send({"type": "response.content_part.added", **part_ids, "part": empty_part})
        for k in range(answer.planned):
            if k:
                await asyncio.sleep(config.scaled(config.chunk_ms / 1000))
            text = chunk_transcript(answer.turn, k, words)
            answer.produced = k + 1
            answer.sent_at.append(self._shared.now())
            response.transcript += text
            item.chunks.append(text)
            record.text = response.transcript.strip()
            if text_only:
                await self._send({"type": "response.output_text.delta", **part_ids, "delta": text})
                continue
            data = base64.b64encode(answer_audio(answer.turn, k, ms=config.chunk_ms)).decode()
            delivered = await self._send(
                {"type": "response.output_audio.delta", **part_ids, "delta": data}
            )
            delivered.add_done_callback(lambda f: answer.count_delivery(f.result()))
            await self._send(
                {"type": "response.output_audio_transcript.delta", **part_ids, "delta": text}
            )
        transcript = response.transcript
        if text_only:
            await self._send({"type": "response.output_text.done", **part_ids, "text": transcript})
            part = {"type": "text", "text": transcript}
        else:
            await self._send({"type": "response.output_audio.done", **part_ids})
            await self._send(
                {
                    "type": "response.output_audio_transcript.done",
                    **part_ids,
                    "transcript": transcript,
                }
            )
            part = {"type": "audio", "transcript": transcript}
        await self._send({"type": "response.content_part.done", **part_ids, "part": part})
        wire["status"] = "completed"
        wire["content"] = [{**part, "type": "output_text" if text_only else "output_audio"}]
        await self._send(
            {"type": "conversation.item.done", "previous_item_id": previous, "item": wire}
        )
        await self._send({"type": "response.output_item.done", **head, "item": wire})
        response.output.append(wire)
        full = answer.planned * answer.chunk_ms
        heard_all = answer.heard_ms is None or answer.heard_ms >= full
        answer.outcome = "complete" if heard_all else "truncated"

    async def _done(self, response: _Response, status: str, reason: str | None = None) -> None:
        self._response = None
        await self._send(
            {"type": "response.done", "response": self._wire(response, status, reason)}
        )
        if self._config.rate_limits:
            await self._send(
                {
                    "type": "rate_limits.updated",
                    "rate_limits": [
                        {
                            "name": "requests",
                            "limit": 5000,
                            "remaining": 4999,
                            "reset_seconds": 0.012,
                        },
                        {
                            "name": "tokens",
                            "limit": 40000,
                            "remaining": 39000,
                            "reset_seconds": 1.5,
                        },
                    ],
                }
            )

    async def _cancel_response(self, reason: str) -> None:
        """Stop the response in progress: its item ends ``incomplete``, ``response.done``
        says ``cancelled`` with ``reason`` (``turn_detected`` or ``client_cancelled``)."""
        response = self._response
        assert response is not None
        task = response.task
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            await asyncio.wait({task})
        response.answer.outcome = "cancelled"
        wire = response.item
        if wire is not None:
            wire["status"] = "incomplete"
            wire["content"] = [{"type": "output_audio", "transcript": response.transcript}]
            await self._send(
                {
                    "type": "response.output_item.done",
                    "response_id": response.id,
                    "output_index": 0,
                    "item": wire,
                }
            )
            response.output.append(wire)
        await self._done(response, "cancelled", reason)


def _audio(value: Any, param: str) -> bytes:
    """Base64 PCM16 audio (an odd byte count is not PCM16)."""
    if not isinstance(value, str):
        raise ProtocolError(f"Invalid type for '{param}'.", code="invalid_type", param=param)
    try:
        pcm = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ProtocolError(
            f"Invalid '{param}'. Expected base64-encoded audio bytes.",
            code="invalid_value",
            param=param,
        ) from None
    if len(pcm) % 2:
        raise ProtocolError(
            f"Invalid '{param}'. PCM16 audio must be an even number of bytes.",
            code="invalid_value",
            param=param,
        )
    return pcm
