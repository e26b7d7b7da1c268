"""The provider-connection interface (``LLMTransport``) and its value types.

``LLMTransport`` is what a realtime provider connection offers the framework above it: sends,
callbacks and a paired generation lifecycle. Members that only some transports can honour (the
seed's optional members) are separate protocols (``SupportsCancelResponse``, ``SupportsQuiesce``,
...): check them with ``isinstance`` and take the fallback their docstring names when a
transport lacks one.

Conventions: audio is ``bytes`` (PCM16 little-endian), durations are seconds as ``float``,
callbacks are plain functions (``None`` when unset) called on the event loop, and methods that
wait are ``async``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Literal, Protocol, runtime_checkable

from realtime_resumption.move_reports import MoveOutcome, MoveReport
from realtime_resumption.redaction import redact, secret

# --- Tool calls -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolCall:
    """One function call the model asked for."""

    id: str
    name: str
    args: dict[str, Any] = field(default_factory=dict)


ToolResultScheduling = Literal["interrupt", "when_idle", "silent"]


@dataclass(frozen=True)
class ToolResult:
    """The framework's answer to one ``ToolCall``, matched by ``id``.

    ``scheduling`` is a delivery hint for non-blocking functions; the transport owns the
    timing: ``interrupt`` interrupts the current answer and delivers at once, ``when_idle``
    waits until the model finishes speaking, ``silent`` delivers without eliciting an answer.
    ``None`` leaves it to the provider.
    """

    id: str
    name: str
    response: dict[str, Any] = field(default_factory=dict)
    scheduling: ToolResultScheduling | None = None


# --- Conversation content ---------------------------------------------------------------------


@dataclass(frozen=True)
class ContentTurn:
    """A simple text turn to inject (greeting, directive, typed input); ``model`` is the
    assistant."""

    role: Literal["user", "model"]
    text: str


@dataclass(frozen=True)
class ReplayItem:
    """One completed conversation item, replayed as quiet context into a fresh session.

    Exactly one of ``text``, ``tool_call`` and ``tool_result`` is set.
    """

    role: Literal["user", "model"]
    text: str | None = None
    tool_call: ToolCall | None = None
    tool_result: ToolResult | None = None


@dataclass(frozen=True)
class RetainedUserTurn:
    """The user's most recent utterance, kept to replay a turn the provider never answered."""

    pcm: bytes
    """PCM16 mono at ``sample_rate`` (the transport's input rate)."""
    sample_rate: int
    utterance_id: int
    """The retainer's own identity for the utterance."""
    sealed_at: float
    """When the utterance was sealed (seconds, the retainer's clock): its age decides expiry."""


@dataclass(frozen=True)
class ReconnectState:
    """What a transport needs to recover a session on a new connection."""

    resumption_handle: str | None = field(default=None, repr=False)
    """Provider handle to resume the live session from, when the provider supports it."""
    conversation_history: tuple[ReplayItem, ...] = ()
    """The whole conversation, replayed into a session that has none."""

    def __post_init__(self) -> None:
        # A handle the framework passes in is as secret as one the provider issued.
        if self.resumption_handle is not None:
            object.__setattr__(self, "resumption_handle", secret(self.resumption_handle))

    def __repr__(self) -> str:
        return (
            f"ReconnectState(resumption_handle={redact(self.resumption_handle)}, "
            f"conversation_history=<{len(self.conversation_history)} items>)"
        )


ResponseModality = Literal["audio", "text"]


@dataclass(frozen=True)
class GenerationSettings:
    """How the model generates. ``None`` leaves a setting to the provider's default.

    ``media_resolution``, ``thinking`` and ``proactivity`` take the provider's own values (for
    Gemini: google-genai ``MediaResolution``, ``ThinkingConfig`` and ``ProactivityConfig``, or
    their dict forms).
    """

    temperature: float | None = None
    max_output_tokens: int | None = None
    top_p: float | None = None
    top_k: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    seed: int | None = None
    media_resolution: object | None = None
    thinking: object | None = None
    enable_affective_dialog: bool | None = None
    proactivity: object | None = None

    def merged(self, update: GenerationSettings) -> GenerationSettings:
        """These settings with every setting ``update`` gives (not ``None``) replacing its own."""
        given = {k: v for k, v in vars(update).items() if v is not None}
        return replace(self, **given)


@dataclass(frozen=True)
class SessionUpdate:
    """A partial session update for ``update_session`` and ``transfer_session``.

    ``None`` leaves a setting as it is. ``tools`` are the provider's own declarations (for
    Gemini: google-genai ``Tool``, ``FunctionDeclaration`` or their dict forms); an empty
    sequence removes every tool.
    """

    instructions: str | None = None
    tools: Sequence[object] | None = None
    voice: str | None = None
    response_modality: ResponseModality | None = None
    input_transcription: bool | None = None
    output_transcription: bool | None = None
    generation: GenerationSettings | None = None
    """Generation settings to change; the ones it leaves ``None`` stay as they are."""


ReasoningEffort = Literal["minimal", "low", "medium", "high", "xhigh"]


@dataclass(frozen=True)
class GenerationOverrides:
    """Per-response overrides for ``trigger_generation`` (the seed's interface declares them:
    ``triggerGeneration``'s ``overrides``). Only transports whose capabilities declare
    ``reasoning_effort`` honour one; the others refuse an override that is set with a
    ``ValueError`` naming it, and send nothing."""

    reasoning_effort: ReasoningEffort | None = None


# --- Static descriptions ----------------------------------------------------------------------


@dataclass(frozen=True)
class AudioFormatSpec:
    """Audio format a transport takes in and gives out; input and output rates may differ
    (Gemini: 16 kHz in, 24 kHz out)."""

    input_sample_rate: int
    output_sample_rate: int
    channels: int = 1
    bit_depth: int = 16
    encoding: Literal["pcm"] = "pcm"


@dataclass(frozen=True)
class TransportCapabilities:
    """Static capabilities, read before connecting: frameworks branch on these, never on
    provider names. Every flag defaults to what a minimal transport offers."""

    message_truncation: bool = False
    """Can truncate a server-side message at the audio playback position."""
    turn_detection: bool = False
    """Server-side VAD / end-of-turn detection."""
    user_transcription: bool = False
    """Provides transcriptions of user audio input."""
    in_place_session_update: bool = False
    """Applies session updates without a new connection."""
    session_resumption: bool = False
    """Can resume the server session on a new connection."""
    context_compression: bool = False
    """Supports server-side context compression."""
    grounding_metadata: bool = False
    """Provides grounding metadata with search citations."""
    text_response_modality: bool = False
    """Supports text-only responses (for an external TTS)."""
    parallel_tool_calls: bool = False
    """The model can ask for several function calls in one response."""
    reasoning_effort: bool = False
    """The model has a configurable reasoning-effort dial."""
    automatic_preambles: bool = False
    """The model speaks short preambles by itself before tool calls."""
    quiescible: bool = False
    """Implements ``quiesce``/``unquiesce``; without it the framework guards audio output."""
    playback_gated_turn_complete: bool = False
    """``on_turn_complete`` fires only once the model's audio should have finished playing."""
    greeting_interrupt_grace: float = 0.0
    """Seconds after the session's first audio during which user interrupts are ignored."""
    framework_owns_interrupt: bool = False
    """``cancel_response`` is how the framework stops an answer; the provider does not cancel
    on its own VAD."""
    elicit_response: bool = False
    """Implements ``SupportsElicitResponse``."""
    clear_input_audio: bool = False
    """Implements ``SupportsClearInputAudio``."""
    provider_evidence_kinds: frozenset[str] = frozenset()
    """Kinds of ``on_provider_evidence`` event the transport emits; never any other."""


# --- Generation lifecycle ---------------------------------------------------------------------


class GenerationEndReason(StrEnum):
    """Why a generation (one answer of the model) closed."""

    GENERATION_COMPLETE = "generation_complete"
    """The model finished the answer."""
    INTERRUPTED = "interrupted"
    """The provider cut the answer (the user barged in)."""
    SUPERSEDED = "superseded"
    """A new answer began before the provider said this one was complete."""
    CANCELLED = "cancelled"
    """``cancel_response`` stopped it."""
    DISCONNECTED = "disconnected"
    """The connection closed or the transport was disconnected or aborted."""
    MOVED = "moved"
    """The session moved to a new connection mid-answer (the provider's closing deadline
    forced it, or the framework asked for it): a resumed session does not continue a cut
    answer. When the handle it resumed from predates the question, the question is replayed
    and answered again; otherwise the framework may ask again."""
    TOOL_CALL_ORPHANED = "tool_call_orphaned"
    """The answer waited for a tool call the session lost in a move (a rebuilt session, or one
    resumed from before the call): its result is refused (``ToolCallOrphanedError``) and
    never sent; ``on_tool_call_cancel`` named the call. The framework may ask again."""


@dataclass(frozen=True)
class CancelResponseOptions:
    """Options for ``SupportsCancelResponse.cancel_response``."""

    truncate: float | Literal["generated"] | None = None
    """Truncate the stored assistant audio at this many seconds (``generated``: the
    transport's own count of generated audio). ``None`` skips truncation."""
    wait_for_done: bool = False
    """Return only once the provider confirmed the end of the response, or after 2 s."""


@dataclass(frozen=True)
class ReasoningInfo:
    """The model's reasoning step for a response completed."""

    duration: float
    """Seconds the reasoning step took."""
    reasoning_tokens: int | None = None


# --- Usage ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TransportUsageMetadata:
    """The provider's usage payload for one server message, whole (``raw``), with the two
    fields every provider shares lifted out.

    ``prompt_token_count`` is the standing prompt size, the figure to watch for context growth;
    ``total_token_count`` adds response tokens.
    """

    prompt_token_count: int | None
    total_token_count: int | None
    raw: Mapping[str, Any]


@dataclass(frozen=True)
class UsageModalityBreakdown:
    """Per-modality token counts, where the provider gives them."""

    input_text_tokens: int | None = None
    input_audio_tokens: int | None = None
    input_image_tokens: int | None = None
    cached_tokens: int | None = None
    output_text_tokens: int | None = None
    output_audio_tokens: int | None = None
    reasoning_tokens: int | None = None


@dataclass(frozen=True)
class RealtimeLLMUsage:
    """Normalised usage: provider-reported billable units only (no prices)."""

    provider: Literal["gemini_live", "openai_realtime"]
    kind: Literal["response", "input_transcription"]
    phase: Literal["update", "final"]
    """``final`` when the usage came with the end of the server turn."""
    unit: Literal["tokens", "duration_seconds"]
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    duration: float | None = None
    """Seconds, when ``unit`` is ``duration_seconds``."""
    modality_breakdown: UsageModalityBreakdown | None = None
    server_turn_id: int | None = None
    """The server turn the usage belongs to, so it can be attributed after the turn ended."""
    server_turn_winding_down: bool = False
    """The server turn was ending (completed or interrupted) when the usage arrived."""
    provider_raw: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ProviderEvidenceEvent:
    """A normalised piece of provider evidence (kinds declared in the capabilities)."""

    kind: str
    data: Mapping[str, Any] = field(default_factory=dict)


# --- Connection lifecycle ---------------------------------------------------------------------


@dataclass(frozen=True)
class ConnectFailure:
    """Why a connection attempt failed.

    ``message`` is the transport's own words and is always safe to log. ``provider_text`` is
    whatever the provider or the network said (a close reason, an HTTP body): it may hold
    anything, so it is kept apart, hidden from the repr, and logged only through ``redact``.
    """

    kind: Literal["timeout", "refused", "closed", "unreachable", "error"]
    message: str
    code: int | None = None
    """WebSocket close code or HTTP status, when there was one."""
    provider_text: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class ConnectAttempt:
    """A dial started."""

    connect_attempt_id: str
    handle_supplied: bool
    """The dial resumes a session with a handle."""
    kind: Literal["attempt"] = field(default="attempt", init=False)


@dataclass(frozen=True)
class SetupOk:
    """The attempt completed its setup: a new transport generation."""

    connect_attempt_id: str
    transport_generation: int
    session_id: str | None = None
    kind: Literal["setup-ok"] = field(default="setup-ok", init=False)


@dataclass(frozen=True)
class SetupFailed:
    """The attempt failed before its setup completed."""

    connect_attempt_id: str
    failure: ConnectFailure
    kind: Literal["setup-failed"] = field(default="setup-failed", init=False)


@dataclass(frozen=True)
class AttemptClose:
    """The socket of an attempt closed before its setup completed (``setup-failed`` follows)."""

    connect_attempt_id: str
    code: int | None
    reason: str | None
    """Redacted and shortened; it may still hold provider text."""
    kind: Literal["attempt-close"] = field(default="attempt-close", init=False)


@dataclass(frozen=True)
class GenerationClose:
    """A connection that completed its setup closed."""

    connect_attempt_id: str
    transport_generation: int
    code: int | None
    reason: str | None
    """Redacted and shortened; it may still hold provider text."""
    kind: Literal["generation-close"] = field(default="generation-close", init=False)


ConnectionLifecycleEvent = ConnectAttempt | SetupOk | SetupFailed | AttemptClose | GenerationClose
"""One event per observable connection transition, correlated by ``connect_attempt_id``.

A socket that dies before its setup completes has no transport generation: that is why the
close event of an attempt (``AttemptClose``) and of a generation (``GenerationClose``) differ.
More than one event can describe one attempt.
"""


@dataclass(frozen=True)
class TransportErrorEvent:
    """A transport-level error reported through ``on_error``, with a recovery signal."""

    error: BaseException
    recoverable: bool


# --- Diagnostics ------------------------------------------------------------------------------

SendKind = Literal[
    "audio",
    "video",
    "text",
    "content",
    "tool_response",
    "audio_stream_end",
    "activity_start",
    "activity_end",
    "context_update",
]
"""Kinds of client message a transport counts."""


@dataclass(frozen=True)
class SendCounter:
    """Upstream accounting for one kind of client message."""

    attempted: int = 0
    """Calls that asked to send."""
    sent: int = 0
    """Messages written to the socket."""
    refused: int = 0
    """Calls refused with an error (not connected, closed, queue full)."""
    failed: int = 0
    """Accepted messages whose write failed because the connection died."""
    bytes: int = 0
    """Payload bytes written (audio and media raw, text as UTF-8)."""


@dataclass(frozen=True)
class MoveStats:
    """The session's moves between connections, for diagnostics."""

    counts: Mapping[MoveOutcome, int]
    """Finished moves per outcome."""
    in_progress: bool
    """A move is running now."""
    recent: tuple[MoveReport, ...]
    """The latest reports, oldest first."""


@dataclass(frozen=True)
class InputStats:
    """The input buffer that carries client messages across moves, for diagnostics."""

    buffered: int
    """Messages waiting for a connection now."""
    submitted: int
    """Messages the framework sent since the session started."""
    written: int
    """Writes to a connection, replays included."""
    replayed: int
    """Of ``written``: messages written again after a move (the resumed session lacked them)."""
    audio_chunks_dropped: int
    """Audio chunks given up past the buffer's bounds before any connection got them; audio a
    resumed session lacked and no longer held is counted in that move's report."""
    audio_seconds_dropped: float
    video_frames_dropped: int
    tool_responses_discarded: int
    """Tool responses not sent because their session was gone."""
    silence_seconds_skipped: float = 0.0
    """Silent audio held beyond the padding around speech, never sent or replayed: not a loss
    (``OutboxLimits.silence_padding``)."""


@dataclass(frozen=True)
class TransportDiagnostics:
    """Point-in-time transport diagnostics; safe to sample on any tick."""

    sends: Mapping[SendKind, SendCounter]
    """Counters of the current connection: a new connection starts at zero when its setup
    completes."""
    total_sends: Mapping[SendKind, SendCounter]
    """Counters since the transport was made."""
    transport_generation: int
    """Advances on each connection that completes its setup."""
    dial_gen: int
    """Advances per dial, when a dial fails and when the incumbent is aborted."""
    moves: MoveStats | None = None
    """Moves between connections, on transports that move sessions."""
    input: InputStats | None = None
    """The input buffer, on transports that hold input across moves."""


# --- Errors -----------------------------------------------------------------------------------


class TransportError(Exception):
    """Base of the errors a transport raises."""


class NotConnectedError(TransportError):
    """A send or a session call needs a live connection and there is none."""


class SendQueueFullError(TransportError):
    """The connection's outgoing queue is full: the socket has stopped taking data."""


class MessageTooLargeError(TransportError, ValueError):
    """A client message is larger than the service takes. Raised at the call for a message
    over the transport's bound (``realtime_resumption.gemini.messages.MAX_MESSAGE_BYTES``);
    reported through ``on_error`` (recoverable) when the service refused one anyway (close
    1009): that message is dropped, never replayed, and the session goes on without it (a
    tool call it answered waits for a smaller result)."""


class UnknownToolCallError(TransportError, ValueError):
    """A tool result names a call id this session never issued; sending it would strand the
    model."""


class ToolCallOrphanedError(UnknownToolCallError):
    """The tool call was issued by a server session a move left behind (a rebuilt session, or
    one resumed from before the call): the live session never issued it, so its result is not
    sent. The call's answer ended as ``GenerationEndReason.TOOL_CALL_ORPHANED``."""

    def __init__(self, call_id: str) -> None:
        super().__init__(
            f"tool call {call_id!r} belongs to a session the transport moved away from: "
            "its result is not sent (the model may ask again)"
        )
        self.call_id = call_id


class SessionLostError(TransportError):
    """The session could not be carried to a new connection (no handle and no history to
    rebuild from, or every attempt failed): it is over. Reported through ``on_error`` with
    ``recoverable=False``, before ``on_close``."""


class SetupRefusedError(TransportError):
    """The service refused a setup a session update asked for (an unknown voice, say): the
    session goes on with the setup it had (a recoverable error)."""


class ConnectError(TransportError):
    """A connection attempt failed; ``failure`` tells why (its ``message`` is the text)."""

    def __init__(self, failure: ConnectFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


class DialAbandonedError(TransportError):
    """The dial completed after the transport moved on (aborted or disconnected); its
    connection was closed unused."""


# --- The interface ----------------------------------------------------------------------------


class LLMTransport(Protocol):
    """A realtime provider connection, as the framework above it drives it.

    Sends that return nothing are synchronous and never block: they queue in order (a
    transport that moves its session between connections holds them during a move and
    delivers them after), or raise a clear error when no session is up to take them.
    Callbacks are attributes, ``None`` by default; a transport never calls one it cannot
    produce. A callback that raises is logged and does not stop the transport.

    Members only some transports offer are the ``Supports*`` protocols in this module.
    """

    @property
    def capabilities(self) -> TransportCapabilities:
        """Static capabilities, read before connecting."""
        ...

    @property
    def audio_format(self) -> AudioFormatSpec:
        """The audio the transport takes in and gives out."""
        ...

    @property
    def is_connected(self) -> bool:
        """A connection is up and takes input."""
        ...

    async def connect(self, config: SessionUpdate | None = None) -> None:
        """Open the connection; returns once the provider's setup completed. ``config`` is
        applied before connecting."""
        ...

    async def disconnect(self) -> None:
        """Close the connection and stop everything the transport runs. Idempotent."""
        ...

    async def reconnect(self, state: ReconnectState | None = None) -> None:
        """Close the connection and open a new one, resuming with ``state``'s handle (or the
        transport's own latest one), and replay ``state``'s history into a fresh session."""
        ...

    def send_audio(self, audio: bytes) -> None:
        """Send user audio in ``audio_format`` (input side)."""
        ...

    def commit_audio(self) -> None:
        """The user's audio stream paused: let the provider end the turn now."""
        ...

    def clear_audio(self) -> None:
        """Drop input audio the provider buffered and has not committed."""
        ...

    async def update_session(self, update: SessionUpdate) -> None:
        """Apply a session update. Before connecting: coalesces with earlier updates into the
        setup the connection sends. After: updates apply one at a time, in call order."""
        ...

    async def transfer_session(
        self, update: SessionUpdate, state: ReconnectState | None = None
    ) -> None:
        """Move the session to a new configuration (agent transfer); the transport decides
        whether that needs a new connection."""
        ...

    def send_content(self, turns: Sequence[ContentTurn], turn_complete: bool = True) -> None:
        """Inject text turns (greetings, directives, typed input), not replay."""
        ...

    def send_file(self, data: bytes, mime_type: str) -> None:
        """Send an image or a video frame as realtime input."""
        ...

    def send_tool_result(self, result: ToolResult) -> None:
        """Answer a tool call of this session. Raises ``UnknownToolCallError`` for a call the
        session never issued, and its subclass ``ToolCallOrphanedError`` for a call of a
        session a move left behind: neither result is sent."""
        ...

    def trigger_generation(
        self, instructions: str | None = None, overrides: GenerationOverrides | None = None
    ) -> None:
        """Ask the model to respond; ``instructions`` is a one-off instruction for this
        response only."""
        ...

    on_audio_output: Callable[[bytes], None] | None
    """Model audio in ``audio_format`` (output side)."""
    on_tool_call: Callable[[Sequence[ToolCall]], None] | None
    on_tool_call_cancel: Callable[[Sequence[str]], None] | None
    on_turn_complete: Callable[[int | None], None] | None
    """The server turn with this monotonic id completed (``None`` for transports without
    server turns). Consumers de-duplicate finalisation by the id."""
    on_interrupted: Callable[[int | None], None] | None
    """The server turn with this id was interrupted (see ``on_turn_complete``)."""
    on_input_transcription: Callable[[str], None] | None
    """User-speech transcription as incremental deltas, not the utterance restated: consumers
    accumulate across calls and reset at each utterance boundary."""
    on_output_transcription: Callable[[str], None] | None
    on_session_ready: Callable[[str], None] | None
    """The connection is ready; the argument is the provider's session id (may be empty)."""
    on_error: Callable[[TransportErrorEvent], None] | None
    on_close: Callable[[int | None, str | None], None] | None
    """The session's connection ended for good: close code and a redacted reason. Once per
    session (``disconnect``, a lost session, or any close when the transport does not move
    sessions). A connection a move replaces reports through ``on_connection_lifecycle``
    only."""
    on_model_turn_start: Callable[[str | None], None] | None
    """The model began a response (audio, text, tool call). Transports that model generations
    pass the generation id: once per generation, the same id as ``on_generation_start``."""
    on_generation_start: Callable[[str], None] | None
    """A generation (one answer) opened. Paired with exactly one ``on_generation_end``; it
    outlives the provider's turn boundary when a tool call that finishes the answer comes
    after it."""
    on_generation_end: Callable[[str, GenerationEndReason], None] | None
    """That generation closed, and why. Exactly once per start."""
    on_first_audio_chunk: Callable[[], None] | None
    """Once per response, on its first audio chunk: the anchor for first-audio latency."""
    on_text_output: Callable[[str], None] | None
    """Incremental text of a text-modality response."""
    on_text_done: Callable[[], None] | None
    """All text of the current response was delivered: after every ``on_text_output``, before
    ``on_turn_complete``."""
    on_speech_started: Callable[[], None] | None
    """The provider detected user speech."""
    on_user_speech_stopped: Callable[[], None] | None
    """The provider's VAD detected the end of user speech."""
    on_go_away: Callable[[str | None, float | None], None] | None
    """The provider will close the connection: its raw notice (``None`` when it gave none)
    and the notice parsed to seconds (``None`` when absent or malformed)."""
    on_resumption_update: Callable[[str | None, bool, int | None], None] | None
    """New resumption state: the handle (``None`` when the update carried none), whether the
    session is resumable from it, and the index of the last client message the state includes
    (``None`` unless the provider sends it)."""
    on_credential_expiry: Callable[[], None] | None
    """The credential of the current connection expired. A transport that moves sessions moves
    to a new connection (with a new credential); otherwise, right after this returns, it
    closes the connection (unless ``disconnect`` already detached it) and reports the close
    through ``on_close`` and a ``GenerationClose`` event: a consumer that can reconnect should
    start that synchronously."""
    on_grounding_metadata: Callable[[Mapping[str, Any]], None] | None
    on_realtime_llm_usage: Callable[[RealtimeLLMUsage], None] | None
    """Normalised usage, for billing and observability."""
    on_usage_metadata: Callable[[TransportUsageMetadata], None] | None
    """The provider's raw usage, once per server message that carries it."""
    on_connection_lifecycle: Callable[[ConnectionLifecycleEvent], None] | None
    """Connection facts (attempt, setup, close). ``SetupFailed.failure`` and close reasons may
    hold provider text: see ``ConnectFailure`` before logging it."""
    on_reasoning_start: Callable[[], None] | None
    """The model began its hidden reasoning for the current response."""
    on_reasoning_done: Callable[[ReasoningInfo], None] | None
    """The reasoning step completed, before the answer's audio or text."""
    on_reasoning_summary: Callable[[str], None] | None
    """A chunk of the reasoning summary: for operators' telemetry, never for end users."""
    on_cache_bust: Callable[[Literal["instructions_changed", "tools_changed"]], None] | None
    """An update is about to change instructions or tools: the prompt cache will be rebuilt."""
    on_provider_evidence: Callable[[ProviderEvidenceEvent], None] | None
    """Normalised provider evidence, of the kinds ``capabilities.provider_evidence_kinds``
    declares."""


@runtime_checkable
class SupportsCancelResponse(Protocol):
    """Cancels the response in flight. Without it, the framework finalises the turn itself and
    ignores the rest of the answer.

    The seed's ``LLMTransport`` declares it as an optional member: ``cancelResponse``."""

    async def cancel_response(self, options: CancelResponseOptions | None = None) -> None:
        """Cancel the in-flight response. Idempotent; never raises; never calls
        ``on_interrupted`` or any other framework callback (the caller finalises the turn).
        With ``wait_for_done`` it returns once the provider ended the response or after 2 s."""
        ...


@runtime_checkable
class SupportsQuiesce(Protocol):
    """Pauses the transport without disconnecting. Without it the framework guards audio
    output itself.

    The seed's ``LLMTransport`` declares them as optional members: ``quiesce`` and
    ``unquiesce``."""

    async def quiesce(self) -> None:
        """Cancel any response in flight and suppress ``on_audio_output`` until ``unquiesce``;
        the connection and the conversation stay. Idempotent."""
        ...

    async def unquiesce(self) -> None:
        """Resume: ``on_audio_output`` fires again from the next response. Idempotent."""
        ...


@runtime_checkable
class SupportsReplayHistory(Protocol):
    """Prefills a session that has no server-side conversation.

    The seed's ``LLMTransport`` declares it as an optional member: ``replayHistory``."""

    def replay_history(self, items: Sequence[ReplayItem]) -> None:
        """Replay prior turns as quiet context (no response requested). Called after
        ``connect`` and before the next send; not idempotent: send a conversation to a
        connection once. Without it there is no prefill."""
        ...


@runtime_checkable
class SupportsReplayUserTurn(Protocol):
    """Re-sends a retained user utterance, for a turn the provider never answered.

    The seed's ``LLMTransport`` declares it as an optional member: ``replayUserTurn``."""

    def replay_user_turn(self, turn: RetainedUserTurn) -> bool:
        """Send ``turn`` as a complete user turn that elicits a response. True when dispatched;
        on False (or without this member) the caller takes its own fallback."""
        ...


@runtime_checkable
class SupportsLiveText(Protocol):
    """Sends generation-triggering text through the provider's realtime input.

    The seed's ``LLMTransport`` declares it as an optional member: ``sendLiveText``."""

    def send_live_text(self, turns: Sequence[ContentTurn]) -> bool:
        """True when dispatched or queued; False when it was not (no text, not connected, a
        failed send). Never raises. Without it, use ``send_content(turns, True)``."""
        ...


@runtime_checkable
class SupportsInlineFile(Protocol):
    """Sends a file of any type inline in the conversation content.

    The seed's ``LLMTransport`` declares it as an optional member: ``sendInlineFile``."""

    def send_inline_file(self, data: bytes, mime_type: str) -> None:
        """Add the file to the conversation without completing the turn. Without it, files go
        to ``send_file``."""
        ...


@runtime_checkable
class SupportsElicitResponse(Protocol):
    """Re-elicits a response from the existing context without new content.

    The seed's ``LLMTransport`` declares it as an optional member: ``elicitResponse``."""

    def elicit_response(self) -> None:
        """Best effort; only for providers that accept a content-less request. Without it,
        callers use ``trigger_generation``."""
        ...


@runtime_checkable
class SupportsClearInputAudio(Protocol):
    """Clears a server-side append-then-commit input-audio buffer.

    The seed's ``LLMTransport`` declares it as an optional member: ``clearInputAudio``."""

    def clear_input_audio(self) -> None:
        """Discard the provider's pending input audio; safe when it is empty."""
        ...


@runtime_checkable
class SupportsClearResumption(Protocol):
    """Forgets the session resumption handle.

    The seed's ``LLMTransport`` declares it as an optional member: ``clearResumption``."""

    def clear_resumption(self) -> None:
        """Drop every copy of the handle the transport holds, so the next dial opens a fresh
        server session. The connection itself is untouched."""
        ...


@runtime_checkable
class SupportsServerTurns(Protocol):
    """Models the provider's server turns explicitly.

    The seed's ``LLMTransport`` declares it as an optional member: ``getActiveServerTurnId``."""

    def get_active_server_turn_id(self) -> int | None:
        """The active server turn's id, or None when no server turn is active. Active-only:
        never a stale id between turns. Read it from a model-output callback to bind the
        framework's turn to the server turn."""
        ...


@runtime_checkable
class SupportsDiagnostics(Protocol):
    """Counts what it sends.

    The seed's ``LLMTransport`` declares it as an optional member: ``getDiagnostics``."""

    def get_diagnostics(self) -> TransportDiagnostics:
        """A snapshot of the send counters and the transport generation."""
        ...


@runtime_checkable
class SupportsDialGenerations(Protocol):
    """Fences connections by dial generation.

    The seed's ``LLMTransport`` declares them as optional members: ``currentDialGen``,
    ``currentTransportGeneration`` and ``abortIncumbent``."""

    @property
    def current_dial_gen(self) -> int:
        """Advances per dial and when the current dial fails."""
        ...

    @property
    def current_transport_generation(self) -> int:
        """Advances only when a connection completes its setup."""
        ...

    def abort_incumbent(self) -> Awaitable[Literal["closed", "forced"]]:
        """Strand the incumbent connection at once, before returning: advance the dial
        generation so that neither its callbacks, nor a reconnect in flight, nor a dial that
        completes later can deliver or install anything; detach it; drop the resumption
        handle. The returned awaitable closes it within a bound and never raises: ``closed``
        when the close completed, ``forced`` on timeout or error."""
        ...
