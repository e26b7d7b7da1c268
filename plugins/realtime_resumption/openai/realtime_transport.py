"""``OpenAIRealtimeTransport``: the transport interface on OpenAI Realtime, over the ``openai``
SDK's realtime client (OpenAI, or Azure OpenAI through ``AsyncAzureOpenAI``).

It serves the members OpenAI Realtime has: audio and text in, audio, transcripts and text out,
function calls and their outputs, ``cancel_response`` with ``conversation.item.truncate``,
``clear_input_audio`` (``input_audio_buffer.clear``), the server VAD's
``speech_started``/``speech_stopped``, usage, and the prompt-cache bust a ``session.update`` of
instructions or tools causes. The generation lifecycle is the shared tracker's
(``generation.py``): one start and one end per answer.

Every server event is read into a typed value (``realtime_server_events``) and followed by a
:class:`~realtime_resumption.openai.conversation_state.ConversationState`, so the transport
knows at any moment the conversation, the input not yet in an item, and whether the call is at
a turn boundary: what a new session needs to carry the call on (``realtime_moves``).
"""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import openai
from loguru import logger

from realtime_resumption.failures import CloseMeaning, Stage
from realtime_resumption.generation import (
    Effect,
    FirstAudio,
    GenerationEnded,
    GenerationStarted,
    GenerationTracker,
    ReasoningDone,
    ReasoningStarted,
    TextDone,
    TurnCompleted,
    TurnInterrupted,
)
from realtime_resumption.move_machine import (
    Abandon,
    Action,
    BackoffOver,
    Begin,
    Dial,
    Dispose,
    Due,
    Failed,
    Gate,
    GiveUp,
    InputGate,
    Lost,
    MoveMachine,
    Retried,
    Served,
    Settle,
    Settled,
    Switch,
    Wait,
)
from realtime_resumption.move_machine import SetupOk as MoveSetupOk
from realtime_resumption.move_machine import TurnStarted as MoveTurnStarted
from realtime_resumption.move_reports import (
    HandleKind,
    MoveInProgress,
    MoveLog,
    MoveOutcome,
    MoveReason,
    MoveReport,
)
from realtime_resumption.move_timing import (
    Abandoned,
    CancelTimer,
    ConnectionLost,
    GoAway,
    MoveNow,
    MoveTiming,
    Requested,
    ResumptionOptions,
    StartTimer,
    Switched,
    TimerExpired,
    TimerKind,
    TurnEnded,
    TurnStarted,
)
from realtime_resumption.move_timing import Dispose as TimingDispose
from realtime_resumption.move_timing import Event as TimingEvent
from realtime_resumption.openai.conversation_seed import build_seed, items_from_replay
from realtime_resumption.openai.conversation_state import ConversationState, HeldItem
from realtime_resumption.openai.realtime_connection import RealtimeConnection, dial
from realtime_resumption.openai.realtime_options import MAX_EVENT_BYTES, OpenAIRealtimeOptions
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
from realtime_resumption.openai.session_config import Flavour, SessionConfig
from realtime_resumption.openai.session_handover import Handover, plan_handover
from realtime_resumption.openai.session_update import apply_update, cache_busts
from realtime_resumption.telemetry import AVAILABLE as TELEMETRY_AVAILABLE
from realtime_resumption.telemetry import SessionTelemetry, Telemetry, default_telemetry
from realtime_resumption.transport import (
    AudioFormatSpec,
    CancelResponseOptions,
    ConnectAttempt,
    ConnectError,
    ConnectFailure,
    ConnectionLifecycleEvent,
    ContentTurn,
    GenerationClose,
    GenerationEndReason,
    GenerationOverrides,
    MessageTooLargeError,
    NotConnectedError,
    ProviderEvidenceEvent,
    RealtimeLLMUsage,
    ReasoningInfo,
    ReconnectState,
    SendQueueFullError,
    SessionLostError,
    SessionUpdate,
    SetupFailed,
    SetupOk,
    ToolCall,
    ToolCallOrphanedError,
    ToolResult,
    TransportCapabilities,
    TransportError,
    TransportErrorEvent,
    TransportUsageMetadata,
    UnknownToolCallError,
)

WAIT_FOR_DONE: Final = 2.0
"""Seconds ``cancel_response(wait_for_done=True)`` waits for the cancelled ``response.done``."""
UPDATE_TIMEOUT: Final = 5.0
"""Seconds ``update_session`` waits for the ``session.updated`` that confirms it."""

SWITCH_MARGIN: Final = 0.5
"""Seconds before the cap by which a forced move switches, even mid-answer: the old session
may close a little before the transport's count (its clock started first)."""
REPLAY_APPEND_MS: Final = 20
"""Milliseconds of input per ``input_audio_buffer.append`` when a new session is given the
input the old one held uncommitted: the frame size frameworks stream (Pipecat sends 20 ms
frames), so the replayed audio reaches the service as the live audio did."""


def _reading(code: int | None) -> CloseMeaning:
    """OpenAI's close codes, read for the failure policy: none refuses a resumption point
    (there is none), so every close is a plain close, retried."""
    return CloseMeaning.CLOSED


_CAPABILITIES: Final = TransportCapabilities(
    message_truncation=True,
    turn_detection=True,
    user_transcription=True,
    in_place_session_update=True,
    text_response_modality=True,
    parallel_tool_calls=True,
    clear_input_audio=True,
)


def _item_id() -> str:
    # Client item ids: short enough for the service's id limit, unique per call.
    return f"rr_{uuid.uuid4().hex[:24]}"


@dataclass
class _Session:
    """One server session the transport has open: its socket and what it holds."""

    conn: RealtimeConnection
    state: ConversationState
    attempt: str
    """The dial's ``connect_attempt_id``."""
    created_at: float | None = None
    """The event loop's time at its ``session.created`` (the cap counts from it)."""
    closes_at: float | None = None
    """When the service's cap closes it (None: no cap counted)."""


class OpenAIRealtimeTransport:
    """The transport interface (``LLMTransport``) on OpenAI Realtime; see the module docs.

    ``client`` is an ``openai.AsyncOpenAI`` or ``openai.AsyncAzureOpenAI`` (its key never
    appears in the transport's logs, reprs or errors); ``config`` the session's configuration
    (instructions, tools, voice, formats, turn detection, transcription).
    """

    def __init__(
        self,
        client: Any,
        config: SessionConfig | None = None,
        options: OpenAIRealtimeOptions | None = None,
        *,
        telemetry: Telemetry | bool = True,
    ) -> None:
        if not isinstance(client, openai.AsyncOpenAI):
            raise TypeError(
                f"client must be an openai.AsyncOpenAI or AsyncAzureOpenAI, "
                f"not {type(client).__name__}"
            )
        if config is not None and not isinstance(config, SessionConfig):
            raise TypeError(f"config must be a SessionConfig, not {type(config).__name__}")
        if options is not None and not isinstance(options, OpenAIRealtimeOptions):
            raise TypeError(f"options must be OpenAIRealtimeOptions, not {type(options).__name__}")
        self._client = client
        self._options = options or OpenAIRealtimeOptions()
        self._azure = isinstance(client, openai.AsyncAzureOpenAI)
        self._flavour: Flavour = self._options.flavour_for(self._azure)
        if telemetry is True and TELEMETRY_AVAILABLE:
            telemetry = default_telemetry()
        self._telemetry: SessionTelemetry | None = None
        if isinstance(telemetry, Telemetry):
            provider = "azure.ai.openai" if self._azure else "openai"
            self._telemetry = telemetry.session(provider=provider, model=self._options.model)
        self._config = config or SessionConfig()
        self._check_formats(self._config)
        self._session: _Session | None = None
        self._pending: _Session | None = None
        """A session being dialled and set up (its events feed its state only)."""
        self._candidate: _Session | None = None
        """The session a move set up, until the switch to it."""
        self._source: _Session | None = None
        """The session whose conversation the move in progress carries (the incumbent, or
        the session that was lost)."""
        self._seeded: Handover | None = None
        """What the candidate was given at its dial."""
        self._timing: MoveTiming[str] = MoveTiming(
            ResumptionOptions(
                deadline_margin=self._options.forced_margin,
                retry_delays=self._options.retry_delays,
                attempt_timeout=self._options.connect_timeout,
            ),
            attempts=False,
            rebuilds=True,
        )
        self._machine = MoveMachine(
            self._options.retry_delays, self._options.retry_policy, _reading
        )
        self._timers: dict[TimerKind | str, asyncio.TimerHandle] = {}
        self._at_boundary: bool | None = None
        self._move_done: asyncio.Future[None] | None = None
        """Resolved when the move in progress switched or the session was lost
        (``reconnect`` waits on it)."""
        self._orphaned: set[str] = set()
        """Function calls a move could not carry (the seed's budget left them out)."""
        self._log = MoveLog()
        self._move: MoveInProgress | None = None
        self._cut_by_loss = False
        """The loss that starts the next move cut an answer."""
        self._switch_deferred = False
        """A forced move's switch waits for the answer the old session is giving."""
        self._tracker = GenerationTracker()
        self._tick: asyncio.TimerHandle | None = None
        self._held: deque[tuple[dict[str, Any], bytes | None]] = deque()
        """Client events (with the audio of an append) waiting for a session to take them."""
        self._gate = InputGate.OPEN
        self._calls: dict[str, str] = {}
        """Open function calls: call id to name, until their output is sent."""
        self._unconfirmed: dict[str, dict[str, Any]] = {}
        """Items the client created that no ``conversation.item.*`` echo confirmed yet."""
        self._response_requested = False
        """A ``response.create`` was sent and no ``response.created`` came since."""
        self._cancelled: str | None = None
        """The response ``cancel_response`` cancelled, until its ``response.done``."""
        self._audio_item: str | None = None
        """The assistant item whose audio arrived last (what a truncate cuts)."""
        self._transport_generation = 0
        self._dial_gen = 0
        self._closed = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._update_lock = asyncio.Lock()
        self.on_audio_output: Callable[[bytes], None] | None = None
        self.on_tool_call: Callable[[Sequence[ToolCall]], None] | None = None
        self.on_tool_call_cancel: Callable[[Sequence[str]], None] | None = None
        self.on_turn_complete: Callable[[int | None], None] | None = None
        self.on_interrupted: Callable[[int | None], None] | None = None
        self.on_input_transcription: Callable[[str], None] | None = None
        self.on_output_transcription: Callable[[str], None] | None = None
        self.on_session_ready: Callable[[str], None] | None = None
        self.on_error: Callable[[TransportErrorEvent], None] | None = None
        self.on_close: Callable[[int | None, str | None], None] | None = None
        self.on_model_turn_start: Callable[[str | None], None] | None = None
        self.on_generation_start: Callable[[str], None] | None = None
        self.on_generation_end: Callable[[str, GenerationEndReason], None] | None = None
        self.on_first_audio_chunk: Callable[[], None] | None = None
        self.on_text_output: Callable[[str], None] | None = None
        self.on_text_done: Callable[[], None] | None = None
        self.on_speech_started: Callable[[], None] | None = None
        self.on_user_speech_stopped: Callable[[], None] | None = None
        self.on_go_away: Callable[[str | None, float | None], None] | None = None
        self.on_resumption_update: Callable[[str | None, bool, int | None], None] | None = None
        self.on_credential_expiry: Callable[[], None] | None = None
        self.on_grounding_metadata: Callable[[Mapping[str, Any]], None] | None = None
        self.on_realtime_llm_usage: Callable[[RealtimeLLMUsage], None] | None = None
        self.on_usage_metadata: Callable[[TransportUsageMetadata], None] | None = None
        self.on_connection_lifecycle: Callable[[ConnectionLifecycleEvent], None] | None = None
        self.on_reasoning_start: Callable[[], None] | None = None
        self.on_reasoning_done: Callable[[ReasoningInfo], None] | None = None
        self.on_reasoning_summary: Callable[[str], None] | None = None
        self.on_cache_bust: (
            Callable[[Literal["instructions_changed", "tools_changed"]], None] | None
        ) = None
        self.on_provider_evidence: Callable[[ProviderEvidenceEvent], None] | None = None
        self.on_move: Callable[[MoveReport], None] | None = None
        """Each finished move: why, its outcome (``rebuilt``, or ``lost``), the input gap, the
        input held and replayed, the attempts, whether it cut an answer."""
        self.on_move_started: Callable[[MoveReason, HandleKind], None] | None = None
        """Each move that begins (the handle kind is always ``none``: every move rebuilds)."""

    def __repr__(self) -> str:
        session = self._session.state.session_id if self._session else None
        return (
            f"OpenAIRealtimeTransport(model={self._options.model!r}, flavour={self._flavour}, "
            f"session={session!r}, connected={self.is_connected})"
        )

    # --- static description -----------------------------------------------------------------

    @property
    def capabilities(self) -> TransportCapabilities:
        """What OpenAI Realtime serves through this transport."""
        return _CAPABILITIES

    @property
    def audio_format(self) -> AudioFormatSpec:
        """PCM16 mono at the session's input and output rates (24 kHz by default)."""
        return AudioFormatSpec(
            self._config.input_format.sample_rate, self._config.output_format.sample_rate
        )

    @property
    def is_connected(self) -> bool:
        """A session is up and takes input."""
        return self._session is not None and self._session.conn.open and not self._closed

    @property
    def config(self) -> SessionConfig:
        """The configuration the next session is given."""
        return self._config

    @property
    def conversation(self) -> ConversationState | None:
        """The current session's conversation and input buffer (None before ``connect``)."""
        return self._session.state if self._session else None

    @property
    def current_transport_generation(self) -> int:
        """Advances on each session whose configuration the service confirmed."""
        return self._transport_generation

    @property
    def current_dial_gen(self) -> int:
        """Advances per dial."""
        return self._dial_gen

    @property
    def telemetry(self) -> SessionTelemetry | None:
        """The session's telemetry (None when turned off or without OpenTelemetry): set its
        ``parent``/``generation_parent`` to nest the spans under a framework's."""
        return self._telemetry

    @property
    def move_log(self) -> MoveLog:
        """The session's moves: counts per outcome and the latest reports."""
        return self._log

    def get_active_server_turn_id(self) -> int | None:
        """The active server turn's id, None between turns."""
        return self._tracker.active_server_turn_id

    # --- lifecycle --------------------------------------------------------------------------

    async def connect(self, config: SessionUpdate | None = None) -> None:
        """Open a session, give it the configuration (``config`` applied first) and return
        once the service confirmed it (``session.updated``). Raises ``ConnectError`` when the
        dial fails, with no credential in its message."""
        if self._closed:
            raise TransportError("the transport was disconnected; make a new one")
        if config is not None:
            self._set_config(apply_update(self._config, config))
        if self._session is not None or self._source is not None:
            return  # connected, or a move is bringing the next session up
        session = await self._open_session()
        self._install(session)
        self._emit("on_session_ready", session.state.session_id or "")

    async def disconnect(self) -> None:
        """Close the session and stop everything the transport runs. Idempotent."""
        if self._closed:
            return
        self._stop()
        session, self._session = self._session, None
        candidate, self._candidate = self._candidate, None
        for task in list(self._tasks):
            task.cancel()
        if candidate is not None:
            await candidate.conn.close()
        if session is not None:
            await session.conn.close()
            self._closed_event(session, 1000, "disconnect")
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._emit("on_close", 1000, "disconnect")
        if self._telemetry is not None:
            self._telemetry.close()

    async def reconnect(self, state: ReconnectState | None = None) -> None:
        """Move the call to a new session given the conversation so far, and return once it
        serves (or raise ``SessionLostError`` when every attempt failed). Before any session,
        it connects and gives the new session ``state``'s history."""
        if self._closed:
            raise TransportError("the transport was disconnected; make a new one")
        if self._session is None and self._source is None:
            history = state.conversation_history if state is not None else ()
            seed = build_seed(
                items_from_replay(history),
                budget_tokens=self._options.seed_budget_tokens,
                input_format=self._config.input_format,
                flavour=self._flavour,
            )
            session = await self._open_session(seed.items)
            for event in seed.events:
                session.conn.post(event)
            self._install(session)
            self._emit("on_session_ready", session.state.session_id or "")
            return
        if self._move_done is None:
            self._move_done = asyncio.get_running_loop().create_future()
            if not self._machine.moving:
                # A move already under way is the new session asked for: wait for it.
                self._timing_send(Requested(MoveReason.REQUESTED))
        delays = self._options.retry_delays
        bound = self._options.connect_timeout * (len(delays) + 1) + sum(delays) + 1.0
        try:
            async with asyncio.timeout(bound):
                await asyncio.shield(self._move_done)
        except TimeoutError:
            raise TransportError(f"the move did not complete within {bound:g} s") from None

    # --- input ------------------------------------------------------------------------------

    def send_audio(self, audio: bytes) -> None:
        """Append PCM16 user audio (``audio_format``'s input side) to the input buffer."""
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
        """End the user's turn now (``input_audio_buffer.commit``). With server turn
        detection the service commits by itself, so this sends nothing."""
        if self._config.turn_detection is not None:
            return
        self._send({"type": "input_audio_buffer.commit"})

    def clear_audio(self) -> None:
        """Drop input audio the service holds uncommitted (``input_audio_buffer.clear``)."""
        self._send({"type": "input_audio_buffer.clear"})

    def clear_input_audio(self) -> None:
        """The interface's ``clearInputAudio``: the same as :meth:`clear_audio`."""
        self.clear_audio()

    async def update_session(self, update: SessionUpdate) -> None:
        """Apply ``update``. Before ``connect`` it only changes the configuration; after, it
        sends one ``session.update`` and returns once the service confirmed it (updates run one
        at a time, in call order). ``on_cache_bust`` fires first when instructions or tools
        change."""
        new = apply_update(self._config, update)
        async with self._update_lock:
            session = self._session
            if session is None or not session.conn.open:
                self._set_config(new)
                return
            for reason in cache_busts(self._config, new):
                self._emit("on_cache_bust", reason)
            old, event_id = self._config, f"rr_update_{uuid.uuid4().hex[:16]}"
            self._set_config(new)
            answered = session.conn.expect(
                lambda e: (
                    (isinstance(e, SessionEvent) and not e.created)
                    or (isinstance(e, ServerError) and e.event_id == event_id)
                )
            )
            session.conn.post({**new.session_update(self._flavour), "event_id": event_id})
            try:
                async with asyncio.timeout(UPDATE_TIMEOUT):
                    answer = await answered
            except (TimeoutError, ConnectError):
                logger.warning("{}: the session update was not confirmed", self)
                return
            finally:
                answered.cancel()
            if isinstance(answer, ServerError):
                # The service kept the configuration it had: so does the transport.
                self._set_config(old)
                raise TransportError(
                    f"the service refused the session update ({answer.code or answer.error_type})"
                )

    async def transfer_session(
        self, update: SessionUpdate, state: ReconnectState | None = None
    ) -> None:
        """An agent transfer: OpenAI Realtime applies any configuration in place, so this is
        :meth:`update_session` (``state`` is not needed: the session keeps its conversation)."""
        await self.update_session(update)

    def send_content(self, turns: Sequence[ContentTurn], turn_complete: bool = True) -> None:
        """Add text turns to the conversation; with ``turn_complete``, ask for an answer."""
        if isinstance(turns, str | bytes) or not isinstance(turns, Sequence):
            raise TypeError("turns must be a sequence of ContentTurn")
        for turn in turns:
            if not isinstance(turn, ContentTurn) or not isinstance(turn.text, str):
                raise TypeError("turns must be ContentTurn values with text")
            if turn.role not in ("user", "model"):
                raise ValueError(f"a turn's role is 'user' or 'model', not {turn.role!r}")
        self._require_session()
        for turn in turns:
            if turn.role == "user":
                content = [{"type": "input_text", "text": turn.text}]
                role = "user"
            else:
                part = "output_text" if self._flavour == "ga" else "text"
                content = [{"type": part, "text": turn.text}]
                role = "assistant"
            self._create_item({"type": "message", "role": role, "content": content})
        if turns and turns[-1].role == "user":
            self._apply(self._tracker.user_turn(self._now()))
        if turn_complete:
            self._request_response()

    def send_file(self, data: bytes, mime_type: str) -> None:
        """Send an image (``input_image``) as a user item. Other files are refused: OpenAI
        Realtime takes images only."""
        if not isinstance(data, bytes | bytearray):
            raise TypeError(f"data must be bytes, not {type(data).__name__}")
        if not isinstance(mime_type, str) or not mime_type.startswith("image/"):
            raise ValueError(f"OpenAI Realtime takes images only, not {mime_type!r}")
        url = f"data:{mime_type};base64,{base64.b64encode(bytes(data)).decode()}"
        if len(url) > MAX_EVENT_BYTES:
            raise MessageTooLargeError(f"an image of {len(data)} bytes exceeds the event limit")
        self._require_session()
        content = [{"type": "input_image", "image_url": url}]
        self._create_item({"type": "message", "role": "user", "content": content})

    def send_tool_result(self, result: ToolResult) -> None:
        """Give a function call its output (``function_call_output``) and, unless the result
        is ``silent``, ask for the answer that uses it. Raises ``UnknownToolCallError`` for a
        call the session never issued or already answered."""
        if not isinstance(result, ToolResult):
            raise TypeError(f"result must be a ToolResult, not {type(result).__name__}")
        if result.id in self._orphaned:
            raise ToolCallOrphanedError(result.id)
        if result.id not in self._calls:
            raise UnknownToolCallError(f"no open function call has the id {result.id!r}")
        try:
            output = json.dumps(result.response, default=str)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"the result of {result.name!r} is not JSON: {exc}") from None
        self._require_session()
        del self._calls[result.id]
        item = {"type": "function_call_output", "call_id": result.id, "output": output}
        self._create_item(item)
        if result.scheduling != "silent":
            self._request_response()

    def trigger_generation(
        self, instructions: str | None = None, overrides: GenerationOverrides | None = None
    ) -> None:
        """Ask for an answer (``response.create``); ``instructions`` for this answer only."""
        if instructions is not None and not isinstance(instructions, str):
            raise TypeError("instructions must be a string")
        if overrides is not None and overrides.reasoning_effort is not None:
            raise ValueError("OpenAI Realtime has no reasoning_effort override")
        self._require_session()
        self._request_response(instructions)

    async def cancel_response(self, options: CancelResponseOptions | None = None) -> None:
        """Cancel the answer in flight (``response.cancel``) and, with ``truncate``, cut its
        audio item where playback stopped (``conversation.item.truncate``, at most the audio
        received). Never raises; never calls a framework callback but the generation's end."""
        try:
            opts = options or CancelResponseOptions()
            session = self._session
            if session is None or not session.conn.open:
                return
            response = session.state.response_in_progress
            done: asyncio.Future[Any] | None = None
            if response is not None:
                self._cancelled = response
                if opts.wait_for_done:
                    done = session.conn.expect(
                        lambda e: isinstance(e, ResponseDone) and e.response_id == response
                    )
                session.conn.post({"type": "response.cancel"})
            self._apply(self._tracker.cancel(self._now()))
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
            logger.exception("{}: cancel_response failed", self)

    # --- internals: sending -----------------------------------------------------------------

    def _require_session(self) -> None:
        if self._closed or (self._session is None and self._source is None):
            raise NotConnectedError("no session: call connect() first")

    def _send(self, event: dict[str, Any], *, audio: bytes | None = None) -> None:
        """Post ``event`` to the session, or hold it while none takes it (a move)."""
        self._require_session()
        session = self._session
        takes = self._gate is InputGate.OPEN or (
            self._gate is InputGate.MEDIA_ONLY and audio is not None
        )
        if session is None or not takes or self._held:
            if len(self._held) >= self._options.max_queued_events:
                raise SendQueueFullError("the input held during a move is full")
            self._held.append((event, audio))
            return
        self._post(session, event, audio)
        if audio is None:
            # Audio alone changes nothing until the server says what it heard.
            self._update_boundary()

    def _post(self, session: _Session, event: dict[str, Any], audio: bytes | None) -> None:
        kind = event["type"]
        session.conn.post(event)
        if audio is not None:
            session.state.appended(audio)
        elif kind == "input_audio_buffer.commit":
            session.state.sent_commit()
        elif kind == "input_audio_buffer.clear":
            session.state.sent_clear()
        elif kind == "response.create":
            self._response_requested = True
        elif kind == "conversation.item.create":
            self._unconfirmed[event["item"]["id"]] = event

    def _create_item(self, item: dict[str, Any]) -> None:
        self._send({"type": "conversation.item.create", "item": {"id": _item_id(), **item}})

    def _request_response(self, instructions: str | None = None) -> None:
        event: dict[str, Any] = {"type": "response.create"}
        if instructions is not None:
            event["response"] = {"instructions": instructions}
        self._send(event)

    def _truncate(self, session: _Session, at: float | Literal["generated"] | None) -> None:
        item_id = self._audio_item
        if at is None or item_id is None:
            return
        held = session.state.item(item_id)
        if held is None:
            return
        # The audio the item still holds: a truncated item keeps only what was heard, and the
        # service refuses a truncate past it.
        held_ms = held.audio_ms if held.heard_ms is None else min(held.audio_ms, held.heard_ms)
        if at == "generated":
            end_ms = held_ms
        elif isinstance(at, int | float) and at >= 0:
            end_ms = min(int(at * 1000), held_ms)
        else:
            logger.warning("{}: truncate must be seconds >= 0 or 'generated'", self)
            return
        session.conn.post(
            {
                "type": "conversation.item.truncate",
                "item_id": item_id,
                "content_index": 0,
                "audio_end_ms": end_ms,
            }
        )
        # The cut holds from now on, before the service confirms it: another truncate of the
        # same answer (a second interruption) must not reach past it.
        session.state.truncate(item_id, end_ms)

    # --- internals: sessions ----------------------------------------------------------------

    def _check_formats(self, config: SessionConfig) -> None:
        for fmt in (config.input_format, config.output_format):
            if fmt.encoding != "pcm":
                raise ValueError("OpenAIRealtimeTransport carries PCM16 audio only")

    def _set_config(self, config: SessionConfig) -> None:
        self._check_formats(config)
        self._config = config

    async def _open_session(self, conversation: Sequence[HeldItem] = ()) -> _Session:
        """Dial, give the session the configuration, and return it once confirmed; its state
        starts with ``conversation`` (the items a seed is about to give it)."""
        self._dial_gen += 1
        attempt = f"oai-{self._dial_gen}"
        self._emit("on_connection_lifecycle", ConnectAttempt(attempt, handle_supplied=False))
        timeout = self._options.connect_timeout
        try:
            sdk = await dial(
                self._client,
                model=self._options.model,
                flavour=self._flavour,
                websocket_options=self._options.websocket_options,
                timeout=timeout,
            )
        except ConnectError as exc:
            self._emit("on_connection_lifecycle", SetupFailed(attempt, exc.failure))
            raise
        state = ConversationState(
            input_format=self._config.input_format,
            output_format=self._config.output_format,
            conversation=conversation,
        )
        conn = RealtimeConnection(
            sdk, flavour=self._flavour, on_event=self._on_event, on_closed=self._on_closed
        )
        session = _Session(conn, state, attempt)
        self._pending = session
        try:
            answer = await self._configure(conn, timeout)
        except (TimeoutError, ConnectError) as exc:
            await conn.close()
            failure = (
                exc.failure
                if isinstance(exc, ConnectError)
                else ConnectFailure("timeout", f"no confirmed session within {timeout:g} s")
            )
            self._emit("on_connection_lifecycle", SetupFailed(attempt, failure))
            raise ConnectError(failure) from None
        except BaseException:
            # Cancelled (a disconnect, an abandoned move): the socket is closed, not leaked.
            await asyncio.shield(conn.close())
            raise
        finally:
            self._pending = None
        if isinstance(answer, ServerError):
            await conn.close()
            failure = ConnectFailure(
                "error",
                "the service refused the session's configuration",
                provider_text=f"{answer.code}: {answer.message}",
            )
            self._emit("on_connection_lifecycle", SetupFailed(attempt, failure))
            raise ConnectError(failure)
        self._transport_generation += 1
        self._emit(
            "on_connection_lifecycle",
            SetupOk(attempt, self._transport_generation, session.state.session_id),
        )
        return session

    async def _configure(self, conn: RealtimeConnection, timeout: float) -> ServerEvent:
        """Wait for ``session.created``, send the configuration, and return the service's
        answer to it: ``session.updated``, or the ``error`` that refused it."""
        async with asyncio.timeout(timeout):
            await conn.wait_for(lambda e: isinstance(e, SessionEvent) and e.created, timeout)
            answered = conn.expect(
                lambda e: (
                    isinstance(e, ServerError) or (isinstance(e, SessionEvent) and not e.created)
                )
            )
            conn.post(self._config.session_update(self._flavour))
            try:
                return await answered
            finally:
                answered.cancel()

    def _install(self, session: _Session) -> None:
        """``session`` serves the call from now on: input goes to it, and its cap counts."""
        self._session = session
        self._schedule_cap(session)
        self._update_boundary()

    def _on_event(self, conn: RealtimeConnection, event: ServerEvent) -> None:
        session = self._session
        for s in (session, self._pending, self._candidate):
            if s is not None and s.conn is conn:
                s.state.receive(event)
                if isinstance(event, SessionEvent) and event.created:
                    s.created_at = self._now()
                if s is session:
                    self._dispatch(s, event)
                    self._update_boundary()
                return

    def _on_closed(self, conn: RealtimeConnection, code: int | None, reason: str | None) -> None:
        session = self._session
        if session is None or session.conn is not conn:
            return  # a candidate's close reaches its settle; an old session's means nothing
        if self._switch_deferred:
            # The old session closed before its answer ended: switch to the candidate now.
            self._deferred_switch()
            return
        self._session = None
        self._closed_event(session, code, reason)
        if self._closed:
            return
        now = self._now()
        if self._tracker.answer_in_progress:
            # The end cut the answer: reported as interrupted; the new session answers again.
            self._apply(self._tracker.interrupted(now))
            self._cut_by_loss = True
        self._source = self._source or session
        self._at_boundary = None
        self._timing_send(ConnectionLost())
        lost = Lost(now, code, None, HandleKind.NONE, can_rebuild=True)
        self._run(self._machine.send(lost))

    def _closed_event(self, session: _Session, code: int | None, reason: str | None) -> None:
        self._emit(
            "on_connection_lifecycle",
            GenerationClose(
                session.attempt, self._transport_generation, code, (reason or "")[:200]
            ),
        )

    # --- internals: moves -------------------------------------------------------------------
    #
    # When to move is MoveTiming's (a cap notice, then the next turn boundary, else the
    # deadline fallback); the move itself is MoveMachine's (dial, settle, switch, retries and
    # the failure budget). The transport carries out their actions: every move rebuilds, as
    # OpenAI Realtime keeps nothing across sessions.

    def _schedule_cap(self, session: _Session) -> None:
        """Tell the timing of the cap ``move_margin`` before it (a notice the service never
        sends: the cap counts from ``session.created``)."""
        cap = self._options.cap_for(self._azure)
        if cap is None or session.created_at is None:
            return
        at = session.created_at + cap - self._options.move_margin
        closes_at = session.closes_at = session.created_at + cap

        def notice() -> None:
            self._timers.pop("cap", None)
            if self._session is session and not self._closed:
                now = self._now()
                self._log.go_away(closes_at - now, now)
                self._timing_send(GoAway(now, closes_at - now, rebuild_when_quiet=True))

        self._set_timer("cap", at, notice)

    def _update_boundary(self) -> None:
        """Tell the timing (and a move in progress) when the call leaves or reaches a turn
        boundary: no answer under way or owed, the user not speaking, nothing of the client's
        unconfirmed, no function call open."""
        session = self._session
        if session is None:
            return
        at = (
            session.state.at_turn_boundary
            and not self._response_requested
            and not self._unconfirmed
            and not self._calls
            and not self._tracker.answer_in_progress
            and not self._held
        )
        if at == self._at_boundary:
            return
        self._at_boundary = at
        if at:
            self._timing_send(TurnEnded())
            return
        self._timing_send(TurnStarted())
        if self._machine.moving:
            self._run(self._machine.send(MoveTurnStarted()))

    def _timing_send(self, event: TimingEvent[str]) -> None:
        for action in self._timing.send(event):
            if isinstance(action, StartTimer):
                self._set_timer(action.kind, action.at, self._timer_fired(action.kind))
            elif isinstance(action, CancelTimer):
                timer = self._timers.pop(action.kind, None)
                if timer is not None:
                    timer.cancel()
            elif isinstance(action, MoveNow):
                due = Due(
                    self._now(),
                    action.reason,
                    None,
                    HandleKind.NONE,
                    incumbent=self._session is not None,
                    can_rebuild=True,
                    forced=action.forced,
                )
                self._run(self._machine.send(due))

    def _timer_fired(self, kind: TimerKind) -> Callable[[], None]:
        def fired() -> None:
            self._timers.pop(kind, None)
            self._timing_send(TimerExpired(kind, self._now()))

        return fired

    def _run(self, actions: list[Action]) -> None:
        """Carry out the move machine's actions, in order."""
        for action in actions:
            if isinstance(action, Gate):
                self._gate = action.gate
                if action.gate is InputGate.HELD and self._move is not None:
                    self._move.input_stopped(self._now())
            elif isinstance(action, Begin):
                self._begin(action.reason)
            elif isinstance(action, Dial):
                if self._move is not None:
                    self._move.attempt(None, HandleKind.NONE)
                self._own(self._attempt(), "dial")
            elif isinstance(action, Settle):
                self._own(self._settle(action.seconds), "settle")
            elif isinstance(action, Switch):
                self._switch_when_answered()
            elif isinstance(action, Wait):
                self._set_timer(
                    "backoff",
                    self._now() + action.seconds,
                    lambda: self._run(self._machine.send(BackoffOver())),
                )
            elif isinstance(action, Abandon):
                self._abandon()
            elif isinstance(action, Retried):
                error = TransportError(f"a move's attempt failed: {action.why}")
                self._emit("on_error", TransportErrorEvent(error, recoverable=True))
            elif isinstance(action, GiveUp):
                self._lose(action.why)
            else:
                # Break, RefusedWhileOpen, RollBack: the reading above never asks for them.
                logger.debug("{}: no use for {!r}", self, action)

    def _begin(self, reason: MoveReason) -> None:
        now = self._now()
        self._source = self._source or self._session
        self._move = self._log.begin(reason, None, HandleKind.NONE, now)
        if self._session is None:
            self._move.incumbent_gone()
            self._move.input_stopped(now)
        if self._cut_by_loss:
            self._move.turn_was_cut()
            self._cut_by_loss = False
        logger.info("{}: moving to a new session ({})", self, reason)
        self._emit("on_move_started", reason, HandleKind.NONE)

    def _finish_report(self, outcome: MoveOutcome, **figures: Any) -> None:
        move, self._move = self._move, None
        if move is not None:
            self._emit("on_move", move.finish(outcome, self._now(), **figures))

    async def _attempt(self) -> None:
        """One attempt of the move: a new session, given the configuration and the
        conversation of the session the move carries."""
        source = self._source
        assert source is not None
        plan = self._plan(source)
        try:
            candidate = await self._open_session(plan.seed.items)
        except ConnectError as exc:
            self._run(self._machine.send(Failed(self._now(), Stage.DIAL, error=exc)))
            return
        if self._closed or self._machine.move is None:
            await candidate.conn.close()  # abandoned or disposed meanwhile
            return
        for event in plan.seed.events:
            candidate.conn.post(event)
        self._candidate, self._seeded = candidate, plan
        self._run(self._machine.send(MoveSetupOk()))

    async def _settle(self, seconds: float) -> None:
        """Until the candidate says something, closes, or ``seconds`` pass."""
        candidate = self._candidate
        assert candidate is not None
        try:
            await candidate.conn.wait_for(lambda _: True, seconds)
        except TimeoutError:
            pass
        except ConnectError:
            self._candidate = None
            failed = Failed(self._now(), Stage.SETTLING, code=candidate.conn.close_code)
            self._run(self._machine.send(failed))
            return
        if self._candidate is candidate:
            self._run(self._machine.send(Settled(self._now())))

    def _plan(self, source: _Session) -> Handover:
        return plan_handover(
            source.state,
            unconfirmed=list(self._unconfirmed.values()),
            response_requested=self._response_requested,
            budget_tokens=self._options.seed_budget_tokens,
            input_format=self._config.input_format,
            flavour=self._flavour,
        )

    def _switch_when_answered(self) -> None:
        """A move forced by the cap's deadline waits for the answer the old session is giving,
        as long as the cap allows (``SWITCH_MARGIN`` before it); any other switches now."""
        old = self._session
        move = self._move
        if (
            old is not None
            and old.closes_at is not None
            and move is not None
            and move.reason is MoveReason.DEADLINE
            and old.state.response_in_progress is not None
            and self._now() < old.closes_at - SWITCH_MARGIN
        ):
            self._switch_deferred = True
            self._set_timer("switch", old.closes_at - SWITCH_MARGIN, self._deferred_switch)
            return
        self._switch()

    def _deferred_switch(self) -> None:
        timer = self._timers.pop("switch", None)
        if timer is not None:
            timer.cancel()
        if self._switch_deferred and self._candidate is not None and not self._closed:
            self._switch_deferred = False
            self._switch()

    def _switch(self) -> None:
        """The candidate serves the call from now on: the old session stops taking input at
        once and closes; the candidate gets what the old one held uncommitted, the items it
        never confirmed, an answer it owed, then the input held during the move."""
        candidate, seeded, source = self._candidate, self._seeded, self._source
        assert candidate is not None and seeded is not None and source is not None
        self._candidate = self._seeded = self._source = None
        old, self._session = self._session, None
        now = self._now()
        if old is not None:
            self._closed_event(old, 1000, "moved")
            self._own(old.conn.close(), "close")
        if self._tracker.answer_in_progress:
            # A forced move cut an answer the old session was giving.
            self._apply(self._tracker.interrupted(now))
            if self._move is not None:
                self._move.turn_was_cut()
        plan = self._plan(source)
        self._session = candidate
        seeded_ids = {item.id for item in seeded.seed.items}
        for event in plan.seed.events:
            # What the conversation gained since the dial (a forced move's incumbent).
            if event["item"]["id"] not in seeded_ids:
                self._post(candidate, event, None)
        step = REPLAY_APPEND_MS * self._config.input_format.bytes_per_ms
        for start in range(0, len(plan.audio), step):
            chunk = plan.audio[start : start + step]
            append = {
                "type": "input_audio_buffer.append",
                "audio": base64.b64encode(chunk).decode(),
            }
            self._post(candidate, append, chunk)
        for event in plan.resend:
            self._post(candidate, event, None)
        self._response_requested = False
        if plan.answer:
            self._post(candidate, {"type": "response.create"}, None)
        self._orphan_calls(plan)
        self._gate = InputGate.OPEN
        held, self._held = self._held, deque()
        for event, audio in held:
            self._post(candidate, event, audio)
        per_ms = self._config.input_format.bytes_per_ms
        self._finish_report(
            MoveOutcome.REBUILT,
            messages_buffered=len(held),
            messages_replayed=len(plan.resend) + -(-len(plan.audio) // step),
            audio_seconds_held=sum(len(a) for _, a in held if a is not None) / per_ms / 1000,
            audio_seconds_replayed=len(plan.audio) / per_ms / 1000,
        )
        self._at_boundary = None
        self._timing_send(Switched(resumed=False, replayed_turn=plan.answer or bool(held)))
        self._install(candidate)
        self._finish_move(None)
        if not candidate.conn.open:
            # It closed after it settled (a deferred switch waited): a loss like any other,
            # on probation, so it counts as a failed attempt of this move.
            self._on_closed(candidate.conn, candidate.conn.close_code, None)

    def _orphan_calls(self, plan: Handover) -> None:
        """Open function calls the seed left out: their output would be refused."""
        carried = {item.call_id for item in plan.seed.items if item.call_id is not None}
        lost = [call_id for call_id in self._calls if call_id not in carried]
        for call_id in lost:
            del self._calls[call_id]
            self._orphaned.add(call_id)
        if lost:
            self._emit("on_tool_call_cancel", lost)

    def _abandon(self) -> None:
        """A turn began on the incumbent during a planned move: the candidate is given up,
        and the timing waits for the next boundary (or the deadline)."""
        candidate, self._candidate = self._candidate, None
        self._seeded = None
        self._source = None
        if candidate is not None:
            self._own(candidate.conn.close(), "close")
        self._timing_send(Abandoned(self._now(), None))

    def _lose(self, why: str) -> None:
        """Every attempt failed: the call is over."""
        error = SessionLostError(why)
        self._finish_move(error)
        self._finish_report(MoveOutcome.LOST, error=why)
        self._stop()
        candidate, self._candidate = self._candidate, None
        if candidate is not None:
            self._own(candidate.conn.close(), "close")
        self._emit("on_error", TransportErrorEvent(error, recoverable=False))
        self._emit("on_close", None, why)
        if self._telemetry is not None:
            self._telemetry.close()

    def _finish_move(self, error: BaseException | None) -> None:
        done, self._move_done = self._move_done, None
        if done is not None and not done.done():
            if error is None:
                done.set_result(None)
            else:
                done.set_exception(error)

    def _stop(self) -> None:
        """Nothing moves or ticks any more (disconnect, or the session was lost)."""
        self._closed = True
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        if self._tick is not None:
            self._tick.cancel()
        self._machine.send(Dispose())
        self._timing.send(TimingDispose())
        self._apply(self._tracker.connection_lost(self._now()))
        self._held.clear()
        self._finish_move(SessionLostError("the transport was disconnected"))

    def _set_timer(self, key: TimerKind | str, at: float, fire: Callable[[], None]) -> None:
        old = self._timers.pop(key, None)
        if old is not None:
            old.cancel()
        self._timers[key] = asyncio.get_running_loop().call_at(at, fire)

    def _own(self, work: Any, name: str) -> None:
        """Run ``work`` in a task the transport owns (cancelled by ``disconnect``)."""
        task = asyncio.get_running_loop().create_task(work, name=f"oai-transport-{name}")
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.opt(exception=task.exception()).error("{}: {} failed", self, task.get_name())

    # --- internals: what the server says ----------------------------------------------------

    def _dispatch(self, session: _Session, event: ServerEvent) -> None:
        now = self._now()
        if isinstance(event, AudioDelta):
            self._audio_item = event.item_id
            self._apply(self._tracker.model_output(now, "audio"))
            if not self._tracker.suppressing:
                self._emit("on_audio_output", event.audio)
        elif isinstance(event, OutputTextDelta):
            kind: Literal["transcript", "text"] = (
                "transcript" if event.modality == "audio" else "text"
            )
            self._apply(self._tracker.model_output(now, kind))
            if not self._tracker.suppressing:
                name = "on_output_transcription" if kind == "transcript" else "on_text_output"
                self._emit(name, event.delta)
        elif isinstance(event, FunctionArgumentsDone):
            self._function_call(now, event)
        elif isinstance(event, ResponseCreated):
            self._response_requested = False
        elif isinstance(event, ResponseDone):
            self._response_done(now, event)
        elif isinstance(event, SpeechStarted):
            self._apply(self._tracker.user_turn(now))
            self._emit("on_speech_started")
        elif isinstance(event, SpeechStopped):
            self._emit("on_user_speech_stopped")
        elif isinstance(event, InputTranscriptCompleted):
            self._tracker.user_spoke()
            self._emit("on_input_transcription", event.transcript)
            if event.usage is not None:
                self._emit("on_realtime_llm_usage", event.usage)
        elif isinstance(event, ItemAnnounced):
            self._unconfirmed.pop(event.item.id, None)
        elif isinstance(event, ServerError):
            error = TransportError(
                f"the service reported an error: {event.code or event.error_type}"
            )
            self._emit("on_error", TransportErrorEvent(error, recoverable=True))
        elif isinstance(event, Malformed):
            logger.warning("{}: a malformed server event ({})", self, event.reason)

    def _function_call(self, now: float, event: FunctionArgumentsDone) -> None:
        if self._tracker.suppressing:
            return  # a cancelled answer's call: never to be answered
        try:
            args = json.loads(event.arguments) if event.arguments else {}
        except ValueError:
            args = {"_raw": event.arguments}
        if not isinstance(args, dict):
            args = {"_raw": args}
        self._calls[event.call_id] = event.name
        self._apply(self._tracker.tool_calls(now, [event.call_id]))
        self._emit("on_tool_call", [ToolCall(event.call_id, event.name, args)])

    def _response_done(self, now: float, event: ResponseDone) -> None:
        if event.usage is not None:
            self._emit("on_realtime_llm_usage", event.usage)
        ours = self._cancelled == event.response_id
        if ours:
            self._cancelled = None
        if event.status == "cancelled" and not ours:
            # The server's VAD heard the user over the answer (``turn_detected``).
            self._apply(self._tracker.interrupted(now))
        else:
            if event.status == "completed":
                self._run(self._machine.send(Served()))
            self._apply(self._tracker.generation_complete(now))
            self._apply(
                self._tracker.turn_complete(
                    now, tools_pending=bool(self._calls), tool_call_may_follow=False
                )
            )
        if self._switch_deferred:
            self._deferred_switch()

    # --- internals: the generation lifecycle ------------------------------------------------

    def _apply(self, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, GenerationStarted):
                self._emit("on_model_turn_start", effect.generation_id)
                self._emit("on_generation_start", effect.generation_id)
            elif isinstance(effect, GenerationEnded):
                self._emit("on_generation_end", effect.generation_id, effect.reason)
            elif isinstance(effect, FirstAudio):
                self._emit("on_first_audio_chunk")
            elif isinstance(effect, TextDone):
                self._emit("on_text_done")
            elif isinstance(effect, TurnCompleted):
                self._emit("on_turn_complete", effect.server_turn_id)
            elif isinstance(effect, TurnInterrupted):
                self._emit("on_interrupted", effect.server_turn_id)
            elif isinstance(effect, ReasoningStarted):
                self._emit("on_reasoning_start")
            elif isinstance(effect, ReasoningDone):
                self._emit("on_reasoning_done", ReasoningInfo(effect.duration))
        self._schedule_tick()

    def _schedule_tick(self) -> None:
        if self._tick is not None:
            self._tick.cancel()
            self._tick = None
        deadline = self._tracker.next_deadline
        if deadline is not None and not self._closed:
            loop = asyncio.get_running_loop()
            self._tick = loop.call_at(
                deadline, lambda: self._apply(self._tracker.tick(self._now()))
            )

    # --- small services ---------------------------------------------------------------------

    @staticmethod
    def _now() -> float:
        return asyncio.get_running_loop().time()

    def _emit(self, name: str, *args: Any) -> None:
        """Call the framework's callback ``name`` (after the telemetry's hook of that name,
        if it has one); one that raises is logged and changes nothing else."""
        hook = getattr(self._telemetry, name, None)
        if hook is not None:
            hook(*args)  # the telemetry's hooks catch their own errors
        callback: Callable[..., None] | None = getattr(self, name)
        if callback is None:
            return
        try:
            callback(*args)
        except Exception:
            logger.exception("{}: a callback raised; the transport goes on", self)
