"""``GeminiLiveTransport``: ``LLMTransport`` for Gemini Live over google-genai."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import replace
from typing import Any, ClassVar, Final, Literal, Self, cast

from google import genai
from google.genai import types
from loguru import logger

from realtime_resumption.failures import RetryPolicy
from realtime_resumption.gemini import validation
from realtime_resumption.gemini.close_codes import INVALID_ARGUMENT
from realtime_resumption.gemini.connection import ConnectionHooks, LiveConnection
from realtime_resumption.gemini.dialling import Dialler
from realtime_resumption.gemini.input_path import InputPath
from realtime_resumption.gemini.live_models import ModelTraits, traits
from realtime_resumption.gemini.live_options import (
    DEFAULT_COMPRESSION,
    DEFAULT_MODEL,
    DEFAULT_SETUP_TIMEOUT,
    Auth,
    CredentialProvider,
    LiveOptions,
    StoreOptions,
    check_arguments,
    normalise_tools,
)
from realtime_resumption.gemini.messages import ClientMessage, context_updates_supported
from realtime_resumption.gemini.observed import observed
from realtime_resumption.gemini.persistence import Persister, Preload, StoreStats
from realtime_resumption.gemini.receive import Receiver
from realtime_resumption.gemini.rotation import DEFAULT_RETRY_BUDGET, Opened, Rotation
from realtime_resumption.gemini.state import TransportState
from realtime_resumption.gemini.switchover import Switchover
from realtime_resumption.gemini.watchdog import (
    DEFAULT_RESUME_WATCHDOG,
    UserTurnRetainer,
    is_speech,
)
from realtime_resumption.generation import (
    CANCEL_BOUND,
    TOOL_CALL_GRACE,
    GenerationEnded,
    GenerationTracker,
)
from realtime_resumption.handles import HandleRef
from realtime_resumption.history import ConversationHistory, HistoryLimits
from realtime_resumption.move_reports import (
    HandleKind,
    MoveOutcome,
    MoveReason,
    MoveReport,
)
from realtime_resumption.outbox import OutboxLimits, ReplayScope
from realtime_resumption.redaction import filter_websockets_headers, secret
from realtime_resumption.resumption import ResumptionOptions
from realtime_resumption.store import LeaseLostError, SessionStore, process_store
from realtime_resumption.telemetry import AVAILABLE as _TELEMETRY_AVAILABLE
from realtime_resumption.telemetry import SessionTelemetry, Telemetry, default_telemetry
from realtime_resumption.tool_calls import ToolCallTracker
from realtime_resumption.transport import (
    AudioFormatSpec,
    CancelResponseOptions,
    ConnectionLifecycleEvent,
    ContentTurn,
    DialAbandonedError,
    GenerationEndReason,
    GenerationOverrides,
    GenerationSettings,
    MessageTooLargeError,
    NotConnectedError,
    ProviderEvidenceEvent,
    RealtimeLLMUsage,
    ReasoningInfo,
    ReconnectState,
    ReplayItem,
    ResponseModality,
    RetainedUserTurn,
    SessionLostError,
    SessionUpdate,
    ToolCall,
    ToolResult,
    TransportCapabilities,
    TransportDiagnostics,
    TransportError,
    TransportErrorEvent,
    TransportUsageMetadata,
)

INPUT_SAMPLE_RATE: Final = 16_000
OUTPUT_SAMPLE_RATE: Final = 24_000
ABORT_TIMEOUT: Final = 5.0
"""Seconds ``abort_incumbent`` gives the incumbent's close before reporting ``forced``."""
DRAIN_TIMEOUT: Final = 1.0
"""Seconds queued messages get to reach the socket when the transport closes a connection."""
CLOSE_TOO_BIG: Final = 1009
"""The WebSocket close code for a message larger than the peer takes."""
DISCONNECT_TIMEOUT: Final = 10.0
"""Seconds ``disconnect`` takes at most, whatever the connections and the network do."""
HANDOVER_TIMEOUT: Final = 5.0
"""Seconds ``hand_over`` waits for the answer in progress to finish."""
_INSTANCES: Final = itertools.count(1)


class GeminiLiveTransport:
    """Gemini Live as an ``LLMTransport``: one session, over as many connections as it takes.

    Construction mirrors the stock integrations: ``api_key`` (Gemini API) or ``vertexai`` with
    ``project``, ``location`` and ``credentials`` (Vertex AI), or a ready ``client``; the model
    and voice; ``response_modality`` (``audio``, or ``text`` for an external TTS); the system
    instruction; ``tools`` as google-genai ``Tool``/``FunctionDeclaration`` objects or dicts;
    transcription flags; ``realtime_input_config`` (an SDK type); ``context_window_compression``
    (an SDK type: a sliding window by default, so calls outlive the service's 15-minute cap on
    audio sessions; None turns compression off); ``generation`` (temperature, token limit,
    sampling, thinking, ...: a
    ``GenerationSettings``, changed mid-call through ``update_session``); ``http_options``. ``credential_provider`` supplies an expiring credential before
    every dial. ``setup_timeout`` bounds each dial: the SDK would wait forever for
    ``setupComplete``. ``transparent`` asks Vertex AI for ``lastConsumedClientMessageIndex``
    (the Gemini API refuses it). ``initial_history_in_client_content`` lets Gemini 3.x models
    take history through ``replay_history``. What the service does not say of the model is
    taken from its documentation by the model's version (``gemini.live_models``): the 3.8
    family runs a function call not declared ``BLOCKING`` without holding its answer, takes
    history mid-session, and on Vertex AI takes a new instruction and tool list in the
    session; ``in_session_updates`` and ``mid_session_client_content`` override the last two
    (None: by the model). ``secrets`` are more strings to keep out of logs
    and errors (the key behind a ready ``client``).

    Rotation (on by default; ``rotation=False`` turns it off): the setup always asks for
    session resumption, and the transport moves the session to a new connection by itself —
    at the next resumable point after a ``goAway`` (``resumption`` times it; see
    ``SessionResumption``), after a lost connection, when a setup change needs a new
    connection, and when a credential expires — with the guarantees of
    ``realtime_resumption.gemini.rotation``. ``input_buffer`` bounds the input held across a
    move (``OutboxLimits``: 30 s of audio, 30 video frames, 60 s of age; past them the oldest
    audio is dropped and counted, never text or tool results). ``retry_budget`` (20) is the
    number of failed connection attempts the whole session may spend, or a ``RetryPolicy``
    (also bounding them in time, with the probation and the jitter of retries). ``resume_watchdog``
    (8 s; None turns it off) bounds how long a resumed connection may leave the user's turn
    unanswered before the transport re-sends the turn once, then rebuilds the session. With
    ``rotation=False`` the transport only reports ``goAway`` and closes; ``reconnect`` still
    moves the session on request.

    Calls that survive the worker: with ``session_key`` (the app's id of the call) the
    transport keeps its session's state in ``store`` (a ``SessionStore``; the process's
    ``MemoryStore`` by default, ``RedisStore`` to outlive the process), written in the
    background at most once per ``store_options.write_interval``, encrypted with
    ``store_options.encryption_key`` when one is given; ``connect`` then takes over a call
    another process left there (see ``connect``), and ``disconnect`` deletes it. Store errors
    are reported through ``on_error`` (recoverable) and never stop the call.

    Callbacks are attributes (``None`` by default), plain functions called on the event loop
    from the receive loop; one that raises is logged and changes nothing else. ``on_move``
    reports each finished move (``MoveReport``), ``on_move_started`` each move that begins.
    Sends are synchronous and never block: they are queued in order and written to the
    current connection, held during a move and delivered to the next connection exactly once;
    they raise ``NotConnectedError`` only when no session is up (before ``connect``, after
    ``disconnect`` or a lost session). Call everything from the event loop's thread.

    Telemetry: with the OpenTelemetry API installed, every move, connection and answer is a
    span and the moves are metrics (``realtime_resumption.telemetry``), on the global
    providers (a no-op until the app configures an SDK) or on ``telemetry`` (a
    ``Telemetry``); ``telemetry=False`` turns it off. ``telemetry`` (the property) lets an
    adapter nest the spans under the framework's.
    """

    CAPABILITIES: ClassVar[TransportCapabilities] = TransportCapabilities(
        turn_detection=True,
        user_transcription=True,
        session_resumption=True,
        context_compression=True,
        grounding_metadata=True,
        text_response_modality=True,
        parallel_tool_calls=True,
        quiescible=True,
        playback_gated_turn_complete=True,
    )
    AUDIO_FORMAT: ClassVar[AudioFormatSpec] = AudioFormatSpec(
        input_sample_rate=INPUT_SAMPLE_RATE, output_sample_rate=OUTPUT_SAMPLE_RATE
    )

    def __init__(
        self,
        *,
        api_key: str | None = None,
        vertexai: bool = False,
        project: str | None = None,
        location: str | None = None,
        credentials: object | None = None,
        model: str = DEFAULT_MODEL,
        voice: str | None = None,
        language: str | None = None,
        response_modality: ResponseModality = "audio",
        system_instruction: str | None = None,
        tools: Sequence[object] = (),
        input_audio_transcription: bool = True,
        output_audio_transcription: bool = True,
        realtime_input_config: types.RealtimeInputConfig | None = None,
        context_window_compression: types.ContextWindowCompressionConfig
        | None = DEFAULT_COMPRESSION,
        generation: GenerationSettings | None = None,
        http_options: types.HttpOptions | None = None,
        credential_provider: CredentialProvider | None = None,
        client: genai.Client | None = None,
        setup_timeout: float = DEFAULT_SETUP_TIMEOUT,
        transparent: bool = False,
        initial_history_in_client_content: bool = False,
        in_session_updates: bool | None = None,
        mid_session_client_content: bool | None = None,
        tool_call_grace: float = TOOL_CALL_GRACE,
        resumption: ResumptionOptions | None = None,
        input_buffer: OutboxLimits | None = None,
        retry_budget: int | RetryPolicy = DEFAULT_RETRY_BUDGET,
        resume_watchdog: float | None = DEFAULT_RESUME_WATCHDOG,
        rotation: bool = True,
        history_limits: HistoryLimits | None = None,
        secrets: Sequence[str] = (),
        telemetry: Telemetry | bool = True,
        store: SessionStore | None = None,
        session_key: str | None = None,
        store_options: StoreOptions | None = None,
    ) -> None:
        vertex = check_arguments(
            response_modality=response_modality,
            setup_timeout=setup_timeout,
            client=client,
            api_key=api_key,
            credentials=credentials,
            http_options=http_options,
            credential_provider=credential_provider,
            vertexai=vertexai,
            project=project,
            location=location,
            transparent=transparent,
            has_store=store is not None,
            session_key=session_key,
        )
        self._id = next(_INSTANCES)
        self._observer: SessionTelemetry | None = None
        if telemetry is True and _TELEMETRY_AVAILABLE:
            telemetry = default_telemetry()
        if isinstance(telemetry, Telemetry):
            self._observer = telemetry.session(
                provider="gcp.vertex_ai" if vertex else "gcp.gemini", model=model
            )
        if api_key:
            api_key = secret(api_key)
        filter_websockets_headers()
        self._auth = Auth(
            api_key=api_key,
            vertexai=vertex,
            project=project,
            location=location,
            credentials=credentials,
            http_options=http_options,
        )
        options = LiveOptions(
            model=model,
            voice=voice,
            language=language,
            response_modality=response_modality,
            system_instruction=system_instruction,
            tools=normalise_tools(tools),
            input_audio_transcription=input_audio_transcription,
            output_audio_transcription=output_audio_transcription,
            realtime_input_config=realtime_input_config,
            context_window_compression=context_window_compression,
            initial_history_in_client_content=initial_history_in_client_content,
            generation=generation or GenerationSettings(),
        )
        self._secrets: set[str] = {api_key} if api_key else set()
        self._secrets.update(secret(s) for s in secrets if s)
        self._tracker = GenerationTracker(tool_call_grace=tool_call_grace)
        self._input = InputPath(input_buffer, written=self._on_written)
        self._tools = ToolCallTracker()
        self._history = ConversationHistory(history_limits)
        self._retained_turn = UserTurnRetainer(INPUT_SAMPLE_RATE)
        self._s = TransportState(
            # The parts call the framework's callbacks through the session: with telemetry,
            # its hooks see each call first (the transport's attributes stay the framework's).
            self if self._observer is None else cast(Self, observed(self, self._observer)),
            options=options,
            secrets=self._secrets,
            tracker=self._tracker,
            input_path=self._input,
            tools=self._tools,
            history=self._history,
            retained_turn=self._retained_turn,
            credential_expired=self._credential_expired,
        )
        self._s.traits = traits(
            model,
            vertex=vertex,
            in_session_updates=in_session_updates,
            mid_session_client_content=mid_session_client_content,
        )
        self._updated_in_session: LiveConnection | None = None
        """The connection a setup change was last written to in the session."""
        self._without_id = self._s.without_id
        self._s.results_without_id = vertex
        self._hooks = ConnectionHooks(
            message=self._on_message,
            receive_error=self._on_receive_error,
            written=self._input.written,
            write_failed=self._on_write_failed,
            closed=self._on_closed,
        )
        self._dialler = Dialler(
            self._s,
            hooks=self._hooks,
            auth=self._auth,
            client=client,
            credential_provider=credential_provider,
            setup_timeout=setup_timeout,
            transparent=transparent,
        )
        self._switchover = Switchover(
            self._s,
            self._dialler,
            tracker=self._tracker,
            input_path=self._input,
            tools=self._tools,
            history=self._history,
            deliver=self._deliver,
            turn_cut=self._turn_cut,
        )
        policy = (
            retry_budget
            if isinstance(retry_budget, RetryPolicy)
            else RetryPolicy(attempts=retry_budget)
        )
        self._rotation = Rotation(
            self._s,
            self._dialler,
            self._switchover,
            options=resumption if resumption is not None else ResumptionOptions(),
            policy=policy,
            resume_watchdog=resume_watchdog,
            enabled=rotation,
            replay_turn=self._replay_retained_turn,
        )
        self._receiver = Receiver(
            self._s,
            self._rotation,
            tracker=self._tracker,
            input_path=self._input,
            tools=self._tools,
            history=self._history,
            retained_turn=self._retained_turn,
        )
        self._persister = (
            Persister(
                self._s,
                store if store is not None else process_store(),
                session_key,
                store_options or StoreOptions(),
                vertex=vertex,
                report=self._store_error,
                describe=repr(self),
            )
            if session_key is not None
            else None
        )
        self._stranded: set[LiveConnection] = set()
        self._disconnected = False
        self._connecting = False
        self._realtime_sent = False
        self._closing: asyncio.Task[None] | None = None
        self._claim_held: list[tuple[ClientMessage, ReplayScope]] | None = None
        """Sends made after ``connect`` began and before the session's input is ready (a
        disconnect still closing, the store answering); None otherwise."""
        self._taken_over = False
        self._handed_over = False
        """``hand_over`` began: the call is another process's; no send is taken any more."""

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
        """A move between connections finished (outcome resumed, rebuilt or lost)."""
        self.on_move_started: Callable[[MoveReason, HandleKind], None] | None = None
        """A move began: why, and which kind of handle it resumes from (``none``: rebuild)."""

    def __repr__(self) -> str:
        return f"GeminiLiveTransport#{self._id}"

    @property
    def telemetry(self) -> SessionTelemetry | None:
        """The session's telemetry (None when turned off or without OpenTelemetry): set its
        ``parent``/``generation_parent`` to nest the spans under a framework's."""
        return self._observer

    # --- static facts -------------------------------------------------------------------------

    @property
    def capabilities(self) -> TransportCapabilities:
        """What Gemini Live offers (no in-place updates, no truncation, no elicit)."""
        return self.CAPABILITIES

    @property
    def audio_format(self) -> AudioFormatSpec:
        """16 kHz PCM16 mono in, 24 kHz PCM16 mono out."""
        return self.AUDIO_FORMAT

    @property
    def _active(self) -> bool:
        return self._s.active

    @property
    def _current(self) -> LiveConnection | None:
        return self._s.current

    @property
    def _options(self) -> LiveOptions:
        return self._s.options

    @property
    def is_connected(self) -> bool:
        """A session is up and takes input: written at once, or held during a move."""
        return self._active

    @property
    def moving(self) -> bool:
        """A move to a new connection is in progress (sends are held or replayed)."""
        return self._active and self._rotation.moving

    @property
    def current_dial_gen(self) -> int:
        """Advances per dial, when the current dial fails, and on ``abort_incumbent``."""
        return self._dialler.gen

    @property
    def current_transport_generation(self) -> int:
        """Advances only when a connection completes its setup."""
        return self._dialler.transport_generation

    @property
    def resumption_handle(self) -> str | None:
        """The latest handle the provider marked resumable; a new session resumes from it."""
        return self._s.handle

    @property
    def setup(self) -> LiveOptions:
        """The setup the next connection gets: the options given, with every session update
        applied. After the service refused a changed setup (``SetupRefusedError`` through
        ``on_error``), the one that last worked: a framework's view of its settings follows it
        back from there."""
        return self._s.options

    @property
    def pending_setup_change(self) -> bool:
        """A session update changed the setup since the current connection opened; the next
        connection carries it (with rotation, a move at the next resumable point)."""
        return self._s.setup_stale

    @property
    def taken_over(self) -> bool:
        """The last ``connect`` took over a call another process left in the store: the
        session has its conversation already (a framework does not seed it again)."""
        return self._taken_over

    @property
    def store_stats(self) -> StoreStats | None:
        """With a session store: its writes, their bytes and the store errors; None without."""
        p = self._persister
        return StoreStats(p.writes, p.written_bytes, p.errors) if p is not None else None

    @property
    def pending_tool_calls(self) -> tuple[str, ...]:
        """Tool calls of the live session waiting for their result (or its write)."""
        return tuple(self._tools.pending_ids() + self._tools.unsent_ids())

    @property
    def model_traits(self) -> ModelTraits:
        """What the transport assumes of the model (``gemini.live_models``), as constructed,
        and without in-session updates once the service refused one."""
        return self._s.traits

    def non_blocking(self, function: str) -> bool:
        """Whether a call of ``function`` lets the model talk on while it runs (declared
        ``NON_BLOCKING`` by the live connection's setup, or not ``BLOCKING`` on a model whose
        calls are non-blocking by default)."""
        return self._tools.non_blocking(function)

    # --- connecting ---------------------------------------------------------------------------

    def connect(
        self,
        config: SessionUpdate | None = None,
        *,
        retry: bool | Sequence[float] = False,
        resumption_handle: str | None = None,
    ) -> Coroutine[Any, Any, None]:
        """Open a connection (resuming from ``resumption_handle``, else from the transport's
        latest handle when there is one) and return once its setup completed. ``config`` is
        applied first.

        The connect begins when ``connect()`` is called, not when it is awaited: sends are
        taken from then on, held (``input_buffer`` bounds them, as during a move) and
        delivered once the setup completed; the dial starts when it is awaited, with the
        setup as it is then (a ``update_session`` made in between is in it). A connect that
        fails for good discards them.

        ``retry``: False (the default) dials once. True retries a failed dial as a move's
        attempts are retried, under the same failure policy: after each of
        ``resumption.retry_delays`` (jittered), within ``retry_budget``; 401/403 and the
        other refusals of the request fail at once. A sequence of seconds gives the pauses
        instead (LiveKit's ``conn_options``: ``(0, retry_interval, ...)``). Each failure that
        is retried is reported through ``on_error`` (recoverable); input sent meanwhile waits
        for the connection. A handle the service refuses fails the connect: it never opens a
        fresh session in its place.

        With a store, ``connect`` first takes the call's lease (waiting for a held one as
        ``store_options`` says: by default a little over the lease's time to live, long enough
        for a crashed process's to lapse) and, when the store holds the call, takes it over: the
        stored setup, the session resumed from the stored handle with the stored input
        replayed first (then what was sent meanwhile) and its open tool calls re-issued
        (``on_tool_call``), or, when the handle expired or is refused, a fresh session seeded
        with the stored conversation; reported through ``on_move`` (reason ``takeover``). The
        stored handle's dials follow their own pauses (``TAKEOVER_RETRY_DELAYS``), whatever
        ``retry`` says.

        Raises ``ConnectError`` when the dial fails (its ``failure`` says why),
        ``DialAbandonedError`` when ``abort_incumbent`` or ``disconnect`` overtook it,
        ``LeaseHeldError`` when another process drives the call, ``TransportError`` when
        already connected (or connecting), and ``ValueError`` for a ``retry`` that is no
        pauses.
        """
        if self._active or self._connecting or self._claim_held is not None:
            raise TransportError(f"{self} is already connected")
        delays = self._connect_delays(retry)
        handle = self._s.handles.enter(resumption_handle) if resumption_handle else None
        # Sends made before the session's input is ready (a disconnect still closing, the
        # store answering) are held here: they go after whatever the session gets first.
        self._claim_held = []
        self._taken_over = self._handed_over = False
        return self._connect(config, delays, handle, report_retries=retry is not False)

    def _connect_delays(self, retry: bool | Sequence[float]) -> tuple[float, ...] | None:
        """The pauses before each attempt of a connect (None: the session's own)."""
        if retry is False:
            return (0.0,)
        if retry is True:
            return None
        delays = tuple(retry)
        if not delays or any(
            isinstance(d, bool) or not isinstance(d, int | float) or not 0 <= d < math.inf
            for d in delays
        ):
            raise ValueError(f"retry must be True, False or pauses in seconds, not {retry!r}")
        return delays

    async def _connect(
        self,
        config: SessionUpdate | None,
        delays: tuple[float, ...] | None,
        handle: HandleRef | None,
        *,
        report_retries: bool,
    ) -> None:
        persister = self._persister
        if persister is None:
            try:
                if config is not None:
                    self._s.update_setup(self._options.updated(config))
                await self._open(
                    handle or self._s.latest, delays=delays, report_retries=report_retries
                )
            finally:
                self._claim_held = None
            return
        self._disconnected = False
        try:
            stored = await persister.claim()
            if self._disconnected:
                raise DialAbandonedError(f"{self}: disconnect overtook connect")
            if stored is not None:
                self._s.update_setup(stored.setup.applied_to(self._options))
            if config is not None:
                self._s.update_setup(self._options.updated(config))
            if stored is not None:
                self._taken_over = True
                await persister.take_over(stored, self._take_claim_held, self._open_taken_over)
            else:
                await self._open(
                    handle or self._s.latest, delays=delays, report_retries=report_retries
                )
        except BaseException:
            self._claim_held = None
            # The stored state stays for a later attempt; only the lease is given up.
            await persister.end(forget=False)
            raise
        persister.start()

    async def hand_over(self, timeout: float = HANDOVER_TIMEOUT) -> None:
        """Hand the call to another process (a deploy, a drain): once the answer in progress
        (its tool calls included) finished, or ``timeout`` passed, save the call's state, take
        no more input (a send raises ``NotConnectedError`` from then on: nothing accepted is
        left out), give the lease up and close the connection without deleting the record, so
        the next process that connects with the key takes the call over with nothing lost.

        Raises ``TransportError`` without a store or a session, and ``StoreError`` when the
        final save failed: the call then goes on here (saving again each beat).
        """
        persister = self._persister
        if persister is None:
            raise TransportError(f"{self}: hand_over needs a store and a session_key")
        if not self._active:
            raise NotConnectedError(f"{self} is not connected")
        generation_id = self._tracker.generation_id
        await persister.hand_over_call(
            timeout,
            self._s.wait_for_end(generation_id) if generation_id is not None else None,
            self._stop_input,
        )
        await self.disconnect()

    def _take_claim_held(self) -> list[tuple[ClientMessage, ReplayScope]]:
        """What was sent before the session's input was ready (the store answering): it goes
        after the stored input, whichever dial takes the call."""
        held, self._claim_held = self._claim_held or [], None
        return held

    def _stop_input(self) -> None:
        self._handed_over = True

    async def forget_handed_over(self) -> None:
        """The call this transport handed over ended after all (nobody will take it over):
        delete its stored state, unless another process took the call over meanwhile. Within
        a bound; a store failure is logged (the record then expires by itself)."""
        if self._persister is not None and self._handed_over:
            await self._persister.forget()

    def disconnect(self) -> Coroutine[Any, Any, None]:
        """End the session and everything the transport runs. Idempotent; never raises but
        the caller's own cancellation; returns within ``DISCONNECT_TIMEOUT``.

        A move in progress is abandoned (reported as lost); queued messages get
        ``DRAIN_TIMEOUT`` to reach the socket; the open answer ends as disconnected;
        ``on_close`` reports the close. A dial in flight is abandoned.

        The close begins when ``disconnect()`` is called, not when it is awaited, and runs in
        a task of its own, within the same bound (a later ``connect`` waits for it): a caller
        cancelled at any point, even a task cancelled before its first step, never leaves a
        socket open or its tasks running. Awaiting waits for the close; the caller's
        cancellation still propagates.
        """
        try:
            closing = self._begin_close()
        except RuntimeError:
            # No loop runs (``loop.run_until_complete(transport.disconnect())``): the close
            # begins when the loop runs the coroutine.
            return self._close_when_run()
        return self._closed_by(closing)

    def _begin_close(self) -> asyncio.Task[None]:
        """The close task, started unless one runs already (RuntimeError with no loop)."""
        loop = asyncio.get_running_loop()
        self._disconnected = True
        closing = self._closing
        if closing is None or closing.done():
            closing = self._closing = loop.create_task(
                self._disconnect(), name=f"gemini-live-disconnect-{self._id}"
            )
        return closing

    async def _close_when_run(self) -> None:
        await self._closed_by(self._begin_close())

    @staticmethod
    async def _closed_by(closing: asyncio.Task[None]) -> None:
        # Shielded, as websockets closes its sockets: the caller's cancellation stops its wait,
        # never the close.
        await asyncio.shield(closing)

    async def _disconnect(self) -> None:
        try:
            async with asyncio.timeout(DISCONNECT_TIMEOUT):
                if self._persister is not None:
                    # The call is over: nothing is left to take over.
                    await self._persister.end()
                await self._close_all()
        except Exception as error:
            # Whatever is left is dropped below: disconnect must end the session regardless.
            logger.warning("{}: disconnect did not finish cleanly ({})", self, type(error).__name__)
        self._force_closed()
        if self._observer is not None:
            self._observer.close()

    async def _close_all(self) -> None:
        await self._rotation.close("the client closed the session during the move")
        await self._dialler.abandon(ABORT_TIMEOUT)
        conn = self._current
        if conn is not None:
            await self._retire(conn, "closed by the client")
        elif self._active:
            self._s.close(1000, "closed by the client")
        for candidate in self._switchover.settling:
            self._switchover.drop(candidate)
        self._s.cancel_timers()
        self._s.release_waiters()
        while self._s.tasks:
            await asyncio.wait(self._s.tasks, timeout=ABORT_TIMEOUT)
        await self._dialler.close_client(ABORT_TIMEOUT)

    def _force_closed(self) -> None:
        """After a disconnect that ran out of time or failed: nothing may stay up."""
        self._rotation.abandon("the client closed the session during the move")
        if self._active:
            self._s.close(1000, "closed by the client")
        self._s.cancel_timers()
        self._s.release_waiters()
        for task in self._s.tasks:
            task.cancel()

    async def reconnect(self, state: ReconnectState | None = None) -> None:
        """Move the session to a new connection now.

        Connected: a move (reason ``requested``) through the rotation machinery, resuming from
        the latest handle the session issued — make-before-break, input held and replayed —
        or, with no handle, a fresh session seeded with the conversation history (the
        transport's own, else ``state.conversation_history``). ``state.resumption_handle`` is
        not used then: the transport cannot know what a foreign handle's snapshot lacks.
        Returns once the move finished; raises ``SessionLostError`` when it was lost.

        Not connected: opens a session resuming from ``state.resumption_handle`` (else from
        ``resumption_handle``); a fresh one gets ``state.conversation_history`` replayed.
        """
        history = tuple(state.conversation_history) if state is not None else ()
        if not self._active:
            handle = (
                self._s.handles.enter(state.resumption_handle)
                if state and state.resumption_handle
                else self._s.latest
            )
            await self._open(handle)
            if handle is None and history:
                self.replay_history(history)
            return
        if state is not None and state.resumption_handle not in (None, self._s.handle):
            logger.warning("{}: reconnect ignores a handle the session did not issue", self)
        if history and not self._s.can_rebuild():
            self._s.seeded = history
        report = await self._rotation.request(MoveReason.REQUESTED)
        if report.outcome is MoveOutcome.LOST:
            raise SessionLostError(report.error or "the move was lost")

    def abort_incumbent(self) -> asyncio.Task[Literal["closed", "forced"]]:
        """Strand the incumbent now and close it within ``ABORT_TIMEOUT``.

        Before returning: the dial generation advances (so nothing from the incumbent, from a
        move or reconnect in flight or from a dial that completes later is delivered or
        installed), a move in progress is abandoned (reported as lost), the incumbent is
        detached, the open answer ends as disconnected, and the resumption handle is dropped
        (a recovery dial must not resume a wedged turn). No ``on_close`` follows. The returned
        task never raises: ``closed`` when the close completed, ``forced`` on timeout or error.
        """
        self._dialler.advance()
        s = self._s
        conn = s.strand()
        if conn is not None:
            self._stranded.add(conn)
        self._stranded.update(self._switchover.settling)
        moves = self._rotation.abandon("the incumbent was aborted during the move")
        s.deactivate()
        self._input.clear()
        self._tools.clear()
        task = asyncio.create_task(self._close_stranded(conn, moves))
        s.own(task)
        return task

    async def _open(
        self,
        handle: HandleRef | None,
        *,
        delays: tuple[float, ...] | None = (0.0,),
        reason: MoveReason = MoveReason.REQUESTED,
        kind: HandleKind = HandleKind.NONE,
        preload: Callable[[bool], Preload] | None = None,
        report_retries: bool = False,
    ) -> Opened:
        """Start a session: ``connect``, ``reconnect`` while not connected, or a takeover.
        The rotation carries out its dials (``Rotation.open``: ``delays`` the pauses before
        each, None the session's ``retry_delays``); each installs the connection it set up.
        ``preload(resumed)``: what a takeover's session gets first, before what was sent
        meanwhile (a resumed one its stored input, a rebuilt one its stored conversation):
        with it a refused or spent handle opens a fresh session."""
        if self._closing is not None and not self._closing.done():
            # A disconnect still closing (its caller was cancelled): let it finish first.
            await asyncio.shield(self._closing)
        self._rotation.reset()
        self._input.clear()
        self._tools.clear()
        self._retained_turn.clear()
        self._realtime_sent = False
        self._disconnected = False
        self._connecting = True
        filled = [handle is not None]
        for message, scope in (
            preload(filled[0]) if preload is not None else self._take_claim_held()
        ):
            self._input.submit(message, self._now(), scope)

        async def dial(attempt: HandleRef | None) -> None:
            if preload is not None and filled[0] != (attempt is not None):
                # A takeover rebuilds: its session gets the stored conversation instead (what
                # was sent during the failed resumes goes with them, as after any failed dial).
                filled[0] = attempt is not None
                self._input.clear()
                for message, scope in preload(filled[0]):
                    self._input.submit(message, self._now(), scope)
            await self._dial_and_install(attempt)

        try:
            return await self._rotation.open(
                reason,
                handle,
                kind,
                dial,
                delays=delays,
                may_rebuild=preload is not None,
                rebuild_when_spent=preload is not None,
                on_retry=self._connect_retried if report_retries else None,
            )
        except BaseException:
            self._input.clear()
            raise
        finally:
            self._connecting = False

    async def _open_taken_over(
        self,
        handle: HandleRef | None,
        kind: HandleKind,
        delays: tuple[float, ...],
        preload: Callable[[bool], Preload],
    ) -> Opened:
        """A takeover's session (``Persister.take_over``): see ``_open``."""
        return await self._open(
            handle, delays=delays, reason=MoveReason.TAKEOVER, kind=kind, preload=preload
        )

    def _connect_retried(self, error: BaseException) -> None:
        """A failed dial of ``connect`` is retried: the framework hears of it."""
        if isinstance(error, Exception):
            self._s.call(self.on_error, TransportErrorEvent(error, recoverable=True))

    async def _dial_and_install(self, handle: HandleRef | None) -> None:
        """One dial of ``_open``: on success the connection is installed and the session
        takes input from it."""
        if handle is None:
            self._history.clear()
            self._s.seeded = ()
        conn = await self._dialler.dial(handle)
        self._tools.connected(conn.dial_gen, resumed_from=None)
        if handle is None:
            self._s.forget_handle()
            # Nothing seeds this session: history replayed while it dialled goes to it as sent.
            self._input.attach_fresh(conn, self._now(), seeded=False)
        else:
            # Until the session issues a handle of its own, the one it resumed from is its
            # latest, as after a move: a store saves it, a move or another takeover resumes
            # from it, and either replays everything sent since (that session lacks it all).
            self._s.resumable(handle)
            self._tools.handle_recorded(handle, conn.dial_gen)
            self._input.record_foreign_handle(handle)
            self._input.attach_resumed(conn, handle, self._now())
            self._rotation.resumed_from(handle)
        self._s.activate()
        self._s.install(conn, *self._dialler.take(conn))

    def _store_error(self, error: Exception) -> None:
        if isinstance(error, LeaseLostError):
            self._taken_from_here(error)
            return
        self._s.call(self.on_error, TransportErrorEvent(error, recoverable=True))

    def _taken_from_here(self, error: LeaseLostError) -> None:
        """Another process drives the call now (this one stalled past its lease and it took
        the call over): nothing more goes to the service from here, or one call would feed
        two server sessions (or one, interleaved). Input is refused at once, the connection
        closes without writing what it still queued, and ``on_error`` (not recoverable) then
        ``on_close`` say why; the record is the new driver's, left as it is."""
        self._s.lost(error, 1000, "another process took the call over")
        # The rest of the teardown (a move under way, a dial, the client) as ``disconnect``
        # does it; a later ``disconnect`` waits for it.
        self._begin_close()

    # --- the connections: dial, settle, switch, retire ----------------------------------------

    async def _retire(self, conn: LiveConnection, reason: str) -> None:
        """Let ``conn`` write what it queued (within ``DRAIN_TIMEOUT``), end the session on it
        (answer ended as disconnected, ``GenerationClose``, ``on_close``), then close it."""
        await conn.flush(DRAIN_TIMEOUT)
        if self._s.detach(conn):
            self._s.report_generation_close(conn, 1000, reason)
            self._s.close(1000, reason)
        await conn.close()

    def _replay_retained_turn(self) -> bool:
        """Re-send the user's unanswered turn (resume watchdog); False when there is none."""
        text = self._retained_turn.text_turn
        if text is not None:
            self._send(ClientMessage.content((_user_content(text),), True), ReplayScope.CONNECTION)
            return True
        turn = self._retained_turn.audio_turn(self._now())
        return turn is not None and self.replay_user_turn(turn)

    async def _close_stranded(
        self, conn: LiveConnection | None, moves: Sequence[asyncio.Task[Any]]
    ) -> Literal["closed", "forced"]:
        try:
            async with asyncio.timeout(ABORT_TIMEOUT):
                if moves:
                    await asyncio.wait(moves)
                if conn is None:
                    return "closed"
                outcome: Literal["closed", "forced"] = await conn.close()
                return outcome
        except Exception:
            logger.opt(exception=True).debug("{}: closing the stranded {!r} failed", self, conn)
            return "forced"

    def _credential_expired(self, conn: LiveConnection) -> None:
        attempt_id: str = conn.attempt_id
        if conn is not self._current:
            return
        logger.info("{}: the credential of {} expired", self, attempt_id)
        self._s.call(self.on_credential_expiry)
        if conn is not self._current:
            return
        if self._rotation.enabled:
            self._rotation.credential_expired()
        else:
            self._s.own(asyncio.create_task(self._retire(conn, "credential expired")))

    # --- sending: every client message goes through _send -------------------------------------

    def _send(self, message: ClientMessage, scope: ReplayScope = ReplayScope.SESSION) -> None:
        """Queue ``message`` for the session: written at once to the current connection, or
        held during a move. The one send path: it counts every message and refuses, with an
        error, what no session can take. ``scope``: which later connections may get it
        again."""
        self._submit(message, scope)
        self._s.feed()

    def _submit(self, message: ClientMessage, scope: ReplayScope = ReplayScope.SESSION) -> None:
        """Queue ``message`` without handing it to a connection yet (see :meth:`_send`)."""
        if not self._takes_input:
            raise self._input.refuse(
                message.kind,
                NotConnectedError(
                    f"{self} is disconnected" if self._disconnected else f"{self} is not connected"
                ),
            )
        try:
            validation.fits(message, f"a {message.kind} message")
        except MessageTooLargeError as error:
            raise self._input.refuse(message.kind, error) from None
        if message.kind not in ("content", "tool_response", "context_update"):
            self._realtime_sent = True
        if self._claim_held is not None:
            self._claim_held.append((message, scope))
            return
        self._input.submit(message, self._now(), scope)

    @property
    def _takes_input(self) -> bool:
        """A session is up, or ``connect`` is dialling its first connection."""
        return not self._handed_over and (
            self._active
            or (self._connecting and not self._disconnected)
            or self._claim_held is not None
        )

    def _client_turn(self, text: str | None) -> None:
        """The client sent a complete user turn (``text`` when it was text)."""
        # An answer in its grace window ends here, before anything the new turn brings: its
        # end is delivered now (deferred, a tool call already on its way could be delivered
        # first, in a generation opened after this one ended).
        self._s.apply_and_schedule(self._tracker.user_turn(self._now()))
        if text:
            self._history.user_text(text)
            self._retained_turn.text(text)
        self._rotation.turn_started()
        self._rotation.user_turn()

    def send_audio(
        self, audio: bytes, *, sample_rate: int = INPUT_SAMPLE_RATE, channels: int = 1
    ) -> None:
        """Send user audio: PCM16 little-endian mono at 16 kHz, as a bytes-like object
        (``TypeError`` otherwise). Other rates or channel counts are refused (resample
        first), and so is a chunk longer than ``input_buffer`` holds (``ValueError``); an
        empty chunk sends nothing."""
        if sample_rate != INPUT_SAMPLE_RATE or channels != 1:
            raise ValueError(
                f"Gemini Live takes 16 kHz mono PCM16; got {sample_rate} Hz, {channels} "
                "channel(s): resample and downmix before sending"
            )
        pcm = validation.pcm16(audio)
        if pcm:
            # Queued first (refused there if the input bounds cannot hold it), handed to the
            # connection after the move has had its say: speech during a move waits for
            # the new connection.
            self._submit(ClientMessage.audio(pcm))
            if self._rotation.moving and is_speech(pcm):
                self._rotation.turn_during_move()
            self._s.feed()
            self._retained_turn.audio(pcm)
            # Speech counts as the user's turn while a resumed connection has not answered
            # (the watchdog), or the connection a move installed has heard nothing yet.
            if (self._rotation.watching or self._rotation.quiet) and is_speech(pcm):
                self._rotation.user_turn()

    def commit_audio(self) -> None:
        """The user's audio stream paused (``audioStreamEnd``): the provider may end the turn."""
        self._send(ClientMessage.audio_stream_end())
        self._rotation.user_turn()

    def send_activity_start(self) -> None:
        """The user began speaking (``activityStart``), for a ``realtime_input_config`` with
        automatic activity detection disabled. Held and replayed across moves like any
        input; an activity open at a move is reopened on the new connection before the
        audio replayed to it."""
        if self._rotation.moving:
            self._rotation.turn_during_move()
        self._send(ClientMessage.activity_start())
        self._s.apply_and_schedule(self._tracker.user_turn(self._now()))
        self._rotation.user_turn()

    def send_activity_end(self) -> None:
        """The user stopped speaking (``activityEnd``): the provider ends the turn."""
        self._send(ClientMessage.activity_end())
        self._rotation.user_turn()

    def clear_audio(self) -> None:
        """Nothing to clear: Gemini keeps no uncommitted input buffer a client can drop."""

    def send_content(self, turns: Sequence[ContentTurn], turn_complete: bool = True) -> None:
        """Send text turns as conversation content (``client_content``). Gemini 3.x models
        refuse content after their first turn: use ``send_live_text`` with them."""
        turns = validation.turns(turns, "send_content")
        contents = tuple(
            types.Content(role=turn.role, parts=[types.Part(text=turn.text)]) for turn in turns
        )
        if not contents:
            raise ValueError("no turns to send: Gemini rejects a content-less request")
        self._send(ClientMessage.content(contents, turn_complete))
        text = "\n".join(turn.text for turn in turns if turn.role == "user" and turn.text)
        if turn_complete:
            self._client_turn(text)
        elif text:
            self._history.user_text(text)

    def send_live_text(self, turns: Sequence[ContentTurn]) -> bool:
        """Send text through realtime input: it ends the user's turn and elicits an answer.
        Several turns are joined into one text, each line prefixed with its role. Never
        raises: False when there is no text, no session, or ``turns`` is not a sequence of
        ``ContentTurn`` (logged as a warning saying why)."""
        try:
            turns = validation.turns(turns, "send_live_text")
        except (TypeError, ValueError) as error:
            logger.warning("{}: live text not sent: {}", self, error)
            return False
        texts = [turn for turn in turns if turn.text]
        if not texts:
            return False
        if len(texts) == 1:
            text = texts[0].text
        else:
            text = "\n".join(f"{turn.role}: {turn.text}" for turn in texts)
        try:
            self._send(ClientMessage.text(text))
        except MessageTooLargeError as error:
            logger.warning("{}: live text not sent: {}", self, error)
            return False
        except TransportError as error:
            logger.debug("{}: live text not sent: {}", self, error)
            return False
        self._client_turn(text)
        return True

    def send_file(self, data: bytes, mime_type: str) -> None:
        """Send an image or a video frame (or audio in its own format) as realtime input.
        Other files go to ``send_inline_file``. ``data`` is bytes-like."""
        data = validation.data(data, "send_file")
        major = validation.mime_type(mime_type, "send_file").split("/", 1)[0].lower()
        if major in ("image", "video"):
            self._send(ClientMessage.media("video", data, mime_type))
        elif major == "audio":
            self._send(ClientMessage.media("audio", data, mime_type))
        else:
            raise ValueError(
                f"realtime input takes images, video and audio, not {mime_type!r}: "
                "use send_inline_file"
            )

    def send_inline_file(self, data: bytes, mime_type: str) -> None:
        """Add a file of any type to the conversation, without completing the user's turn."""
        data = validation.data(data, "send_inline_file")
        mime_type = validation.mime_type(mime_type, "send_inline_file")
        part = types.Part(inline_data=types.Blob(data=data, mime_type=mime_type))
        self._send(ClientMessage.content((types.Content(role="user", parts=[part]),), False))

    def send_tool_result(self, result: ToolResult) -> None:
        """Answer a tool call of the live session. Held during a move like any send.

        Raises ``ToolCallOrphanedError`` when the call belongs to a session a move left
        behind (its answer ended as ``tool_call_orphaned``; the model may ask again), and
        ``UnknownToolCallError`` for a call this session never issued: sending either would
        strand the model. A result for a call the provider cancelled, or a second result for
        a call, is not sent (logged). Anything but a ``ToolResult`` with str ids and a mapping
        response raises ``TypeError``/``ValueError``; so does a response JSON cannot carry
        (``TypeError``; bytes and datetimes are sent as the SDK sends them) and one larger
        than the service takes (``MessageTooLargeError``, a ``ValueError``). The call stays
        open until a result of it reached the socket: after any of these errors, or a result
        the SDK refused at the write, a new result for the same call is sent. (One the service
        refuses as too big closes the connection: the answer is cut, its calls orphaned.)
        """
        result = validation.tool_result(result)
        plain, size = validation.tool_response(result.response)
        result = replace(result, response=plain)
        message = ClientMessage.tool_result(result, size, with_id=result.id not in self._without_id)
        try:
            validation.fits(message, "send_tool_result")
        except MessageTooLargeError as error:
            raise self._input.refuse("tool_response", error) from None
        if not self._active or self._handed_over:
            raise self._input.refuse("tool_response", NotConnectedError(f"{self} is not connected"))
        try:
            if not self._tools.admit_result(result.id):
                return
        except TransportError as error:
            raise self._input.refuse("tool_response", error) from None
        self._input.submit_result(message, result, self._now())
        self._s.feed()

    def trigger_generation(
        self, instructions: str | None = None, overrides: GenerationOverrides | None = None
    ) -> None:
        """Ask for a response. With ``instructions`` they are sent as a user turn that
        elicits it; without, nothing is sent: Gemini answers input and tool results by itself
        and rejects a content-less request. Gemini takes no per-response settings: overrides
        that set one raise ``ValueError`` naming it, and nothing is sent."""
        validation.generation_overrides(overrides)
        if instructions:
            self.send_content([ContentTurn("user", instructions)], turn_complete=True)
        else:
            logger.debug("{}: trigger_generation without instructions sends nothing", self)

    def replay_history(self, items: Sequence[ReplayItem]) -> None:
        """Replay prior turns as quiet context (``client_content``, turn not complete). The
        transport keeps them too, to seed a session it has to rebuild.

        With ``initial_history_in_client_content`` (Gemini 3.x) history is only taken before
        the session's first realtime input, unless the model takes it for the whole session
        (``mid_session_client_content``: gemini-3.8-live); replaying after it otherwise raises
        ``TransportError``.
        """
        items = validation.replay_items(items)
        message = ClientMessage.history(items)
        if message is None:
            return
        if (
            self._takes_input
            and self._options.initial_history_in_client_content
            and not self._s.traits.mid_session_client_content
            and self._realtime_sent
        ):
            raise TransportError(
                "Gemini 3.x takes history only before the connection's first realtime input"
            )
        # A rebuilt session is seeded with these items again, so only a resumed one that
        # lacks them gets this message replayed.
        self._send(message, ReplayScope.RESUMED)
        self._s.seeded += tuple(items)

    def replay_user_turn(self, turn: RetainedUserTurn) -> bool:
        """Send a retained utterance as inline audio with an explicit turnComplete (no server
        VAD involved). False when there is no audio or no session."""
        if not turn.pcm:
            return False
        part = types.Part(
            inline_data=types.Blob(data=turn.pcm, mime_type=f"audio/pcm;rate={turn.sample_rate}")
        )
        try:
            # It restates audio the session log holds: never replayed to a later connection.
            self._send(
                ClientMessage.content((types.Content(role="user", parts=[part]),), True),
                ReplayScope.CONNECTION,
            )
        except TransportError as error:
            logger.debug("{}: retained turn not replayed: {}", self, error)
            return False
        self._client_turn(None)
        return True

    async def update_session(self, update: SessionUpdate) -> None:
        """Apply a session update. Before connecting it shapes the setup. After, where the
        model takes a setup change in the session (``in_session_updates``) and only the
        instructions and tools change, they are sent to the live connection
        (``contextUpdate``): no move, no input held, and later connections are set up with
        them. Otherwise Gemini cannot change a live connection's setup: with rotation the
        session moves (reason ``config``) at the next resumable point to a connection that
        carries it; without, the next connection carries it (see ``pending_setup_change``).
        That is also the way when this google-genai cannot send a context update (2.30), while
        a move is under way, for an instruction removed, and once the service refused one in
        this session (close 1007 on the connection it was sent to: the session moves, set up
        with the change). ``on_cache_bust`` fires when instructions or tools change."""
        options = self._options.updated(update)
        if self._active:
            # The model rebuilds its prompt cache when these change.
            if options.system_instruction != self._options.system_instruction:
                self._s.call(self.on_cache_bust, "instructions_changed")
            if options.tools != self._options.tools:
                self._s.call(self.on_cache_bust, "tools_changed")
        if self._update_in_session(options):
            return
        if self._s.update_setup(options):
            logger.info("{}: session update applies on the next connection", self)
            self._rotation.config_changed()

    def _update_in_session(self, options: LiveOptions) -> bool:
        """Send the change to ``options`` to the live connection as a context update, where
        that is all it takes (see ``update_session``); False, having sent nothing, where a
        new connection must carry it."""
        working = self._s.working
        if (
            not self._s.traits.in_session_updates
            or not self._active
            or self._handed_over
            or working is None
            or self._s.setup_stale
            or self._s.current is None
            or self._rotation.moving
        ):
            return False
        instruction = options.system_instruction
        new_instruction = instruction != working.system_instruction
        new_tools = options.tools != working.tools
        unchanged = replace(
            options, system_instruction=working.system_instruction, tools=working.tools
        )
        if unchanged != working or not (new_instruction or new_tools):
            return False
        if new_instruction and instruction is None:
            return False  # a context update sets an instruction; it cannot remove one
        if not context_updates_supported():
            logger.info(
                "{}: this google-genai cannot send a setup change in the session; "
                "the session moves to a connection set up with it",
                self,
            )
            return False
        message = ClientMessage.context_update(
            instruction if new_instruction else None, options.tools if new_tools else None
        )
        # Later connections are set up with the change: it is never replayed to them.
        self._send(message, ReplayScope.CONNECTION)
        self._s.update_in_session(options)
        logger.info("{}: session update sent in the session", self)
        return True

    async def transfer_session(
        self, update: SessionUpdate, state: ReconnectState | None = None
    ) -> None:
        """Apply ``update`` (see ``update_session``): with rotation the session moves to a
        connection that carries it at the next resumable point (``on_move`` reports it);
        without, the transport reconnects now."""
        await self.update_session(update)
        if not self._rotation.enabled or not self._active:
            await self.reconnect(state)

    async def cancel_response(self, options: CancelResponseOptions | None = None) -> None:
        """Stop the answer in flight. Gemini has no cancel on the wire: the rest of the
        answer's output is suppressed, and it ends as cancelled when the provider's turn ends
        or after 2 s. An answer waiting for its tool results ends at once; a result sent
        after that still goes to the session, and the model's answer to it is suppressed as
        the cancelled answer's (no generation, no output), unless the user begins a turn or
        is heard speaking first. Idempotent; never raises; calls no callback itself (a
        resulting generation end is delivered from the event loop). ``truncate`` is ignored:
        Gemini cannot truncate."""
        try:
            generation_id = self._tracker.generation_id
            effects = self._tracker.cancel(self._now())
            asyncio.get_running_loop().call_soon(self._s.apply_and_schedule, effects)
            if (
                options is not None
                and options.wait_for_done
                and generation_id is not None
                and not any(isinstance(e, GenerationEnded) for e in effects)
            ):
                waiter = self._s.wait_for_end(generation_id)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(CANCEL_BOUND):
                        await waiter
        except Exception:
            logger.exception("{}: cancel_response failed", self)

    async def quiesce(self) -> None:
        """Cancel the answer in flight and stop delivering audio until ``unquiesce``."""
        self._s.quiesced = True
        await self.cancel_response()

    async def unquiesce(self) -> None:
        """Deliver audio again from the next answer."""
        self._s.quiesced = False

    def clear_resumption(self) -> None:
        """Forget the resumption handles: the next dial (or move) opens a fresh server session
        (a move then rebuilds it from the conversation history)."""
        self._s.forget_handle()
        self._rotation.forget_handles()

    def get_active_server_turn_id(self) -> int | None:
        """The active server turn's id, None between turns."""
        turn_id: int | None = self._tracker.active_server_turn_id
        return turn_id

    def get_diagnostics(self) -> TransportDiagnostics:
        """Send counters (current connection and total), transport generation, dial gen, the
        moves (counts per outcome, recent reports) and the input buffer."""
        return TransportDiagnostics(
            sends=self._input.connection_counters(),
            total_sends=self._input.total_counters(),
            transport_generation=self._dialler.transport_generation,
            dial_gen=self._dialler.gen,
            moves=self._rotation.stats(),
            input=self._input.stats(),
        )

    # --- what connections report --------------------------------------------------------------

    def _on_message(self, conn: LiveConnection, message: types.LiveServerMessage) -> None:
        if self._switchover.defer(conn, message):
            return
        if conn is self._current:
            self._receiver.message(conn, message)

    def _on_receive_error(self, conn: LiveConnection, error: Exception) -> None:
        if conn is not self._current:
            return
        logger.warning("{}: unreadable server frame skipped ({})", self, type(error).__name__)
        self._s.call(self.on_error, TransportErrorEvent(error, recoverable=True))

    def _on_written(
        self, conn: LiveConnection, message: ClientMessage, results: list[ToolResult]
    ) -> None:
        """A message other than audio and video was written (the input path's report)."""
        if message.kind == "context_update":
            self._updated_in_session = conn
        for result in results:
            self._tools.result_sent(result.id)
            self._history.tool_result(result)

    def _on_write_failed(
        self, conn: LiveConnection, messages: Sequence[ClientMessage], error: Exception
    ) -> None:
        current = conn is self._current
        refused = self._input.failed(conn, messages, error, current=current)
        if refused:
            self._tools.results_refused(self._input.take_results(messages))
        logger.warning(
            "{}: {} message(s) not written on {} ({})",
            self,
            len(messages),
            conn.attempt_id,
            type(error).__name__,
        )
        if current and refused:
            self._s.call(self.on_error, TransportErrorEvent(error, recoverable=True))
            self._s.feed()

    def _on_closed(self, conn: LiveConnection, code: int | None, reason: str | None) -> None:
        if conn is self._updated_in_session:
            self._updated_in_session = None
            if code == INVALID_ARGUMENT:
                # The model refused the setup change: the move that follows the close sets
                # up the next connection with it, and later changes go the same way.
                logger.warning(
                    "{}: the service refused a setup change in the session (1007); "
                    "setup changes move the session from now on",
                    self,
                )
                self._s.traits = replace(self._s.traits, in_session_updates=False)
        self._dialler.forget(conn)
        too_big = self._input.connection_closed(conn, too_big=code == CLOSE_TOO_BIG)
        if too_big is not None and conn not in self._stranded:
            self._refused_as_too_big(conn, too_big)
        if conn in self._stranded:
            self._stranded.discard(conn)
            self._switchover.forget(conn)
            return
        self._s.report_generation_close(conn, code, reason)
        self._s.forget_close(conn)
        if self._switchover.closed(conn, code, reason):
            return
        if conn is not self._current:
            self._switchover.forget(conn)
            logger.debug("{}: {} closed after it stopped counting", self, conn.attempt_id)
            return
        # What it said before closing still counts.
        self._switchover.release(conn)
        if conn is self._current:
            self._lost(conn, code, reason)

    def _refused_as_too_big(self, conn: LiveConnection, message: ClientMessage) -> None:
        """``conn`` closed with 1009: the service refused a message as too big. The largest
        one written to it is dropped (never replayed, or a resumed session would refuse it
        again and again), its tool calls take a new result, and the caller is told."""
        self._tools.results_refused(self._input.take_results((message,)))
        mib = message.wire_size / 2**20
        logger.warning(
            "{}: {} refused a {} message of {:.1f} MiB as too big; it is dropped",
            self,
            conn.attempt_id,
            message.kind,
            mib,
        )
        error = MessageTooLargeError(
            f"Gemini Live refused a {message.kind} message of {mib:.1f} MiB as too big "
            "(close 1009): it was dropped, and the session goes on without it"
        )
        self._s.call(self.on_error, TransportErrorEvent(error, recoverable=True))

    def _lost(self, conn: LiveConnection, code: int | None, reason: str | None) -> None:
        """The session's connection closed without the transport asking."""
        logger.info("{}: {} closed ({}, {})", self, conn.attempt_id, code, self._s.clean(reason))
        self._s.detach(conn)
        if not self._rotation.enabled:
            self._s.close(code, reason)
            return
        cut = self._switchover.cut_turn(self._now(), GenerationEndReason.DISCONNECTED)
        self._rotation.connection_lost(code, reason, turn_cut=cut)

    def _deliver(self, conn: LiveConnection, message: types.LiveServerMessage) -> None:
        self._receiver.message(conn, message)

    def _turn_cut(self) -> None:
        self._rotation.turn_ended()

    # --- helpers ------------------------------------------------------------------------------

    def _now(self) -> float:
        return self._s.now()


def _user_content(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])
