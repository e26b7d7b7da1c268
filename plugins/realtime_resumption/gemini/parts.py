"""``build``: a transport's session parts, made from its ``TransportOptions`` and wired
together.

The parts (``gemini/state.py``'s ``TransportState`` and the bookkeeping it holds, the
``InputPath``, the ``ConnectionRouter``, the ``Dialler``, the ``Switchover``, the
``Rotation``, the ``Receiver``, the ``Persister`` with a store, the ``Lifecycle``, the
``Sends``, the ``Closer``, the ``Opener``, and the telemetry's view of the framework's callbacks) are built
here, in the one order their references allow, so the transport itself only holds and drives
them. Where two parts call each other, the one built first calls the other through a
function that looks it up when called.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from realtime_resumption.gemini.closing import Closer
from realtime_resumption.gemini.connection_router import ConnectionRouter
from realtime_resumption.gemini.dialling import Dialler
from realtime_resumption.gemini.input_path import InputPath
from realtime_resumption.gemini.live_models import traits
from realtime_resumption.gemini.live_options import Auth, StoreOptions
from realtime_resumption.gemini.observed import observed
from realtime_resumption.gemini.opening import Opener
from realtime_resumption.gemini.persistence import Persister
from realtime_resumption.gemini.receive import Receiver
from realtime_resumption.gemini.rotation import Rotation
from realtime_resumption.gemini.sends import INPUT_SAMPLE_RATE, Sends
from realtime_resumption.gemini.state import Callbacks, TransportState
from realtime_resumption.gemini.switchover import Switchover
from realtime_resumption.gemini.transport_options import TransportOptions
from realtime_resumption.gemini.transport_phase import Lifecycle
from realtime_resumption.gemini.watchdog import UserTurnRetainer
from realtime_resumption.generation import GenerationTracker
from realtime_resumption.history import ConversationHistory
from realtime_resumption.redaction import filter_websockets_headers, secret
from realtime_resumption.resumption import ResumptionOptions
from realtime_resumption.store import process_store
from realtime_resumption.telemetry import AVAILABLE as _TELEMETRY_AVAILABLE
from realtime_resumption.telemetry import SessionTelemetry, Telemetry, default_telemetry
from realtime_resumption.tool_calls import ToolCallTracker


@dataclass(frozen=True, eq=False)
class Parts:
    """One transport's session parts (see the module documentation)."""

    auth: Auth
    observer: SessionTelemetry | None
    """The session's telemetry; None when turned off or without OpenTelemetry."""
    state: TransportState
    tracker: GenerationTracker
    input: InputPath
    tools: ToolCallTracker
    history: ConversationHistory
    retained_turn: UserTurnRetainer
    router: ConnectionRouter
    dialler: Dialler
    switchover: Switchover
    rotation: Rotation
    receiver: Receiver
    persister: Persister | None
    """With a ``session_key`` only."""
    lifecycle: Lifecycle
    sends: Sends
    closer: Closer
    opener: Opener


def build(
    owner: Callbacks,
    options: TransportOptions,
    *,
    describe: str,
    number: int,
    end_store: Callable[[], Awaitable[None]],
) -> Parts:
    """The parts of ``owner``'s session, as ``options`` say. ``owner`` is the transport: its
    ``on_*`` attributes are the framework's callbacks; ``describe`` and ``number`` name it
    in logs and task names; ``end_store`` ends the call in the store when the session
    closes."""
    vertex = options.uses_vertex
    observer: SessionTelemetry | None = None
    telemetry = options.telemetry
    if telemetry is True and _TELEMETRY_AVAILABLE:
        telemetry = default_telemetry()
    if isinstance(telemetry, Telemetry):
        observer = telemetry.session(
            provider="gcp.vertex_ai" if vertex else "gcp.gemini", model=options.model
        )
    api_key = options.api_key
    if api_key:
        api_key = secret(api_key)
    filter_websockets_headers()
    auth = Auth(
        api_key=api_key,
        vertexai=vertex,
        project=options.project,
        location=options.location,
        credentials=options.credentials,
        http_options=options.http_options,
    )
    secrets: set[str] = {api_key} if api_key else set()
    secrets.update(secret(s) for s in options.secrets if s)
    tracker = GenerationTracker(tool_call_grace=options.tool_call_grace)
    input_path = InputPath(
        options.input_buffer,
        written=lambda conn, message, results: router.written(conn, message, results),
    )
    tools = ToolCallTracker()
    history = ConversationHistory(options.history_limits)
    retained_turn = UserTurnRetainer(INPUT_SAMPLE_RATE)
    s = TransportState(
        # The parts call the framework's callbacks through the session: with telemetry,
        # its hooks see each call first (the transport's attributes stay the framework's).
        owner if observer is None else observed(owner, observer),
        options=options.setup,
        secrets=secrets,
        tracker=tracker,
        input_path=input_path,
        tools=tools,
        history=history,
        retained_turn=retained_turn,
        credential_expired=lambda conn: router.credential_expired(conn),
    )
    s.traits = traits(
        options.model,
        vertex=vertex,
        in_session_updates=options.in_session_updates,
        mid_session_client_content=options.mid_session_client_content,
    )
    s.results_without_id = vertex
    router = ConnectionRouter(
        s, owner, input_path=input_path, tools=tools, history=history, describe=describe
    )
    dialler = Dialler(
        s,
        hooks=router.hooks,
        auth=auth,
        client=options.client,
        credential_provider=options.credential_provider,
        setup_timeout=options.setup_timeout,
        transparent=options.transparent,
    )
    switchover = Switchover(
        s,
        dialler,
        tracker=tracker,
        input_path=input_path,
        tools=tools,
        history=history,
        deliver=router.deliver,
        turn_cut=router.turn_cut,
    )
    rotation = Rotation(
        s,
        dialler,
        switchover,
        options=options.resumption if options.resumption is not None else ResumptionOptions(),
        policy=options.retry_policy,
        resume_watchdog=options.resume_watchdog,
        enabled=options.rotation,
        replay_turn=lambda: sends.replay_retained_turn(),
    )
    receiver = Receiver(
        s,
        rotation,
        tracker=tracker,
        input_path=input_path,
        tools=tools,
        history=history,
        retained_turn=retained_turn,
    )
    router.bind(dialler=dialler, switchover=switchover, rotation=rotation, receiver=receiver)
    persister = (
        Persister(
            s,
            options.store if options.store is not None else process_store(),
            options.session_key,
            options.store_options or StoreOptions(),
            vertex=vertex,
            report=lambda error: closer.store_error(error),
            describe=describe,
        )
        if options.session_key is not None
        else None
    )
    lifecycle = Lifecycle()
    sends = Sends(
        s,
        lifecycle,
        rotation,
        input_path=input_path,
        tools=tools,
        tracker=tracker,
        history=history,
        retained_turn=retained_turn,
        describe=describe,
    )
    closer = Closer(
        s,
        owner,
        lifecycle,
        router=router,
        dialler=dialler,
        switchover=switchover,
        rotation=rotation,
        end_store=end_store,
        observer=observer,
        input_path=input_path,
        tools=tools,
        describe=describe,
        number=number,
    )
    opener = Opener(
        s,
        owner,
        lifecycle,
        dialler=dialler,
        rotation=rotation,
        closer=closer,
        sends=sends,
        input_path=input_path,
        tools=tools,
        history=history,
        retained_turn=retained_turn,
    )
    return Parts(
        auth=auth,
        observer=observer,
        state=s,
        tracker=tracker,
        input=input_path,
        tools=tools,
        history=history,
        retained_turn=retained_turn,
        router=router,
        dialler=dialler,
        switchover=switchover,
        rotation=rotation,
        receiver=receiver,
        persister=persister,
        lifecycle=lifecycle,
        sends=sends,
        closer=closer,
        opener=opener,
    )
