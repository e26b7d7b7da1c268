"""``GeminiLiveTransport``: ``LLMTransport`` for Gemini Live over google-genai."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Final, Literal, ParamSpec

from google import genai
from google.genai import types
from loguru import logger

from realtime_resumption.gemini import wire
from realtime_resumption.gemini.config import (
    DEFAULT_MODEL,
    DEFAULT_SETUP_TIMEOUT,
    Auth,
    Credential,
    CredentialProvider,
    LiveOptions,
    normalise_tools,
)
from realtime_resumption.gemini.connection import ConnectionHooks, _Connection
from realtime_resumption.gemini.messages import ClientMessage
from realtime_resumption.generation import (
    CANCEL_BOUND,
    TOOL_CALL_GRACE,
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
from realtime_resumption.redaction import redact
from realtime_resumption.transport import (
    AttemptClose,
    AudioFormatSpec,
    CancelResponseOptions,
    ConnectAttempt,
    ConnectError,
    ConnectFailure,
    ConnectionLifecycleEvent,
    ContentTurn,
    DialAbandonedError,
    GenerationClose,
    GenerationEndReason,
    GenerationOverrides,
    NotConnectedError,
    ProviderEvidenceEvent,
    RealtimeLLMUsage,
    ReasoningInfo,
    ReconnectState,
    ReplayItem,
    ResponseModality,
    RetainedUserTurn,
    SendCounter,
    SendKind,
    SessionUpdate,
    SetupFailed,
    SetupOk,
    ToolCall,
    ToolResult,
    TransportCapabilities,
    TransportDiagnostics,
    TransportError,
    TransportErrorEvent,
    TransportUsageMetadata,
    UnknownToolCallError,
)

_P = ParamSpec("_P")

INPUT_SAMPLE_RATE: Final = 16_000
OUTPUT_SAMPLE_RATE: Final = 24_000
ABORT_TIMEOUT: Final = 5.0
"""Seconds ``abort_incumbent`` gives the incumbent's close before reporting ``forced``."""
DRAIN_TIMEOUT: Final = 1.0
"""Seconds queued messages get to reach the socket when the transport closes a connection."""
_REASON_LIMIT: Final = 200
_INSTANCES: Final = itertools.count(1)
_SEND_KINDS: Final[tuple[SendKind, ...]] = (
    "audio",
    "video",
    "text",
    "content",
    "tool_response",
    "audio_stream_end",
)
_SCHEDULING: Final = {
    "interrupt": types.FunctionResponseScheduling.INTERRUPT,
    "when_idle": types.FunctionResponseScheduling.WHEN_IDLE,
    "silent": types.FunctionResponseScheduling.SILENT,
}


class _Counter:
    __slots__ = ("attempted", "bytes", "failed", "refused", "sent")

    def __init__(self) -> None:
        self.attempted = 0
        self.sent = 0
        self.refused = 0
        self.failed = 0
        self.bytes = 0

    def snapshot(self) -> SendCounter:
        return SendCounter(self.attempted, self.sent, self.refused, self.failed, self.bytes)


def _counters() -> dict[SendKind, _Counter]:
    return {kind: _Counter() for kind in _SEND_KINDS}


class GeminiLiveTransport:
    """Gemini Live as an ``LLMTransport``: one session, over as many connections as it takes.

    Construction mirrors the stock integrations: ``api_key`` (Gemini API) or ``vertexai`` with
    ``project``, ``location`` and ``credentials`` (Vertex AI), or a ready ``client``; the model
    and voice; ``response_modality`` (``audio``, or ``text`` for an external TTS); the system
    instruction; ``tools`` as google-genai ``Tool``/``FunctionDeclaration`` objects or dicts;
    transcription flags; ``realtime_input_config`` and ``context_window_compression`` (SDK
    types); ``http_options``. ``credential_provider`` supplies an expiring credential before
    every dial (its connection closes when it expires, after ``on_credential_expiry``).
    ``setup_timeout`` bounds each dial: the SDK would wait forever for ``setupComplete``.
    ``transparent`` asks Vertex AI for ``lastConsumedClientMessageIndex`` (the Gemini API
    refuses it). ``initial_history_in_client_content`` lets Gemini 3.x models take history
    through ``replay_history``.

    Callbacks are attributes (``None`` by default), plain functions called on the event loop
    from the receive loop; one that raises is logged and changes nothing else. Sends are
    synchronous and never block: they queue in order on the current connection, and raise
    ``NotConnectedError`` when there is none. Call everything from the event loop's thread.
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
        context_window_compression: types.ContextWindowCompressionConfig | None = None,
        http_options: types.HttpOptions | None = None,
        credential_provider: CredentialProvider | None = None,
        client: genai.Client | None = None,
        setup_timeout: float = DEFAULT_SETUP_TIMEOUT,
        transparent: bool = False,
        initial_history_in_client_content: bool = False,
        tool_call_grace: float = TOOL_CALL_GRACE,
    ) -> None:
        if response_modality not in ("audio", "text"):
            raise ValueError(
                f"response_modality must be 'audio' or 'text', not {response_modality!r}"
            )
        if not setup_timeout > 0:
            raise ValueError("setup_timeout must be > 0 seconds")
        if client is not None and (
            api_key is not None
            or credentials is not None
            or http_options is not None
            or credential_provider is not None
        ):
            raise ValueError(
                "pass either a ready client or what to build one from "
                "(api_key, credentials, http_options, credential_provider), not both"
            )
        vertex = (
            client.vertexai
            if client is not None
            else vertexai or project is not None or location is not None
        )
        if transparent and not vertex:
            raise ValueError(
                "transparent session resumption is a Vertex AI feature: the Gemini API refuses "
                "it (use vertexai=True, or transparent=False)"
            )
        self._id = next(_INSTANCES)
        self._auth = Auth(
            api_key=api_key,
            vertexai=vertex,
            project=project,
            location=location,
            credentials=credentials,
            http_options=http_options,
        )
        self._options = LiveOptions(
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
        )
        self._credential_provider = credential_provider
        self._injected_client = client
        self._client: genai.Client | None = client
        if client is None and credential_provider is None:
            # Made now so missing keys or projects fail at construction, not at the first dial.
            self._client = self._auth.client()
        self._setup_timeout = setup_timeout
        self._transparent = transparent
        self._tracker = GenerationTracker(tool_call_grace=tool_call_grace)
        self._translator = wire.Translator()
        self._hooks = ConnectionHooks(
            message=self._on_message,
            receive_error=self._on_receive_error,
            written=self._on_written,
            write_failed=self._on_write_failed,
            closed=self._on_closed,
        )
        self._current: _Connection | None = None
        self._dials: set[asyncio.Task[_Connection]] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._dial_gen = 0
        self._transport_generation = 0
        self._handle: str | None = None
        self._secrets: set[str] = {api_key} if api_key else set()
        self._without_id: set[str] = set()
        self._sends = _counters()
        self._total_sends = _counters()
        self._tick: asyncio.TimerHandle | None = None
        self._expiry: asyncio.TimerHandle | None = None
        self._expires_at: dict[_Connection, float] = {}
        self._end_waiters: dict[str, list[asyncio.Future[None]]] = {}
        self._quiesced = False
        self._disconnected = False
        self._setup_stale = False

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

    def __repr__(self) -> str:
        return f"GeminiLiveTransport#{self._id}"

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
    def is_connected(self) -> bool:
        """A connection is current and takes input."""
        return self._current is not None and self._current.accepting

    @property
    def current_dial_gen(self) -> int:
        """Advances per dial, when the current dial fails, and on ``abort_incumbent``."""
        return self._dial_gen

    @property
    def current_transport_generation(self) -> int:
        """Advances only when a connection completes its setup."""
        return self._transport_generation

    @property
    def resumption_handle(self) -> str | None:
        """The latest handle the provider marked resumable; the next dial resumes from it."""
        return self._handle

    @property
    def pending_setup_change(self) -> bool:
        """A session update changed the setup since the current connection opened; Gemini
        applies it on the next connection."""
        return self._setup_stale

    # --- connecting ---------------------------------------------------------------------------

    async def connect(self, config: SessionUpdate | None = None) -> None:
        """Open a connection (resuming from ``resumption_handle`` when there is one) and return
        once its setup completed. ``config`` is applied first.

        Raises ``ConnectError`` when the dial fails (its ``failure`` says why),
        ``DialAbandonedError`` when ``abort_incumbent`` or ``disconnect`` overtook it, and
        ``TransportError`` when already connected.
        """
        if self._current is not None:
            raise TransportError(f"{self} is already connected")
        if config is not None:
            self._options = self._options.updated(config)
        self._disconnected = False
        conn = await self._dial(self._handle)
        self._install(conn)

    async def disconnect(self) -> None:
        """End the session's connection and everything the transport runs. Idempotent.

        Queued messages get ``DRAIN_TIMEOUT`` to reach the socket; the open answer ends as
        disconnected; ``on_close`` reports the close. A dial in flight is abandoned.
        """
        self._disconnected = True
        dials = set(self._dials)
        if dials:
            self._dial_gen += 1
            for dial in dials:
                dial.cancel()
            # A cancelled dial closes its socket as it unwinds: let it finish.
            await asyncio.wait(dials, timeout=ABORT_TIMEOUT)
        conn = self._current
        if conn is not None:
            await self._retire(conn, "closed by the client")
        self._cancel_timers()
        self._release_waiters()
        for task in list(self._tasks):
            with contextlib.suppress(Exception):
                await task
        if self._client is not None and self._injected_client is None:
            client, self._client = self._client, None
            with contextlib.suppress(Exception):
                await client.aio.aclose()
            with contextlib.suppress(Exception):
                client.close()

    async def reconnect(self, state: ReconnectState | None = None) -> None:
        """Close the connection and open a new one (break-before-make).

        Resumes from ``state.resumption_handle``, else from ``resumption_handle``. When there is
        no handle, the new session is fresh and ``state.conversation_history`` is replayed into
        it; a resumed session keeps its own context and gets no replay. Tool calls in flight
        cannot move to a fresh session: their results will be refused.
        """
        handle = state.resumption_handle if state and state.resumption_handle else self._handle
        conn = self._current
        if conn is not None:
            await self._retire(conn, "reconnecting")
        if handle is None:
            self._tracker.forget_tool_calls()
        self._disconnected = False
        new = await self._dial(handle)
        self._install(new)
        if handle is None and state is not None and state.conversation_history:
            self.replay_history(state.conversation_history)

    def abort_incumbent(self) -> asyncio.Task[Literal["closed", "forced"]]:
        """Strand the incumbent now and close it within ``ABORT_TIMEOUT``.

        Before returning: the dial generation advances (so nothing from the incumbent, from a
        reconnect in flight or from a dial that completes later is delivered or installed),
        the incumbent is detached, the open answer ends as disconnected, and the resumption
        handle is dropped (a recovery dial must not resume a wedged turn). The returned task
        never raises: ``closed`` when the close completed, ``forced`` on timeout or error.
        """
        self._dial_gen += 1
        conn = self._current
        self._current = None
        self._handle = None
        self._cancel_timers()
        self._apply(self._tracker.connection_lost(self._now()))
        self._release_waiters()
        task = asyncio.create_task(self._close_stranded(conn))
        self._own(task)
        return task

    # --- the rotation seam: dial, install, retire ---------------------------------------------

    async def _dial(self, handle: str | None, *, transparent: bool | None = None) -> _Connection:
        """Open a connection with ``handle`` and return it set up but not installed: it
        delivers nothing until ``_install``. The incumbent, if any, is untouched.

        The dial runs in a task of the transport, so ``disconnect`` can abandon it wherever it
        is; a dial that completes after the dial generation moved on is closed unused.
        """
        self._dial_gen += 1
        gen = self._dial_gen
        caller = asyncio.current_task()
        opening = asyncio.create_task(
            self._open(gen, handle, transparent), name=f"gemini-live-dial-att_{gen}"
        )
        self._dials.add(opening)
        try:
            conn = await opening
        except asyncio.CancelledError:
            if caller is not None and caller.cancelling():
                raise
            raise DialAbandonedError(f"att_{gen} was abandoned while dialling") from None
        finally:
            self._dials.discard(opening)
        if gen != self._dial_gen:
            await conn.close()
            raise DialAbandonedError(f"{conn.attempt_id} completed after the transport moved on")
        self._transport_generation += 1
        conn.transport_generation = self._transport_generation
        self._lifecycle(SetupOk(conn.attempt_id, self._transport_generation, conn.session_id))
        return conn

    async def _open(self, gen: int, handle: str | None, transparent: bool | None) -> _Connection:
        try:
            client, owns_client, credential = await self._client_for_dial()
        except Exception as error:
            failure = ConnectFailure(
                "error", f"the credential provider failed ({type(error).__name__})"
            )
            if gen == self._dial_gen:
                self._dial_gen += 1
            raise ConnectError(failure) from error
        conn = _Connection(
            client=client,
            model=self._options.model,
            config=self._options.live_connect_config(
                handle=handle,
                transparent=self._transparent if transparent is None else transparent,
            ),
            dial_gen=gen,
            handle_supplied=handle is not None,
            hooks=self._hooks,
            owns_client=owns_client,
        )
        if gen == self._dial_gen:
            self._lifecycle(ConnectAttempt(conn.attempt_id, handle is not None))
        logger.debug("{}: dialling {} (handle {})", self, conn.attempt_id, redact(handle))
        try:
            await conn.open(self._setup_timeout)
        except ConnectError as error:
            if gen == self._dial_gen:
                self._dial_gen += 1
                failure = error.failure
                if failure.kind == "closed":
                    self._lifecycle(
                        AttemptClose(
                            conn.attempt_id, failure.code, self._clean(failure.provider_text)
                        )
                    )
                self._lifecycle(SetupFailed(conn.attempt_id, failure))
            logger.warning("{}: {} failed: {}", self, conn.attempt_id, error)
            raise
        if credential is not None and credential.expires_at is not None:
            self._expires_at[conn] = credential.expires_at
        return conn

    def _install(self, conn: _Connection) -> None:
        """Make ``conn`` the session's connection: it delivers and takes sends from now on."""
        self._current = conn
        self._sends = _counters()
        self._setup_stale = False
        conn.start()
        expires_at = self._expires_at.pop(conn, None)
        if expires_at is not None:
            self._expiry = asyncio.get_running_loop().call_later(
                max(0.0, expires_at - time.time()), self._credential_expired, conn
            )
        self._call(self.on_session_ready, conn.session_id or "")

    async def _retire(self, conn: _Connection, reason: str) -> None:
        """Let ``conn`` write what it queued (within ``DRAIN_TIMEOUT``), report the close of
        the session's connection (answer ended as disconnected, ``GenerationClose``,
        ``on_close``), detach it, then close it."""
        await conn.flush(DRAIN_TIMEOUT)
        if conn is self._current:
            self._report_close(conn, 1000, reason)
        await conn.close()

    async def _client_for_dial(self) -> tuple[genai.Client, bool, Credential | None]:
        if self._credential_provider is None:
            if self._client is None:
                self._client = self._auth.client()
            return self._client, False, None
        async with asyncio.timeout(self._setup_timeout):
            credential = await self._credential_provider()
        self._secrets.add(credential.token)
        return self._auth.client(credential), True, credential

    async def _close_stranded(self, conn: _Connection | None) -> Literal["closed", "forced"]:
        if conn is None:
            return "closed"
        try:
            async with asyncio.timeout(ABORT_TIMEOUT):
                outcome: Literal["closed", "forced"] = await conn.close()
                return outcome
        except Exception:
            logger.opt(exception=True).debug("{}: closing the stranded {!r} failed", self, conn)
            return "forced"

    def _credential_expired(self, conn: _Connection) -> None:
        self._expiry = None
        attempt_id: str = conn.attempt_id
        if conn is not self._current:
            return
        logger.info("{}: the credential of {} expired", self, attempt_id)
        self._call(self.on_credential_expiry)
        if conn is self._current:
            self._own(asyncio.create_task(self._retire(conn, "credential expired")))

    # --- sending: every client message goes through _send -------------------------------------

    def _send(self, message: ClientMessage) -> int:
        """Queue ``message`` on the current connection; returns its client message index.

        The one send path: it counts every message and refuses, with an error, what no
        connection can take.
        """
        kind = message.kind
        self._sends[kind].attempted += 1
        self._total_sends[kind].attempted += 1
        conn = self._current
        try:
            if conn is None:
                raise NotConnectedError(
                    f"{self} is disconnected" if self._disconnected else f"{self} is not connected"
                )
            index: int = conn.enqueue(message)
            return index
        except TransportError:
            self._sends[kind].refused += 1
            self._total_sends[kind].refused += 1
            raise

    def send_audio(
        self, audio: bytes, *, sample_rate: int = INPUT_SAMPLE_RATE, channels: int = 1
    ) -> None:
        """Send user audio: PCM16 little-endian mono at 16 kHz. Other rates or channel counts
        are refused (resample first); an empty chunk sends nothing."""
        if sample_rate != INPUT_SAMPLE_RATE or channels != 1:
            raise ValueError(
                f"Gemini Live takes 16 kHz mono PCM16; got {sample_rate} Hz, {channels} "
                "channel(s): resample and downmix before sending"
            )
        if len(audio) % 2:
            raise ValueError(f"PCM16 audio has an even number of bytes, not {len(audio)}")
        if audio:
            self._send(ClientMessage.audio(bytes(audio)))

    def commit_audio(self) -> None:
        """The user's audio stream paused (``audioStreamEnd``): the provider may end the turn."""
        self._send(ClientMessage.audio_stream_end())

    def clear_audio(self) -> None:
        """Nothing to clear: Gemini keeps no uncommitted input buffer a client can drop."""

    def send_content(self, turns: Sequence[ContentTurn], turn_complete: bool = True) -> None:
        """Send text turns as conversation content (``client_content``). Gemini 3.x models
        refuse content after their first turn: use ``send_live_text`` with them."""
        contents = tuple(
            types.Content(role=turn.role, parts=[types.Part(text=turn.text)]) for turn in turns
        )
        if not contents:
            raise ValueError("no turns to send: Gemini rejects a content-less request")
        self._send(ClientMessage.content(contents, turn_complete))

    def send_live_text(self, turns: Sequence[ContentTurn]) -> bool:
        """Send text through realtime input: it ends the user's turn and elicits an answer.
        Several turns are joined into one text, each line prefixed with its role. Never
        raises: False when there is no text or no connection."""
        texts = [turn for turn in turns if turn.text]
        if not texts:
            return False
        if len(texts) == 1:
            text = texts[0].text
        else:
            text = "\n".join(f"{turn.role}: {turn.text}" for turn in texts)
        try:
            self._send(ClientMessage.text(text))
        except TransportError as error:
            logger.debug("{}: live text not sent: {}", self, error)
            return False
        return True

    def send_file(self, data: bytes, mime_type: str) -> None:
        """Send an image or a video frame (or audio in its own format) as realtime input.
        Other files go to ``send_inline_file``."""
        major = mime_type.split("/", 1)[0].lower()
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
        part = types.Part(inline_data=types.Blob(data=data, mime_type=mime_type))
        self._send(ClientMessage.content((types.Content(role="user", parts=[part]),), False))

    def send_tool_result(self, result: ToolResult) -> None:
        """Answer a tool call. A result for a call this session never issued is refused with
        ``UnknownToolCallError``: it would strand the model."""
        if not self._tracker.was_issued(result.id):
            self._sends["tool_response"].attempted += 1
            self._total_sends["tool_response"].attempted += 1
            self._sends["tool_response"].refused += 1
            self._total_sends["tool_response"].refused += 1
            raise UnknownToolCallError(
                f"no tool call {result.id!r} was issued by this session: its result would "
                "strand the model"
            )
        response = types.FunctionResponse(
            id=None if result.id in self._without_id else result.id,
            name=result.name,
            response=dict(result.response),
            scheduling=_SCHEDULING[result.scheduling] if result.scheduling else None,
        )
        self._send(ClientMessage.tool_response((response,)))
        self._tracker.tool_result_sent(result.id)

    def trigger_generation(
        self, instructions: str | None = None, overrides: GenerationOverrides | None = None
    ) -> None:
        """Ask for a response. With ``instructions`` they are sent as a user turn that
        elicits it; without, nothing is sent: Gemini answers input and tool results by itself
        and rejects a content-less request. ``overrides`` are not supported by Gemini."""
        if instructions:
            self.send_content([ContentTurn("user", instructions)], turn_complete=True)
        else:
            logger.debug("{}: trigger_generation without instructions sends nothing", self)

    def replay_history(self, items: Sequence[ReplayItem]) -> None:
        """Replay prior turns as quiet context (``client_content``, turn not complete).

        With ``initial_history_in_client_content`` (Gemini 3.x) history is only taken before
        the connection's first realtime input; replaying after it raises ``TransportError``.
        """
        contents = tuple(_replay_content(item) for item in items)
        if not contents:
            return
        conn = self._current
        if (
            conn is not None
            and self._options.initial_history_in_client_content
            and conn.realtime_input_sent
        ):
            raise TransportError(
                "Gemini 3.x takes history only before the connection's first realtime input"
            )
        self._send(ClientMessage.content(contents, False))

    def replay_user_turn(self, turn: RetainedUserTurn) -> bool:
        """Send a retained utterance as inline audio with an explicit turnComplete (no server
        VAD involved). False when there is no audio or no connection."""
        if not turn.pcm:
            return False
        part = types.Part(
            inline_data=types.Blob(data=turn.pcm, mime_type=f"audio/pcm;rate={turn.sample_rate}")
        )
        try:
            self._send(ClientMessage.content((types.Content(role="user", parts=[part]),), True))
        except TransportError as error:
            logger.debug("{}: retained turn not replayed: {}", self, error)
            return False
        return True

    async def update_session(self, update: SessionUpdate) -> None:
        """Apply a session update. Before connecting it shapes the setup; after, updates
        apply in call order and take effect on the next connection, because Gemini cannot
        change a live connection's setup (see ``pending_setup_change``; ``on_cache_bust``
        fires when instructions or tools change)."""
        options = self._options.updated(update)
        if self._current is not None:
            # The next connection's setup rebuilds the prompt cache when these change.
            if options.system_instruction != self._options.system_instruction:
                self._call(self.on_cache_bust, "instructions_changed")
            if options.tools != self._options.tools:
                self._call(self.on_cache_bust, "tools_changed")
        if self._current is not None and options != self._options:
            self._setup_stale = True
            logger.info("{}: session update applies on the next connection", self)
        self._options = options

    async def transfer_session(
        self, update: SessionUpdate, state: ReconnectState | None = None
    ) -> None:
        """Apply ``update`` and move to a new connection that carries it (``reconnect``)."""
        await self.update_session(update)
        await self.reconnect(state)

    async def cancel_response(self, options: CancelResponseOptions | None = None) -> None:
        """Stop the answer in flight. Gemini has no cancel on the wire: the rest of the
        answer's output is suppressed, and it ends as cancelled when the provider's turn ends
        or after 2 s. Idempotent; never raises; calls no callback itself (a resulting
        generation end is delivered from the event loop). ``truncate`` is ignored: Gemini
        cannot truncate."""
        try:
            generation_id = self._tracker.generation_id
            effects = self._tracker.cancel(self._now())
            asyncio.get_running_loop().call_soon(self._apply_and_schedule, effects)
            if (
                options is not None
                and options.wait_for_done
                and generation_id is not None
                and not any(isinstance(e, GenerationEnded) for e in effects)
            ):
                waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                self._end_waiters.setdefault(generation_id, []).append(waiter)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(CANCEL_BOUND):
                        await waiter
        except Exception:
            logger.exception("{}: cancel_response failed", self)

    async def quiesce(self) -> None:
        """Cancel the answer in flight and stop delivering audio until ``unquiesce``."""
        self._quiesced = True
        await self.cancel_response()

    async def unquiesce(self) -> None:
        """Deliver audio again from the next answer."""
        self._quiesced = False

    def clear_resumption(self) -> None:
        """Forget the resumption handle: the next dial opens a fresh server session."""
        self._handle = None

    def get_active_server_turn_id(self) -> int | None:
        """The active server turn's id, None between turns."""
        turn_id: int | None = self._tracker.active_server_turn_id
        return turn_id

    def get_diagnostics(self) -> TransportDiagnostics:
        """Send counters (current connection and total), transport generation, dial gen."""
        return TransportDiagnostics(
            sends={kind: counter.snapshot() for kind, counter in self._sends.items()},
            total_sends={kind: counter.snapshot() for kind, counter in self._total_sends.items()},
            transport_generation=self._transport_generation,
            dial_gen=self._dial_gen,
        )

    # --- what connections report --------------------------------------------------------------

    def _on_message(self, conn: _Connection, message: types.LiveServerMessage) -> None:
        if conn is not self._current:
            return
        try:
            now = self._now()
            for event in self._translator.events(message):
                self._dispatch(event, now)
                if conn is not self._current:
                    break
            self._schedule_tick()
        except Exception:
            logger.exception("{}: failed to handle a server message", self)

    def _on_receive_error(self, conn: _Connection, error: Exception) -> None:
        if conn is not self._current:
            return
        logger.warning("{}: unreadable server frame skipped ({})", self, type(error).__name__)
        self._call(self.on_error, TransportErrorEvent(error, recoverable=True))

    def _on_written(self, conn: _Connection, message: ClientMessage) -> None:
        total = self._total_sends[message.kind]
        total.sent += 1
        total.bytes += message.size
        if conn is self._current:
            current = self._sends[message.kind]
            current.sent += 1
            current.bytes += message.size

    def _on_write_failed(
        self, conn: _Connection, messages: Sequence[ClientMessage], error: Exception
    ) -> None:
        for message in messages:
            self._total_sends[message.kind].failed += 1
            if conn is self._current:
                self._sends[message.kind].failed += 1
        logger.warning(
            "{}: {} message(s) not written on {} ({})",
            self,
            len(messages),
            conn.attempt_id,
            type(error).__name__,
        )
        if conn is self._current:
            self._call(self.on_error, TransportErrorEvent(error, recoverable=True))

    def _on_closed(self, conn: _Connection, code: int | None, reason: str | None) -> None:
        self._expires_at.pop(conn, None)
        attempt_id: str = conn.attempt_id
        if conn is not self._current:
            logger.debug("{}: {} closed after it stopped counting", self, attempt_id)
            return
        logger.info("{}: {} closed ({}, {})", self, attempt_id, code, self._clean(reason))
        self._report_close(conn, code, reason)

    def _report_close(self, conn: _Connection, code: int | None, reason: str | None) -> None:
        """The session's connection ended: detach it, end the answer, tell the framework."""
        self._current = None
        self._cancel_timers()
        self._apply(self._tracker.connection_lost(self._now()))
        self._release_waiters()
        clean = self._clean(reason)
        self._lifecycle(
            GenerationClose(conn.attempt_id, conn.transport_generation or 0, code, clean)
        )
        self._call(self.on_close, code, clean)

    # --- receive-side dispatch ----------------------------------------------------------------

    def _dispatch(self, event: wire.Event, now: float) -> None:
        tracker = self._tracker
        if isinstance(event, wire.ModelAudio):
            self._apply(tracker.model_output(now, "audio"))
            if not tracker.suppressing and not self._quiesced:
                self._call(self.on_audio_output, event.data)
        elif isinstance(event, wire.Usage):
            self._usage(event)
        elif isinstance(event, wire.OutputTranscript):
            self._apply(tracker.model_output(now, "transcript"))
            if not tracker.suppressing:
                self._call(self.on_output_transcription, event.text)
        elif isinstance(event, wire.InputTranscript):
            self._call(self.on_input_transcription, event.text)
        elif isinstance(event, wire.ModelText):
            self._apply(tracker.model_output(now, "text"))
            if not tracker.suppressing:
                self._call(self.on_text_output, event.text)
        elif isinstance(event, wire.ModelThought):
            self._apply(tracker.model_output(now, "thought"))
            if not tracker.suppressing:
                self._call(self.on_reasoning_summary, event.text)
        elif isinstance(event, wire.TurnComplete):
            self._apply(tracker.turn_complete(now))
        elif isinstance(event, wire.GenerationComplete):
            self._apply(tracker.generation_complete(now))
        elif isinstance(event, wire.Interrupted):
            self._apply(tracker.interrupted(now))
        elif isinstance(event, wire.ToolCalls):
            self._tool_calls(event, now)
        elif isinstance(event, wire.ToolCallsCancelled):
            self._apply(tracker.tool_calls_cancelled(now, event.ids))
            self._call(self.on_tool_call_cancel, event.ids)
        elif isinstance(event, wire.ResumptionUpdate):
            if event.handle is not None:
                self._secrets.add(event.handle)
                if event.resumable:
                    self._handle = event.handle
            self._call(
                self.on_resumption_update,
                event.handle,
                event.resumable,
                event.last_consumed_client_message_index,
            )
        elif isinstance(event, wire.GoAway):
            logger.info("{}: goAway, time left {}", self, event.time_left)
            self._call(self.on_go_away, event.time_left, event.seconds)
        elif isinstance(event, wire.Grounding):
            if not tracker.suppressing:
                self._call(self.on_grounding_metadata, event.metadata)
        elif isinstance(event, wire.SpeechStarted):
            self._call(self.on_speech_started)
        elif isinstance(event, wire.SpeechStopped):
            self._call(self.on_user_speech_stopped)

    def _tool_calls(self, event: wire.ToolCalls, now: float) -> None:
        if self._tracker.suppressing:
            logger.info("{}: {} tool call(s) of a cancelled answer dropped", self, len(event.calls))
            return
        self._apply(self._tracker.tool_calls(now, [call.id for call in event.calls]))
        self._without_id.update(event.without_id)
        self._call(self.on_tool_call, event.calls)

    def _usage(self, event: wire.Usage) -> None:
        self._call(
            self.on_usage_metadata,
            TransportUsageMetadata(event.prompt_tokens, event.total_tokens, event.raw),
        )
        tracker = self._tracker
        self._call(
            self.on_realtime_llm_usage,
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

    def _apply(self, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, GenerationStarted):
                self._call(self.on_model_turn_start, effect.generation_id)
                self._call(self.on_generation_start, effect.generation_id)
            elif isinstance(effect, GenerationEnded):
                self._call(self.on_generation_end, effect.generation_id, effect.reason)
                for waiter in self._end_waiters.pop(effect.generation_id, ()):
                    if not waiter.done():
                        waiter.set_result(None)
            elif isinstance(effect, FirstAudio):
                if not self._quiesced:
                    self._call(self.on_first_audio_chunk)
            elif isinstance(effect, TurnCompleted):
                self._call(self.on_turn_complete, effect.server_turn_id)
            elif isinstance(effect, TurnInterrupted):
                self._call(self.on_interrupted, effect.server_turn_id)
            elif isinstance(effect, TextDone):
                self._call(self.on_text_done)
            elif isinstance(effect, ReasoningStarted):
                self._call(self.on_reasoning_start)
            elif isinstance(effect, ReasoningDone):
                self._call(self.on_reasoning_done, ReasoningInfo(effect.duration))

    def _apply_and_schedule(self, effects: list[Effect]) -> None:
        self._apply(effects)
        self._schedule_tick()

    def _schedule_tick(self) -> None:
        # Bounds only run while a connection is current: a close ends the answer anyway.
        deadline = self._tracker.next_deadline if self._current is not None else None
        if self._tick is not None:
            if deadline is not None and self._tick.when() == deadline:
                return
            self._tick.cancel()
            self._tick = None
        if deadline is not None:
            self._tick = asyncio.get_running_loop().call_at(deadline, self._on_tick)

    def _on_tick(self) -> None:
        self._tick = None
        self._apply(self._tracker.tick(self._now()))
        self._schedule_tick()

    # --- helpers ------------------------------------------------------------------------------

    def _call(
        self, callback: Callable[_P, None] | None, *args: _P.args, **kwargs: _P.kwargs
    ) -> None:
        if callback is None:
            return
        try:
            callback(*args, **kwargs)
        except Exception:
            logger.exception("{}: a callback raised; the transport goes on", self)

    def _lifecycle(self, event: ConnectionLifecycleEvent) -> None:
        self._call(self.on_connection_lifecycle, event)

    def _clean(self, text: str | None) -> str | None:
        """``text`` with every secret the transport knows redacted, shortened for logs."""
        if not text:
            return text
        for secret in self._secrets:
            if secret and secret in text:
                text = text.replace(secret, redact(secret))
        return text[:_REASON_LIMIT]

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    def _own(self, task: asyncio.Task[Any]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _cancel_timers(self) -> None:
        for handle in (self._tick, self._expiry):
            if handle is not None:
                handle.cancel()
        self._tick = None
        self._expiry = None

    def _release_waiters(self) -> None:
        waiters, self._end_waiters = self._end_waiters, {}
        for futures in waiters.values():
            for waiter in futures:
                if not waiter.done():
                    waiter.set_result(None)


def _replay_content(item: ReplayItem) -> types.Content:
    if item.tool_call is not None:
        call = item.tool_call
        part = types.Part(
            function_call=types.FunctionCall(id=call.id, name=call.name, args=dict(call.args))
        )
        return types.Content(role="model", parts=[part])
    if item.tool_result is not None:
        result = item.tool_result
        part = types.Part(
            function_response=types.FunctionResponse(
                id=result.id, name=result.name, response=dict(result.response)
            )
        )
        return types.Content(role="user", parts=[part])
    if item.text is None:
        raise ValueError("a replay item needs text, a tool call or a tool result")
    return types.Content(role=item.role, parts=[types.Part(text=item.text)])
