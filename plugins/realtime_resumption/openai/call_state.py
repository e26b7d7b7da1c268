"""``CallState``: what the parts of an ``OpenAIRealtimeTransport`` share about the call.

The session that serves the call, the configuration the next session is given, the answer in
progress (the generation tracker, its effects turned into the framework's callbacks here), the
function calls open, the client's items no echo confirmed yet, and the tasks the transport
owns. The parts (``realtime_sends``, ``realtime_receive``, ``realtime_timing``,
``realtime_moves``, ``realtime_dialling``, ``realtime_persistence``) read it and change it;
what only one part decides (the input held during a move, the move in progress, the timing,
the dial count) is that part's.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from loguru import logger

from realtime_resumption.callbacks import TransportCallbacks, callbacks_of
from realtime_resumption.generation import (
    Effect,
    GenerationEnded,
    GenerationTracker,
)
from realtime_resumption.openai.conversation_state import ConversationState
from realtime_resumption.openai.realtime_connection import RealtimeConnection
from realtime_resumption.openai.realtime_options import OpenAIRealtimeOptions
from realtime_resumption.openai.session_config import Flavour, SessionConfig
from realtime_resumption.telemetry import SessionTelemetry


def call_arguments(text: str | None) -> dict[str, Any]:
    """A function call's arguments as the app is given them (text that is no JSON object is
    given whole, under ``_raw``)."""
    try:
        args = json.loads(text) if text else {}
    except ValueError:
        return {"_raw": text}
    return args if isinstance(args, dict) else {"_raw": args}


def new_item_id() -> str:
    """A client item id: short enough for the service's id limit, unique per call."""
    return f"rr_{uuid.uuid4().hex[:24]}"


@dataclass
class OpenSession:
    """One server session the transport has open: its socket and what it holds."""

    conn: RealtimeConnection
    state: ConversationState
    attempt: str
    """The dial's ``connect_attempt_id``."""
    created_at: float | None = None
    """The event loop's time at its ``session.created`` (the cap counts from it)."""
    closes_at: float | None = None
    """When the service's cap closes it (None: no cap counted)."""
    sent: deque[tuple[int, bytes]] = field(default_factory=deque)
    """With a store: the audio appended to it that a record may still need, each chunk as
    sent with where it starts in the session's input (``ConversationState.appended_bytes``)."""


def check_formats(config: SessionConfig) -> None:
    """Refuse a configuration whose audio is not PCM16 (the only audio the transport carries)."""
    for fmt in (config.input_format, config.output_format):
        if fmt.encoding != "pcm":
            raise ValueError("OpenAIRealtimeTransport carries PCM16 audio only")


class CallState:
    """What the transport's parts share (see the module documentation). ``callbacks`` is the
    transport: its ``on_*`` attributes are the framework's callbacks."""

    def __init__(
        self,
        callbacks: TransportCallbacks,
        options: OpenAIRealtimeOptions,
        flavour: Flavour,
        config: SessionConfig,
        telemetry: SessionTelemetry | None,
    ) -> None:
        check_formats(config)
        self.callbacks = callbacks
        self.options = options
        self.flavour: Flavour = flavour
        self.telemetry = telemetry
        self.tracker = GenerationTracker()
        self._config = config
        self.session: OpenSession | None = None
        """The session that serves the call (None before ``connect``, and while a move
        replaces a session that was lost)."""
        self.calls: dict[str, str] = {}
        """Open function calls: call id to name, until their output is sent."""
        self.orphaned: set[str] = set()
        """Function calls a move could not carry (the seed's budget left them out)."""
        self.unconfirmed: dict[str, dict[str, Any]] = {}
        """Items the client created that no ``conversation.item.*`` echo confirmed yet."""
        self.response_requested = False
        """A ``response.create`` was sent and no ``response.created`` came since."""
        self.cancelled: str | None = None
        """The response ``cancel_response`` cancelled, until its ``response.done``."""
        self.audio_item: str | None = None
        """The assistant item whose audio arrived last (what a truncate cuts)."""
        self.closed = False
        """The transport stopped (disconnected, lost, or ended here): nothing moves or ticks."""
        self.handed_over = False
        """``hand_over`` saved the call and gave it up: input is refused from then on."""
        self._tasks: set[asyncio.Task[Any]] = set()
        self._tick: asyncio.TimerHandle | None = None
        self._answer_ended: asyncio.Future[None] | None = None

    @property
    def config(self) -> SessionConfig:
        """The configuration the next session is given."""
        return self._config

    def set_config(self, config: SessionConfig) -> None:
        """Make ``config`` the configuration (refused unless its audio is PCM16)."""
        check_formats(config)
        self._config = config

    @property
    def bytes_per_ms(self) -> int:
        """Bytes of the input's audio per millisecond."""
        return self._config.input_format.bytes_per_ms

    @staticmethod
    def now() -> float:
        """The event loop's time, the clock of every timer of the transport."""
        return asyncio.get_running_loop().time()

    # --- the framework's callbacks ----------------------------------------------------------

    def emit(self, name: str, *args: Any) -> None:
        """Call the framework's callback ``name`` (after the telemetry's hook of that name,
        if it has one); one that raises is logged and changes nothing else."""
        hook = getattr(self.telemetry, name, None)
        if hook is not None:
            hook(*args)  # the telemetry's hooks catch their own errors
        callback: Callable[..., None] | None = getattr(self.callbacks, name)
        if callback is None:
            return
        try:
            callback(*args)
        except Exception:
            logger.exception("{}: a callback raised; the transport goes on", self.callbacks)

    # --- the generation lifecycle -----------------------------------------------------------

    def apply(self, effects: list[Effect]) -> None:
        """Turn the generation tracker's ``effects`` into the framework's callbacks."""
        for effect in effects:
            for name, args in callbacks_of(effect):
                self.emit(name, *args)
            if isinstance(effect, GenerationEnded):
                self._answer_done()
        self._schedule_tick()

    def _schedule_tick(self) -> None:
        if self._tick is not None:
            self._tick.cancel()
            self._tick = None
        deadline = self.tracker.next_deadline
        if deadline is not None and not self.closed:
            loop = asyncio.get_running_loop()
            self._tick = loop.call_at(deadline, lambda: self.apply(self.tracker.tick(self.now())))

    def answer_end(self) -> asyncio.Future[None]:
        """A future resolved when the answer in progress ends (``hand_over`` waits on it)."""
        self._answer_ended = asyncio.get_running_loop().create_future()
        return self._answer_ended

    def _answer_done(self) -> None:
        done, self._answer_ended = self._answer_ended, None
        if done is not None and not done.done():
            done.set_result(None)

    def stop(self) -> None:
        """Nothing ticks any more, and the answer in progress ends (the transport stopped)."""
        self.closed = True
        if self._tick is not None:
            self._tick.cancel()
        self.apply(self.tracker.connection_lost(self.now()))

    # --- tasks ------------------------------------------------------------------------------

    def own(self, work: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """Run ``work`` in a task the transport owns (cancelled by ``disconnect``)."""
        task = asyncio.get_running_loop().create_task(work, name=f"oai-transport-{name}")
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.opt(exception=task.exception()).error(
                "{}: {} failed", self.callbacks, task.get_name()
            )

    def cancel_tasks(self) -> list[asyncio.Task[Any]]:
        """Cancel every task the transport owns; returns them, to await their end."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        return tasks
