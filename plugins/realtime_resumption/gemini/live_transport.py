"""``GeminiLiveTransport``: ``LLMTransport`` for Gemini Live over google-genai.

The transport holds the parts ``gemini/parts.py`` builds from its ``TransportOptions`` and
drives them: its life is one ``Lifecycle`` (``transport_phase.py``); sessions open through
``opening.py``, sends go through ``sends.py``, what connections report through
``connection_router.py``, the close through ``closing.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Coroutine, Sequence
from typing import Any, ClassVar, Final, Literal, Unpack

from loguru import logger

from realtime_resumption.callbacks import TransportCallbacks
from realtime_resumption.failures import connect_delays
from realtime_resumption.gemini.live_models import ModelTraits
from realtime_resumption.gemini.live_options import LiveOptions
from realtime_resumption.gemini.parts import build
from realtime_resumption.gemini.persistence import StoreStats
from realtime_resumption.gemini.sends import INPUT_SAMPLE_RATE
from realtime_resumption.gemini.transport_options import TransportKeywords, TransportOptions
from realtime_resumption.generation import CANCEL_BOUND, GenerationEnded
from realtime_resumption.handles import HandleRef
from realtime_resumption.move_reports import MoveOutcome, MoveReason
from realtime_resumption.telemetry import SessionTelemetry
from realtime_resumption.transport import (
    AudioFormatSpec,
    CancelResponseOptions,
    ContentTurn,
    DialAbandonedError,
    GenerationOverrides,
    NotConnectedError,
    ReconnectState,
    ReplayItem,
    RetainedUserTurn,
    SessionLostError,
    SessionUpdate,
    ToolResult,
    TransportCapabilities,
    TransportDiagnostics,
    TransportError,
)

OUTPUT_SAMPLE_RATE: Final = 24_000
HANDOVER_TIMEOUT: Final = 5.0
"""Seconds ``hand_over`` waits for the answer in progress to finish."""
_INSTANCES: Final = itertools.count(1)


class GeminiLiveTransport(TransportCallbacks):
    """Gemini Live as an ``LLMTransport``: one session, over as many connections as it takes.

    Built from ``TransportOptions`` (``GeminiLiveTransport(options)``), or from the same
    fields as keywords (``GeminiLiveTransport(api_key=..., model=...)``): how to reach the
    service, the setup, how the session moves (rotation, on by default), where the call is
    kept to survive the worker, and the telemetry; each is documented there. Pass one or
    the other, not both (``TypeError``).

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
        self, options: TransportOptions | None = None, /, **keywords: Unpack[TransportKeywords]
    ) -> None:
        if options is None:
            options = TransportOptions(**keywords)
        elif keywords:
            raise TypeError("pass TransportOptions or keyword arguments, not both")
        super().__init__()
        self._id = next(_INSTANCES)
        parts = build(
            self, options, describe=repr(self), number=self._id, end_store=self._end_store
        )
        self._auth = parts.auth
        self._observer = parts.observer
        self._s = parts.state
        self._tracker = parts.tracker
        self._input = parts.input
        self._tools = parts.tools
        self._history = parts.history
        self._retained_turn = parts.retained_turn
        self._dialler = parts.dialler
        self._rotation = parts.rotation
        self._persister = parts.persister
        self._life = parts.lifecycle
        self._sends = parts.sends
        self._closer = parts.closer
        self._opener = parts.opener

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
        return self._life.taken_over

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
        if self._active or self._life.busy:
            raise TransportError(f"{self} is already connected")
        delays = connect_delays(retry)
        handle = self._s.handles.enter(resumption_handle) if resumption_handle else None
        # Sends made before the session's input is ready (a disconnect still closing, the
        # store answering) are held by the lifecycle: they go after whatever the session
        # gets first.
        self._life.begin()
        return self._connect(config, delays, handle, report_retries=retry is not False)

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
                await self._opener.open(
                    handle or self._s.latest, delays=delays, report_retries=report_retries
                )
            except BaseException:
                self._life.failed()
                raise
            return
        try:
            stored = await persister.claim()
            if self._life.closed:
                raise DialAbandonedError(f"{self}: disconnect overtook connect")
            self._life.claimed(stored is not None)
            if stored is not None:
                self._s.update_setup(stored.setup.applied_to(self._options))
            if config is not None:
                self._s.update_setup(self._options.updated(config))
            if stored is not None:
                await persister.take_over(
                    stored, self._life.take_held, self._opener.open_taken_over
                )
            else:
                await self._opener.open(
                    handle or self._s.latest, delays=delays, report_retries=report_retries
                )
        except BaseException:
            self._life.failed()
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
            self._life.hand_over,
        )
        await self.disconnect()

    async def forget_handed_over(self) -> None:
        """The call this transport handed over ended after all (nobody will take it over):
        delete its stored state, unless another process took the call over meanwhile. Within
        a bound; a store failure is logged (the record then expires by itself)."""
        if self._persister is not None and self._life.handed_over:
            await self._persister.forget()

    async def _end_store(self) -> None:
        if self._persister is not None:
            await self._persister.end()

    def disconnect(self) -> Coroutine[Any, Any, None]:
        """End the session and everything the transport runs. Idempotent; never raises but
        the caller's own cancellation; returns within ``closing.DISCONNECT_TIMEOUT``.

        A move in progress is abandoned (reported as lost); queued messages get
        ``connection_router.DRAIN_TIMEOUT`` to reach the socket; the open answer ends as disconnected;
        ``on_close`` reports the close. A dial in flight is abandoned.

        The close begins when ``disconnect()`` is called, not when it is awaited, and runs in
        a task of its own, within the same bound (a later ``connect`` waits for it): a caller
        cancelled at any point, even a task cancelled before its first step, never leaves a
        socket open or its tasks running. Awaiting waits for the close; the caller's
        cancellation still propagates.
        """
        return self._closer.disconnect()

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

        Raises ``TransportError`` while ``connect`` is under way: await it first.
        """
        if self._life.busy:
            # Its dial would race connect's own, whose session it would then reset.
            raise TransportError(f"{self}: connect is under way; reconnect once it returns")
        history = tuple(state.conversation_history) if state is not None else ()
        if not self._active:
            handle = (
                self._s.handles.enter(state.resumption_handle)
                if state and state.resumption_handle
                else self._s.latest
            )
            await self._opener.open(handle)
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
        """Strand the incumbent now and close it within ``closing.ABORT_TIMEOUT``.

        Before returning: the dial generation advances (so nothing from the incumbent, from a
        move or reconnect in flight or from a dial that completes later is delivered or
        installed), a move in progress is abandoned (reported as lost), the incumbent is
        detached, the open answer ends as disconnected, and the resumption handle is dropped
        (a recovery dial must not resume a wedged turn). No ``on_close`` follows. The returned
        task never raises: ``closed`` when the close completed, ``forced`` on timeout or error.
        """
        return self._closer.abort_incumbent()

    # --- sending: every client message goes through Sends (gemini/sends.py) -------------------

    def send_audio(
        self, audio: bytes, *, sample_rate: int = INPUT_SAMPLE_RATE, channels: int = 1
    ) -> None:
        """Send user audio: PCM16 little-endian mono at 16 kHz, as a bytes-like object
        (``TypeError`` otherwise). Other rates or channel counts are refused (resample
        first), and so is a chunk longer than ``input_buffer`` holds (``ValueError``); an
        empty chunk sends nothing."""
        self._sends.send_audio(audio, sample_rate=sample_rate, channels=channels)

    def commit_audio(self) -> None:
        """The user's audio stream paused (``audioStreamEnd``): the provider may end the turn."""
        self._sends.commit_audio()

    def send_activity_start(self) -> None:
        """The user began speaking (``activityStart``), for a ``realtime_input_config`` with
        automatic activity detection disabled. Held and replayed across moves like any
        input; an activity open at a move is reopened on the new connection before the
        audio replayed to it."""
        self._sends.send_activity_start()

    def send_activity_end(self) -> None:
        """The user stopped speaking (``activityEnd``): the provider ends the turn."""
        self._sends.send_activity_end()

    def clear_audio(self) -> None:
        """Nothing to clear: Gemini keeps no uncommitted input buffer a client can drop."""

    def send_content(self, turns: Sequence[ContentTurn], turn_complete: bool = True) -> None:
        """Send text turns as conversation content (``client_content``). Gemini 3.x models
        refuse content after their first turn: use ``send_live_text`` with them."""
        self._sends.send_content(turns, turn_complete)

    def send_live_text(self, turns: Sequence[ContentTurn]) -> bool:
        """Send text through realtime input: it ends the user's turn and elicits an answer.
        Several turns are joined into one text, each line prefixed with its role. Never
        raises: False when there is no text, no session, or ``turns`` is not a sequence of
        ``ContentTurn`` (logged as a warning saying why)."""
        return self._sends.send_live_text(turns)

    def send_file(self, data: bytes, mime_type: str) -> None:
        """Send an image or a video frame (or audio in its own format) as realtime input.
        Other files go to ``send_inline_file``. ``data`` is bytes-like."""
        self._sends.send_file(data, mime_type)

    def send_inline_file(self, data: bytes, mime_type: str) -> None:
        """Add a file of any type to the conversation, without completing the user's turn."""
        self._sends.send_inline_file(data, mime_type)

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
        self._sends.send_tool_result(result)

    def trigger_generation(
        self, instructions: str | None = None, overrides: GenerationOverrides | None = None
    ) -> None:
        """Ask for a response. With ``instructions`` they are sent as a user turn that
        elicits it; without, nothing is sent: Gemini answers input and tool results by itself
        and rejects a content-less request. Gemini takes no per-response settings: overrides
        that set one raise ``ValueError`` naming it, and nothing is sent."""
        self._sends.trigger_generation(instructions, overrides)

    def replay_history(self, items: Sequence[ReplayItem]) -> None:
        """Replay prior turns as quiet context (``client_content``, turn not complete). The
        transport keeps them too, to seed a session it has to rebuild.

        With ``initial_history_in_client_content`` (Gemini 3.x) history is only taken before
        the session's first realtime input, unless the model takes it for the whole session
        (``mid_session_client_content``: gemini-3.8-live); replaying after it otherwise raises
        ``TransportError``.
        """
        self._sends.replay_history(items)

    def replay_user_turn(self, turn: RetainedUserTurn) -> bool:
        """Send a retained utterance as inline audio with an explicit turnComplete (no server
        VAD involved). False when there is no audio or no session."""
        return self._sends.replay_user_turn(turn)

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
        if self._sends.update_in_session(options):
            return
        if self._s.update_setup(options):
            logger.info("{}: session update applies on the next connection", self)
            self._rotation.config_changed()

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

    # --- helpers ------------------------------------------------------------------------------

    def _now(self) -> float:
        return self._s.now()
