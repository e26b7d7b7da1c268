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
a turn boundary: what a new session needs to carry the call on (``session_handover``).

Every move is reported through ``on_move_started`` and ``on_move`` (outcome ``rebuilt``, or
``lost`` when no attempt served) with the shared ``MoveReason`` spelling, and only these:

- ``planned``: the move before the session's cap, at a turn boundary;
- ``deadline``: the move before the cap when no turn boundary came in time (the answer in
  progress is finished on the old session where the cap allows);
- ``lost``: the session ended unasked (a dropped socket, a cap close that came early, a
  server close);
- ``takeover``: ``connect`` found the call in the store, left there by another process;
- ``requested``: ``reconnect`` asked for a new session.

Calls that survive the worker: with ``session_key`` (the app's id of the call) the transport
keeps the call in ``store`` (a ``SessionStore``; the process's ``MemoryStore`` by default,
``RedisStore`` to outlive the process), written in the background at most once per
``store_options.write_interval`` (``record_keeper``): the configuration, the conversation,
the function calls in flight and the input no item holds (``realtime_record``). ``connect``
first takes the call's lease (``LeaseHeldError`` while another process drives the call) and,
when the store holds the call, takes it over: a new session given the stored configuration
and conversation, the input no item held appended, an answer it owed asked for, and the
function calls in flight issued again through ``on_tool_call`` (their outputs go to the new
session, once). ``disconnect`` deletes the record; ``hand_over`` keeps it for the next process.

The transport is the facade over its parts, each in a module of its own: ``call_state`` (what
they share), ``realtime_dialling`` (one dial), ``realtime_sends`` (the app's sends, held
during a move), ``realtime_receive`` (the server's events), ``realtime_timing`` (when the call
moves), ``realtime_moves`` (how it moves, and its opening: ``connect`` retries a refused or
timed-out dial as a move's attempts are retried), ``realtime_persistence`` (the store's record
and the takeover).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import Any, Final

import openai
from loguru import logger

from realtime_resumption.callbacks import TransportCallbacks
from realtime_resumption.failures import connect_delays
from realtime_resumption.move_reports import MoveLog, MoveReason
from realtime_resumption.openai.call_state import CallState
from realtime_resumption.openai.conversation_seed import build_seed, items_from_replay
from realtime_resumption.openai.conversation_state import ConversationState
from realtime_resumption.openai.realtime_dialling import RealtimeDialler
from realtime_resumption.openai.realtime_moves import RealtimeMoves
from realtime_resumption.openai.realtime_options import OpenAIRealtimeOptions
from realtime_resumption.openai.realtime_persistence import RealtimeKeeper
from realtime_resumption.openai.realtime_receive import RealtimeReceiver
from realtime_resumption.openai.realtime_sends import RealtimeSends
from realtime_resumption.openai.realtime_server_events import ServerError, SessionEvent
from realtime_resumption.openai.session_config import SessionConfig
from realtime_resumption.openai.session_update import apply_update, cache_busts
from realtime_resumption.record_keeper import StoreStats
from realtime_resumption.store import (
    LeaseLostError,
    SessionStore,
    StoreOptions,
    process_store,
)
from realtime_resumption.telemetry import AVAILABLE as TELEMETRY_AVAILABLE
from realtime_resumption.telemetry import SessionTelemetry, Telemetry, default_telemetry
from realtime_resumption.transport import (
    AudioFormatSpec,
    CancelResponseOptions,
    ConnectError,
    ContentTurn,
    GenerationOverrides,
    NotConnectedError,
    ReconnectState,
    SessionUpdate,
    ToolResult,
    TransportCapabilities,
    TransportError,
    TransportErrorEvent,
)

HANDOVER_TIMEOUT: Final = 10.0
"""Seconds ``hand_over`` waits for the answer in progress to end before it saves anyway."""
UPDATE_TIMEOUT: Final = 5.0
"""Seconds ``update_session`` waits for the ``session.updated`` that confirms it."""

_CAPABILITIES: Final = TransportCapabilities(
    message_truncation=True,
    turn_detection=True,
    user_transcription=True,
    in_place_session_update=True,
    text_response_modality=True,
    parallel_tool_calls=True,
    clear_input_audio=True,
)


class OpenAIRealtimeTransport(TransportCallbacks):
    """The transport interface (``LLMTransport``) on OpenAI Realtime; see the module docs.

    ``client`` is an ``openai.AsyncOpenAI`` or ``openai.AsyncAzureOpenAI`` (its key never
    appears in the transport's logs, reprs or errors); ``config`` the session's configuration
    (instructions, tools, voice, formats, turn detection, transcription). ``store``,
    ``session_key`` and ``store_options`` keep the call in a ``SessionStore`` so it survives
    its worker, as ``GeminiLiveTransport``'s options of those names (see the module docs):
    store errors are reported through ``on_error`` (recoverable) and never stop the call.
    The ``on_*`` callbacks are ``TransportCallbacks``'s; ``on_move`` reports each finished
    move (outcome ``rebuilt``, or ``lost``), ``on_move_started`` each that begins (the handle
    kind always ``none``: every move rebuilds).
    """

    def __init__(
        self,
        client: Any,
        config: SessionConfig | None = None,
        options: OpenAIRealtimeOptions | None = None,
        *,
        telemetry: Telemetry | bool = True,
        store: SessionStore | None = None,
        session_key: str | None = None,
        store_options: StoreOptions | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(client, openai.AsyncOpenAI):
            raise TypeError(
                f"client must be an openai.AsyncOpenAI or AsyncAzureOpenAI, "
                f"not {type(client).__name__}"
            )
        if config is not None and not isinstance(config, SessionConfig):
            raise TypeError(f"config must be a SessionConfig, not {type(config).__name__}")
        if options is not None and not isinstance(options, OpenAIRealtimeOptions):
            raise TypeError(f"options must be OpenAIRealtimeOptions, not {type(options).__name__}")
        if store is not None and session_key is None:
            raise ValueError("a store needs a session_key: the call's key in it")
        if store_options is not None and not isinstance(store_options, StoreOptions):
            raise TypeError(
                f"store_options must be StoreOptions, not {type(store_options).__name__}"
            )
        self._options = options = options or OpenAIRealtimeOptions()
        azure = isinstance(client, openai.AsyncAzureOpenAI)
        if telemetry is True and TELEMETRY_AVAILABLE:
            telemetry = default_telemetry()
        session_telemetry: SessionTelemetry | None = None
        if isinstance(telemetry, Telemetry):
            provider = "azure.ai.openai" if azure else "openai"
            session_telemetry = telemetry.session(provider=provider, model=options.model)
        self._s = state = CallState(
            self, options, options.flavour_for(azure), config or SessionConfig(), session_telemetry
        )
        # The parts, each handed what it reads and changes; the connections they open report
        # to the receiver (their events) and to the moves (their end).
        self._sends = RealtimeSends(
            state,
            keeps_sent=session_key is not None,
            serving=lambda: self._moves.serving(),
            boundary_changed=lambda: self._moves.timing.update_boundary(),
        )
        self._dialler = RealtimeDialler(
            state,
            client,
            on_event=lambda conn, event: self._receiver.on_event(conn, event),
            on_closed=lambda conn, code, why: self._moves.connection_closed(conn, code, why),
        )
        self._moves = RealtimeMoves(
            state, self._dialler, self._sends, cap=options.cap_for(azure), on_end=self._end_store
        )
        self._receiver = RealtimeReceiver(state, self._dialler, self._moves)
        self._update_lock = asyncio.Lock()
        self._taken_over = False
        self._keeper = (
            RealtimeKeeper(
                store if store is not None else process_store(),
                session_key,
                store_options or StoreOptions(),
                state=state,
                sends=self._sends,
                moves=self._moves,
                report=self._store_error,
                describe=f"OpenAIRealtimeTransport({options.model})",
            )
            if session_key is not None
            else None
        )

    def __repr__(self) -> str:
        session = self._s.session.state.session_id if self._s.session else None
        return (
            f"OpenAIRealtimeTransport(model={self._options.model!r}, flavour={self._s.flavour}, "
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
        config = self._s.config
        return AudioFormatSpec(config.input_format.sample_rate, config.output_format.sample_rate)

    @property
    def is_connected(self) -> bool:
        """A session is up and takes input."""
        session = self._s.session
        return session is not None and session.conn.open and not self._s.closed

    @property
    def config(self) -> SessionConfig:
        """The configuration the next session is given."""
        return self._s.config

    @property
    def conversation(self) -> ConversationState | None:
        """The current session's conversation and input buffer (None before ``connect``)."""
        return self._s.session.state if self._s.session else None

    @property
    def current_transport_generation(self) -> int:
        """Advances on each session whose configuration the service confirmed."""
        return self._dialler.transport_generation

    @property
    def current_dial_gen(self) -> int:
        """Advances per dial."""
        return self._dialler.dial_gen

    @property
    def telemetry(self) -> SessionTelemetry | None:
        """The session's telemetry (None when turned off or without OpenTelemetry): set its
        ``parent``/``generation_parent`` to nest the spans under a framework's."""
        return self._s.telemetry

    @property
    def move_log(self) -> MoveLog:
        """The session's moves: counts per outcome and the latest reports."""
        return self._moves.log

    @property
    def taken_over(self) -> bool:
        """The last ``connect`` took over a call another process left in the store."""
        return self._taken_over

    @property
    def store_stats(self) -> StoreStats | None:
        """With a session store: its writes, their bytes and the store errors; None without."""
        return self._keeper.stats if self._keeper is not None else None

    def get_active_server_turn_id(self) -> int | None:
        """The active server turn's id, None between turns."""
        return self._s.tracker.active_server_turn_id

    # --- lifecycle --------------------------------------------------------------------------

    async def connect(
        self, config: SessionUpdate | None = None, *, retry: bool | Sequence[float] = True
    ) -> None:
        """Open a session, give it the configuration (``config`` applied first) and return
        once the service confirmed it (``session.updated``).

        ``retry``: True (the default) retries a refused (HTTP 429, 503) or timed-out dial as a
        move's attempts are retried, by the move machine under the one failure policy: the
        options' ``retry_delays`` (jittered), within ``retry_policy``; each retried dial is
        reported through ``on_error`` (recoverable). Pauses in seconds (``(0, 2.0, 2.0)``)
        replace those delays, one attempt each (LiveKit's ``conn_options``); False dials once.
        Raises ``ConnectError``, with no credential in its message, when every attempt
        failed, at once when the service refused the credentials (HTTP 401, 403), and
        ``ValueError`` for a ``retry`` that is no bool or list of pauses.

        With a store, ``connect`` first takes the call's lease (waiting for a held one as
        ``store_options`` says: by default a little over the lease's time to live, long
        enough for a crashed process's to lapse; then ``LeaseHeldError``) and, when the store
        holds the call, takes it over (see the module documentation; ``config`` applies over
        the stored configuration; its dials retried the same way), reported through
        ``on_move`` (reason ``takeover``)."""
        delays = connect_delays(retry)
        if self._s.closed:
            raise TransportError("the transport was disconnected; make a new one")
        if self._moves.serving():
            if config is not None:
                self._s.set_config(apply_update(self._s.config, config))
            return  # connected, or a move is bringing the next session up
        keeper = self._keeper
        if keeper is None:
            if config is not None:
                self._s.set_config(apply_update(self._s.config, config))
            await self._open_first(delays)
            return
        try:
            stored = await keeper.claim()
            if self._s.closed:
                raise TransportError("the transport was disconnected while it connected")
            if stored is not None:
                self._s.set_config(stored.setup)
            if config is not None:
                self._s.set_config(apply_update(self._s.config, config))
            if stored is not None:
                await keeper.take_over(stored, delays)
                self._taken_over = True
            else:
                await self._open_first(delays)
        except BaseException:
            # The stored call stays for a later attempt; only the lease is given up.
            await keeper.end(forget=False)
            raise
        keeper.start()

    async def _open_first(self, delays: tuple[float, ...] | None) -> None:
        session = await self._moves.open(MoveReason.REQUESTED, delays=delays)
        self._moves.install(session)
        self._s.emit("on_session_ready", session.state.session_id or "")

    async def hand_over(self, timeout: float = HANDOVER_TIMEOUT) -> None:
        """Hand the call to another process (a deploy, a drain): once the answer in progress
        (its function calls included) finished, or ``timeout`` passed, save the call's state,
        take no more input (a send raises ``NotConnectedError`` from then on: nothing accepted
        is left out), give the lease up and close the session without deleting the record, so
        the next process that connects with the key takes the call over with nothing lost.

        Raises ``TransportError`` without a store, ``NotConnectedError`` without a session,
        and ``StoreError`` when the final save failed: the call then goes on here (saving
        again each beat).
        """
        keeper = self._keeper
        if keeper is None:
            raise TransportError(f"{self}: hand_over needs a session_key (and a store)")
        if self._s.closed or not self._moves.serving():
            raise NotConnectedError(f"{self} is not connected")
        answer_end: asyncio.Future[None] | None = None
        if self._s.tracker.answer_in_progress or self._s.calls:
            answer_end = self._s.answer_end()
        await keeper.hand_over_call(timeout, answer_end, self._stop_input)
        await self.disconnect()

    def _stop_input(self) -> None:
        self._s.handed_over = True

    async def forget_handed_over(self) -> None:
        """The call this transport handed over ended after all (nobody will take it over):
        delete its stored state, unless another process took the call over meanwhile. Within
        a bound; a store failure is logged (the record then expires by itself)."""
        if self._keeper is not None and self._s.handed_over:
            await self._keeper.forget()

    async def disconnect(self) -> None:
        """Close the session and stop everything the transport runs; with a store, the call
        is over: its record is deleted and its lease released (within a bound). Idempotent."""
        s = self._s
        if s.closed:
            return
        self._moves.stop()
        session, s.session = s.session, None
        candidate = self._moves.take_candidate()
        tasks = s.cancel_tasks()
        if candidate is not None:
            await candidate.conn.close()
        if session is not None:
            await session.conn.close()
            self._moves.closed_event(session, 1000, "disconnect")
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._keeper is not None:
            await self._keeper.end()
        s.emit("on_close", 1000, "disconnect")
        if s.telemetry is not None:
            s.telemetry.close()

    async def reconnect(self, state: ReconnectState | None = None) -> None:
        """Move the call to a new session given the conversation so far, and return once it
        serves (or raise ``SessionLostError`` when every attempt failed). Before any session,
        it connects (retried as ``connect`` is) and gives the new session ``state``'s
        history."""
        s = self._s
        if s.closed:
            raise TransportError("the transport was disconnected; make a new one")
        if not self._moves.serving():
            history = state.conversation_history if state is not None else ()
            seed = build_seed(
                items_from_replay(history),
                budget_tokens=self._options.seed_budget_tokens,
                input_format=s.config.input_format,
                flavour=s.flavour,
            )
            session = await self._moves.open(MoveReason.REQUESTED, seed.items)
            for event in seed.events:
                session.conn.post(event)
            self._moves.install(session)
            s.emit("on_session_ready", session.state.session_id or "")
            return
        done = self._moves.request()
        delays = self._options.retry_delays
        bound = self._options.connect_timeout * (len(delays) + 1) + sum(delays) + 1.0
        try:
            async with asyncio.timeout(bound):
                await asyncio.shield(done)
        except TimeoutError:
            raise TransportError(f"the move did not complete within {bound:g} s") from None

    # --- input ------------------------------------------------------------------------------

    def send_audio(self, audio: bytes) -> None:
        """Append PCM16 user audio (``audio_format``'s input side) to the input buffer."""
        self._sends.send_audio(audio)

    def commit_audio(self) -> None:
        """End the user's turn now (``input_audio_buffer.commit``). With server turn
        detection the service commits by itself, so this sends nothing."""
        self._sends.commit_audio()

    def clear_audio(self) -> None:
        """Drop input audio the service holds uncommitted (``input_audio_buffer.clear``)."""
        self._sends.clear_audio()

    def clear_input_audio(self) -> None:
        """The interface's ``clearInputAudio``: the same as :meth:`clear_audio`."""
        self._sends.clear_audio()

    def truncate_answer(self, heard: float) -> None:
        """The answer whose audio played last was heard for ``heard`` seconds (playback the
        framework timed): its audio item is cut there (``conversation.item.truncate``, at most
        the audio received; nothing when an earlier cut left less), so the conversation, this
        session's and every next one's, holds what the user heard. Cancels nothing: that is
        :meth:`cancel_response`'s. Never raises."""
        self._sends.truncate_answer(heard)

    async def update_session(self, update: SessionUpdate) -> None:
        """Apply ``update``. Before ``connect`` it only changes the configuration; after, it
        sends one ``session.update`` and returns once the service confirmed it (updates run one
        at a time, in call order). ``on_cache_bust`` fires first when instructions or tools
        change."""
        s = self._s
        new = apply_update(s.config, update)
        async with self._update_lock:
            session = s.session
            if session is None or not session.conn.open:
                s.set_config(new)
                return
            for reason in cache_busts(s.config, new):
                s.emit("on_cache_bust", reason)
            old, event_id = s.config, f"rr_update_{uuid.uuid4().hex[:16]}"
            s.set_config(new)
            answered = session.conn.expect(
                lambda e: (
                    (isinstance(e, SessionEvent) and not e.created)
                    or (isinstance(e, ServerError) and e.event_id == event_id)
                )
            )
            session.conn.post({**new.session_update(s.flavour), "event_id": event_id})
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
                s.set_config(old)
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
        self._sends.send_content(turns, turn_complete)

    def send_file(self, data: bytes, mime_type: str) -> None:
        """Send an image (``input_image``) as a user item. Other files are refused: OpenAI
        Realtime takes images only."""
        self._sends.send_file(data, mime_type)

    def send_tool_result(self, result: ToolResult) -> None:
        """Give a function call its output (``function_call_output``) and, unless the result
        is ``silent``, ask for the answer that uses it. Raises ``UnknownToolCallError`` for a
        call the session never issued or already answered."""
        self._sends.send_tool_result(result)

    def trigger_generation(
        self, instructions: str | None = None, overrides: GenerationOverrides | None = None
    ) -> None:
        """Ask for an answer (``response.create``); ``instructions`` for this answer only."""
        self._sends.trigger_generation(instructions, overrides)

    async def cancel_response(self, options: CancelResponseOptions | None = None) -> None:
        """Cancel the answer in flight (``response.cancel``) and, with ``truncate``, cut its
        audio item where playback stopped (``conversation.item.truncate``, at most the audio
        received). Never raises; never calls a framework callback but the generation's end."""
        await self._sends.cancel_response(options)

    # --- the store --------------------------------------------------------------------------

    def _end_store(self) -> None:
        """The call ended here: its record is deleted and its lease released (a lease another
        process took keeps its record), in a task of its own (``disconnect`` is not called
        once the transport closed itself)."""
        if self._keeper is not None:
            self._s.own(self._keeper.end(), "store-end")

    def _store_error(self, error: Exception) -> None:
        """What the store's keeper reports: a store error is recoverable (the call goes on,
        saving is retried each beat); a lease another process took means it drives the call:
        nothing more goes to the service from here."""
        if isinstance(error, LeaseLostError):
            self._moves.end_here(error, 1000, "another process took the call over")
            return
        self._s.emit("on_error", TransportErrorEvent(error, recoverable=True))
