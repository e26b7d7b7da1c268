"""Where a call's state outlives its worker process: the ``SessionStore`` protocol.

A store keeps, per session key, one opaque record (bytes, with a time to live, and the parts
appended to it since it was written: a call's newest input costs a small append, not a rewrite
of the whole record) and a *lease*:
the right to drive that session. A process that drives a call holds the lease under an owner
token of its own, renews it while the call runs and releases it when the call ends; a second
process asking for the same key while the lease is held is refused, so two processes never
drive one session. A lease that is not renewed expires, so a crashed process frees its calls
after the lease's time to live.

Writes can be *fenced*: ``save(..., lease=owner)`` writes only while ``owner`` holds the lease,
so a process that lost its lease (it stalled past the lease's time to live and another took
over) cannot overwrite the new owner's record.

:func:`hand_over_on` hands a process's calls over when it is told to stop (SIGTERM at a
deploy or a scale-down), so the next process takes them over with nothing lost.

Two implementations: :class:`MemoryStore` (this process only: the default, and what the tests
run with an injected clock) and ``realtime_resumption.redis_store.RedisStore`` (any
Redis-protocol server). Keys are the application's session keys (a room's name, a call id):
they appear in the store's key names, so they must not be secrets.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import signal
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol, runtime_checkable

from loguru import logger

from realtime_resumption.transport import NotConnectedError

MAX_KEY_CHARS: Final = 256
HAND_OVER_BOUND: Final = 15.0
"""Seconds :func:`hand_over_on` gives its calls' hand-overs (half of the 30 s a Kubernetes pod
gets between SIGTERM and SIGKILL)."""


@dataclass(frozen=True)
class StoreOptions:
    """How a transport keeps its session's state in a ``SessionStore`` (``store=``).

    ``write_interval``: at most one write per interval (seconds), and the most of the user's
    input a crash can lose. ``lease_ttl``: how long the lease outlives its last renewal (a
    crashed process frees its call after it; the processes of one deployment share it).
    ``lease_wait``: how long ``connect`` waits for a held lease to be freed before it raises
    ``LeaseHeldError``; None (the default): a little over ``lease_ttl``, so a re-dispatch
    right after a crash takes the call over once the dead process's lease lapsed, while a
    live process, which renews its lease, keeps its call (0: not at all).
    ``encryption_key``: a Fernet key (``cryptography.fernet.Fernet.generate_key()``), or
    several (the first encrypts, any decrypts: key rotation), to encrypt records at rest; None
    stores them in clear.
    """

    write_interval: float = 0.25
    lease_ttl: float = 5.0
    lease_wait: float | None = None
    encryption_key: str | bytes | Sequence[str | bytes] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        for name in ("write_interval", "lease_ttl"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not 0 < value < float("inf"):
                raise ValueError(f"{name} must be a finite number of seconds > 0")
        if self.lease_wait is not None and not (
            isinstance(self.lease_wait, int | float) and 0 <= self.lease_wait < float("inf")
        ):
            raise ValueError("lease_wait must be None or a finite number of seconds >= 0")
        if self.lease_ttl <= self.write_interval:
            raise ValueError("lease_ttl must be longer than write_interval (it is renewed then)")

    @property
    def lease_poll(self) -> float:
        """Seconds between two asks for a held lease."""
        return min(0.1, self.lease_ttl / 10)

    @property
    def wait_for_lease(self) -> float:
        """Seconds ``connect`` waits for a held lease: ``lease_wait``, or by default
        ``lease_ttl`` and one more ask (a renewal on its way as the wait began lapses by
        then)."""
        return self.lease_wait if self.lease_wait is not None else self.lease_ttl + self.lease_poll


class StoreError(Exception):
    """The store could not do what was asked (unreachable, timed out, a key of the wrong
    type). The message says which operation failed; it never holds a record's content."""


class LeaseHeldError(StoreError):
    """Another live process holds the lease of this session key: it drives the call."""


class LeaseLostError(StoreError):
    """Another process holds this session's lease now (this one stalled past it, and that one
    took the call over): this one stopped driving the call (a transport stops sending to the
    service and closes, leaving the record to the new driver)."""


@runtime_checkable
class SessionStore(Protocol):
    """Records of sessions and the leases that say who drives them; see the module docs.

    Every method may raise :class:`StoreError`. ``ttl`` values are seconds, finite and > 0.
    """

    async def load(self, key: str) -> list[bytes] | None:
        """The record saved under ``key`` followed by the parts appended to it, in order; None
        when there is none (or it expired)."""
        ...

    async def save(
        self,
        key: str,
        record: bytes,
        ttl: float,
        *,
        lease: str | None = None,
        lease_ttl: float | None = None,
    ) -> bool:
        """Store ``record`` under ``key`` for ``ttl`` seconds, replacing the record and its
        parts. With ``lease``, only while that owner token holds the key's lease: False
        (nothing written) when it does not; with ``lease_ttl`` too, the write also renews
        that lease to ``lease_ttl`` seconds from now (a call that writes needs no renewal of
        its own)."""
        ...

    async def append(
        self,
        key: str,
        part: bytes,
        ttl: float,
        *,
        lease: str | None = None,
        lease_ttl: float | None = None,
    ) -> bool:
        """Append ``part`` to the record of ``key`` and keep both for ``ttl`` seconds from now.
        False (nothing written) when there is no record, or ``lease`` does not hold the lease.
        ``lease_ttl``: as for ``save``."""
        ...

    async def delete(self, key: str, *, lease: str | None = None) -> bool:
        """Forget the record of ``key`` (the lease is left alone). With ``lease``, only while
        that owner token holds the lease: False (nothing deleted) when it does not."""
        ...

    async def acquire(self, key: str, owner: str, ttl: float) -> bool:
        """Take the lease of ``key`` for ``owner`` for ``ttl`` seconds: True when it was free
        (or expired, or already ``owner``'s, then renewed), False when another holds it."""
        ...

    async def renew(self, key: str, owner: str, ttl: float) -> bool:
        """Extend ``owner``'s lease of ``key`` to ``ttl`` seconds from now; False (nothing
        changed) when ``owner`` does not hold it."""
        ...

    async def release(self, key: str, owner: str) -> bool:
        """Give the lease of ``key`` up; False (nothing changed) when ``owner`` does not hold
        it."""
        ...


def check_key(key: str) -> str:
    """``key`` when it is usable as a session key; ValueError otherwise."""
    if not isinstance(key, str) or not key:
        raise ValueError("a session key must be a non-empty str")
    if len(key) > MAX_KEY_CHARS or not key.isprintable():
        raise ValueError(f"a session key must be printable and at most {MAX_KEY_CHARS} chars")
    return key


def check_ttl(ttl: float) -> float:
    """``ttl`` when it is a usable time to live; ValueError otherwise."""
    if not isinstance(ttl, int | float) or not math.isfinite(ttl) or ttl <= 0:
        raise ValueError(f"a time to live must be a finite number of seconds > 0, not {ttl!r}")
    return float(ttl)


@dataclass
class _Expiring:
    value: list[bytes] | str
    expires_at: float


class MemoryStore:
    """A :class:`SessionStore` in this process's memory: the default. It keeps calls across
    connections and transports of one process (a transport closed and another connected with
    the same key), not across processes. ``clock``: seconds, monotonic (injectable for
    tests)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._records: dict[str, _Expiring] = {}
        self._leases: dict[str, _Expiring] = {}

    def __repr__(self) -> str:
        return f"MemoryStore(records={len(self._records)}, leases={len(self._leases)})"

    def _live(self, table: dict[str, _Expiring], key: str) -> _Expiring | None:
        item = table.get(key)
        if item is not None and item.expires_at <= self._clock():
            del table[key]
            return None
        return item

    async def load(self, key: str) -> list[bytes] | None:
        """See :meth:`SessionStore.load`."""
        item = self._live(self._records, check_key(key))
        return list(item.value) if item is not None and isinstance(item.value, list) else None

    async def save(
        self,
        key: str,
        record: bytes,
        ttl: float,
        *,
        lease: str | None = None,
        lease_ttl: float | None = None,
    ) -> bool:
        """See :meth:`SessionStore.save`."""
        check_key(key)
        ttl = check_ttl(ttl)
        if lease is not None and not self._fenced(key, lease, lease_ttl):
            return False
        self._records[key] = _Expiring([bytes(record)], self._clock() + ttl)
        return True

    async def append(
        self,
        key: str,
        part: bytes,
        ttl: float,
        *,
        lease: str | None = None,
        lease_ttl: float | None = None,
    ) -> bool:
        """See :meth:`SessionStore.append`."""
        check_key(key)
        ttl = check_ttl(ttl)
        item = self._live(self._records, key)
        if item is None or not isinstance(item.value, list):
            return False
        if lease is not None and not self._fenced(key, lease, lease_ttl):
            return False
        item.value.append(bytes(part))
        item.expires_at = self._clock() + ttl
        return True

    def _fenced(self, key: str, owner: str, lease_ttl: float | None) -> bool:
        """Whether ``owner`` holds the lease of ``key``; renewed to ``lease_ttl`` if given."""
        if not self._holds(key, owner):
            return False
        if lease_ttl is not None:
            self._leases[key] = _Expiring(owner, self._clock() + check_ttl(lease_ttl))
        return True

    async def delete(self, key: str, *, lease: str | None = None) -> bool:
        """See :meth:`SessionStore.delete`."""
        check_key(key)
        if lease is not None and not self._holds(key, lease):
            return False
        self._records.pop(key, None)
        return True

    async def acquire(self, key: str, owner: str, ttl: float) -> bool:
        """See :meth:`SessionStore.acquire`."""
        check_key(key)
        ttl = check_ttl(ttl)
        held = self._live(self._leases, key)
        if held is not None and held.value != owner:
            return False
        self._leases[key] = _Expiring(owner, self._clock() + ttl)
        return True

    async def renew(self, key: str, owner: str, ttl: float) -> bool:
        """See :meth:`SessionStore.renew`."""
        check_key(key)
        ttl = check_ttl(ttl)
        if not self._holds(key, owner):
            return False
        self._leases[key] = _Expiring(owner, self._clock() + ttl)
        return True

    async def release(self, key: str, owner: str) -> bool:
        """See :meth:`SessionStore.release`."""
        if not self._holds(check_key(key), owner):
            return False
        del self._leases[key]
        return True

    def _holds(self, key: str, owner: str) -> bool:
        held = self._live(self._leases, key)
        return held is not None and held.value == owner


_PROCESS_STORE: MemoryStore | None = None


def process_store() -> MemoryStore:
    """The process-wide :class:`MemoryStore` a transport uses when given a ``session_key``
    and no store: a call survives its transport (a pipeline rebuilt in the same process),
    not its process."""
    global _PROCESS_STORE
    if _PROCESS_STORE is None:
        _PROCESS_STORE = MemoryStore()
    return _PROCESS_STORE


@runtime_checkable
class HandsOver(Protocol):
    """A call that can be handed to another process: ``GeminiLiveTransport``,
    ``OpenAIRealtimeTransport``, the Pipecat ``GeminiLiveLLMService``, the LiveKit Gemini
    ``RealtimeSession``."""

    async def hand_over(self) -> None:
        """Save the call's state, give its lease up and close without ending the call."""
        ...


_DRAINS: Final[set[asyncio.Task[None]]] = set()
"""Hand-overs in progress (the loop keeps weak references to tasks only)."""


def hand_over_on(
    signum: signal.Signals,
    calls: HandsOver | Iterable[HandsOver],
    *,
    within: float = HAND_OVER_BOUND,
    then: Callable[[], object] | None = None,
) -> Callable[[], None]:
    """On ``signum`` (e.g. ``signal.SIGTERM``), hand ``calls`` over to the next process, all
    at once, each at its next resumable point (the answer in progress finished), within
    ``within`` seconds; then call ``then`` (a function or a coroutine function: stop the app),
    or, without one, let the signal do what it did before (SIGTERM ends the process).

    ``calls`` is one call, or a collection the app keeps current (a set it adds each call to
    and removes it from): it is read when the signal comes. A call that is over already is
    skipped; one whose hand-over failed or ran past ``within`` is logged and left as after a
    crash (the next process takes it over once its lease expired, from its last save). A
    second signal while the calls are handed over is ignored. Install it from the event
    loop's thread, the main one (``loop.add_signal_handler``). Returns a function that
    uninstalls it."""
    if not isinstance(within, int | float) or not math.isfinite(within) or within <= 0:
        raise ValueError(f"within must be a finite number of seconds > 0, not {within!r}")
    loop = asyncio.get_running_loop()
    draining = False

    def on_signal() -> None:
        nonlocal draining
        if draining:
            logger.info("{} again: the calls are being handed over", signum.name)
            return
        draining = True
        targets = [calls] if isinstance(calls, HandsOver) else list(calls)
        logger.info("{}: handing {} call(s) over", signum.name, len(targets))
        task = loop.create_task(_drain(signum, targets, within, then), name="hand-over-on-signal")
        _DRAINS.add(task)
        task.add_done_callback(_DRAINS.discard)

    loop.add_signal_handler(signum, on_signal)
    return lambda: _uninstall(loop, signum)


def _uninstall(loop: asyncio.AbstractEventLoop, signum: signal.Signals) -> None:
    if not loop.is_closed():
        loop.remove_signal_handler(signum)


async def _drain(
    signum: signal.Signals,
    calls: list[HandsOver],
    within: float,
    then: Callable[[], object] | None,
) -> None:
    try:
        async with asyncio.timeout(within):
            outcomes = await asyncio.gather(
                *(call.hand_over() for call in calls), return_exceptions=True
            )
    except TimeoutError:
        logger.warning(
            "{}: the calls were not all handed over within {:g} s; the rest are taken over "
            "as after a crash",
            signum.name,
            within,
        )
    else:
        for call, outcome in zip(calls, outcomes, strict=True):
            if isinstance(outcome, BaseException) and not isinstance(outcome, NotConnectedError):
                logger.warning(
                    "{}: {} was not handed over ({}: {}); it is taken over as after a crash",
                    signum.name,
                    call,
                    type(outcome).__name__,
                    outcome,
                )
    if then is not None:
        try:
            done = then()
            if inspect.isawaitable(done):
                await done
        except Exception as error:
            logger.warning("{}: then= failed ({}: {})", signum.name, type(error).__name__, error)
        return
    # As if this handler had never been installed: the signal's default (SIGTERM ends the
    # process, SIGINT raises KeyboardInterrupt).
    _uninstall(asyncio.get_running_loop(), signum)
    signal.raise_signal(signum)
