"""``TransportOptions``: everything a ``GeminiLiveTransport`` is built from, checked once.

They sit beside ``LiveOptions`` rather than inside it. ``LiveOptions`` is the setup message:
it changes with every session update, is compared to the live connection's to know whether
that one runs a stale setup, and is kept in the store's record of the call. The transport's
own options are fixed for its life and never go on the wire or into the store: how to reach
the service (keys, a ready client, a credential provider: secrets), how to move (rotation,
retries, buffers), where to keep the call and where its telemetry goes. ``setup`` gives the
first ``LiveOptions`` from them.

An adapter builds these once and hands them to each transport it makes
(``GeminiLiveTransport(options)``), changing what a session changes with
``dataclasses.replace``; an app may pass the same fields as keywords to the transport.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypedDict

from google import genai
from google.genai import types

from realtime_resumption.failures import RetryPolicy
from realtime_resumption.gemini.live_options import (
    DEFAULT_MODEL,
    DEFAULT_SETUP_TIMEOUT,
    CredentialProvider,
    LiveOptions,
    StoreOptions,
    check_arguments,
    normalise_tools,
    sliding_window,
)
from realtime_resumption.gemini.rotation import DEFAULT_RETRY_BUDGET
from realtime_resumption.gemini.watchdog import DEFAULT_RESUME_WATCHDOG
from realtime_resumption.generation import TOOL_CALL_GRACE
from realtime_resumption.history import HistoryLimits
from realtime_resumption.outbox import OutboxLimits
from realtime_resumption.redaction import redact
from realtime_resumption.resumption import ResumptionOptions
from realtime_resumption.store import SessionStore
from realtime_resumption.telemetry import Telemetry
from realtime_resumption.transport import GenerationSettings, ResponseModality


@dataclass(frozen=True, kw_only=True)
class TransportOptions:
    """What a ``GeminiLiveTransport`` is built from. Arguments that do not go together raise
    ``ValueError`` here (saying which), tools that are not tools ``TypeError``, generation
    settings the SDK does not take ``ValueError``: before anything is built.

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
    moves the session on request. ``tool_call_grace`` is how long an answer that asked for
    tool calls stays open for their results; ``history_limits`` bounds the conversation kept
    for a rebuild.

    Calls that survive the worker: with ``session_key`` (the app's id of the call) the
    transport keeps its session's state in ``store`` (a ``SessionStore``; the process's
    ``MemoryStore`` by default, ``RedisStore`` to outlive the process), written in the
    background at most once per ``store_options.write_interval``, encrypted with
    ``store_options.encryption_key`` when one is given; ``connect`` then takes over a call
    another process left there (see ``connect``), and ``disconnect`` deletes it. Store errors
    are reported through ``on_error`` (recoverable) and never stop the call.

    ``telemetry``: the OpenTelemetry providers' spans and metrics (True: the global ones, when
    the OpenTelemetry API is installed), a ``Telemetry`` of the app's, or False for none.
    """

    api_key: str | None = field(default=None, repr=False)
    vertexai: bool = False
    project: str | None = None
    location: str | None = None
    credentials: object | None = field(default=None, repr=False)
    model: str = DEFAULT_MODEL
    voice: str | None = None
    language: str | None = None
    response_modality: ResponseModality = "audio"
    system_instruction: str | None = None
    tools: Sequence[object] = ()
    """Kept as given here; ``setup`` holds them as google-genai ``Tool`` objects."""
    input_audio_transcription: bool = True
    output_audio_transcription: bool = True
    realtime_input_config: types.RealtimeInputConfig | None = None
    context_window_compression: types.ContextWindowCompressionConfig | None = field(
        default_factory=sliding_window
    )
    """A sliding window by default (``live_options.DEFAULT_COMPRESSION``); None: off."""
    generation: GenerationSettings | None = None
    http_options: types.HttpOptions | None = None
    credential_provider: CredentialProvider | None = field(default=None, repr=False)
    client: genai.Client | None = field(default=None, repr=False)
    setup_timeout: float = DEFAULT_SETUP_TIMEOUT
    transparent: bool = False
    initial_history_in_client_content: bool = False
    in_session_updates: bool | None = None
    mid_session_client_content: bool | None = None
    tool_call_grace: float = TOOL_CALL_GRACE
    resumption: ResumptionOptions | None = None
    input_buffer: OutboxLimits | None = None
    retry_budget: int | RetryPolicy = DEFAULT_RETRY_BUDGET
    resume_watchdog: float | None = DEFAULT_RESUME_WATCHDOG
    rotation: bool = True
    history_limits: HistoryLimits | None = None
    secrets: Sequence[str] = field(default=(), repr=False)
    telemetry: Telemetry | bool = True
    store: SessionStore | None = None
    session_key: str | None = field(default=None, repr=False)
    store_options: StoreOptions | None = None
    setup: LiveOptions = field(init=False, repr=False, compare=False)
    """The first connection's setup (every later one is this with the session's updates)."""
    uses_vertex: bool = field(init=False, repr=False, compare=False)
    """Vertex AI, not the Gemini API: a ready client's own choice, else ``vertexai`` or a
    project or location."""

    def __post_init__(self) -> None:
        vertex = check_arguments(
            response_modality=self.response_modality,
            setup_timeout=self.setup_timeout,
            client=self.client,
            api_key=self.api_key,
            credentials=self.credentials,
            http_options=self.http_options,
            credential_provider=self.credential_provider,
            vertexai=self.vertexai,
            project=self.project,
            location=self.location,
            transparent=self.transparent,
            has_store=self.store is not None,
            session_key=self.session_key,
        )
        setup = LiveOptions(
            model=self.model,
            voice=self.voice,
            language=self.language,
            response_modality=self.response_modality,
            system_instruction=self.system_instruction,
            tools=normalise_tools(self.tools),
            input_audio_transcription=self.input_audio_transcription,
            output_audio_transcription=self.output_audio_transcription,
            realtime_input_config=self.realtime_input_config,
            context_window_compression=self.context_window_compression,
            initial_history_in_client_content=self.initial_history_in_client_content,
            generation=self.generation or GenerationSettings(),
        )
        # Derived once, here: frozen fields are set the way dataclasses set them.
        object.__setattr__(self, "uses_vertex", vertex)
        object.__setattr__(self, "setup", setup)

    def __repr__(self) -> str:
        return (
            f"TransportOptions(model={self.model!r}, vertex={self.uses_vertex}, "
            f"api_key={redact(self.api_key)}, session_key={redact(self.session_key)})"
        )

    @property
    def retry_policy(self) -> RetryPolicy:
        """``retry_budget`` as a policy (a number is a budget of failed attempts)."""
        budget = self.retry_budget
        return budget if isinstance(budget, RetryPolicy) else RetryPolicy(attempts=budget)


class TransportKeywords(TypedDict, total=False):
    """``TransportOptions``' fields as keyword arguments (``GeminiLiveTransport(**keywords)``,
    typed); the defaults and their meaning are ``TransportOptions``'."""

    api_key: str | None
    vertexai: bool
    project: str | None
    location: str | None
    credentials: object | None
    model: str
    voice: str | None
    language: str | None
    response_modality: ResponseModality
    system_instruction: str | None
    tools: Sequence[object]
    input_audio_transcription: bool
    output_audio_transcription: bool
    realtime_input_config: types.RealtimeInputConfig | None
    context_window_compression: types.ContextWindowCompressionConfig | None
    generation: GenerationSettings | None
    http_options: types.HttpOptions | None
    credential_provider: CredentialProvider | None
    client: genai.Client | None
    setup_timeout: float
    transparent: bool
    initial_history_in_client_content: bool
    in_session_updates: bool | None
    mid_session_client_content: bool | None
    tool_call_grace: float
    resumption: ResumptionOptions | None
    input_buffer: OutboxLimits | None
    retry_budget: int | RetryPolicy
    resume_watchdog: float | None
    rotation: bool
    history_limits: HistoryLimits | None
    secrets: Sequence[str]
    telemetry: Telemetry | bool
    store: SessionStore | None
    session_key: str | None
    store_options: StoreOptions | None
