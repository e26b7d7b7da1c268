"""Keeping one call's record in a ``SessionStore``, so another process can take the call over:
the store's I/O, whatever the provider.

:class:`RecordKeeper` does it for a transport; a provider's transport subclasses it to say
what the call's state is now (:meth:`RecordKeeper.snapshot`, a
:class:`~realtime_resumption.session_record.CallRecord` of its own) and whether its session
runs (:meth:`RecordKeeper.active`), and carries a takeover out itself (Gemini's
``gemini.persistence``, OpenAI's ``openai.realtime_persistence``):

- ``claim`` (at ``connect``): takes the session key's lease (waiting for a held one up to
  ``StoreOptions.wait_for_lease``, by default a little over the lease's time to live: a dead
  process's lapses, a live one's is renewed; ``LeaseHeldError`` after), then loads the record
  a previous process left. A record that cannot be read (another session key's included) is
  reported and the call starts fresh; an unreachable store is reported and the call starts
  fresh too (it goes on; the saver keeps trying).
- ``start``: an owned background task writes the call's snapshot at most once per
  ``write_interval`` (beats at a fixed rate, not pushed back by the writes), only when it
  changed: the whole record when anything but the input changed (a new handle, a turn, a
  setup), else only the input sent since as a part appended to it (a beat of the user talking
  costs a beat of audio, not the record). Each write renews the lease (the store's fenced
  write does both); a call that did not write for a third of the lease's time to live renews
  it alone. It never blocks the audio path: the transport's sends never wait for it. A store
  error is counted, logged and reported through the transport's ``on_error`` (recoverable)
  once per outage, never fatal; the next beat tries again. A lease found gone (it lapsed while
  the store was down or this process stalled, or the store came back empty) is taken again at
  once and the record written whole, unless another process took the call over meanwhile: a
  lease held by another, or a record another process wrote (it took the call and gave it up
  since), is ``LeaseLostError``, reported; the saving stops for good and the transport stops
  driving the call.
- ``hand_over_call`` (at a transport's ``hand_over``): once the answer in progress ended, the
  final saves (``hand_over``, until nothing is left unsaved), then ``release``: the lease given
  up and the record kept for the next process. Asked for twice at once, it runs once.
- ``forget`` (at a transport's ``forget_handed_over``): the record of a call handed over that
  ended after all is deleted, unless another process took the call over meanwhile.
- ``end`` (at ``disconnect``: the call is over): the record is deleted (only under this
  process's lease, and only for a call that ran here) and the lease released, within a bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import uuid
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from loguru import logger

from realtime_resumption.session_record import CallRecord, CallRecordCodec, RecordError
from realtime_resumption.store import (
    LeaseHeldError,
    LeaseLostError,
    SessionStore,
    StoreError,
    StoreOptions,
    check_key,
)

R = TypeVar("R", bound=CallRecord[Any, Any])
"""The provider's record."""

END_TIMEOUT: Final = 2.0
"""Seconds ``end`` may take to delete the record and release the lease."""
HANDOVER_SAVES: Final = 5
"""Saves ``hand_over_call`` makes at most to catch up with input sent while it saved."""


@dataclass(frozen=True)
class StoreStats:
    """What a transport's session store did so far."""

    writes: int
    """Writes (whole records and appended parts)."""
    written_bytes: int
    errors: int
    """Store operations that failed."""


class RecordKeeper(ABC, Generic[R]):
    """The store I/O of one transport's call; see the module documentation.

    ``codec`` makes the record codec for the session key and this process's owner token (kept
    in each record it writes). ``report`` is called (on the event loop) with each error worth
    telling the transport's user about; ``describe`` names the transport in logs.
    """

    def __init__(
        self,
        store: SessionStore,
        key: str,
        options: StoreOptions,
        codec: Callable[[str, str], CallRecordCodec[R, Any]],
        *,
        report: Callable[[Exception], None],
        describe: str,
    ) -> None:
        self._store = store
        self.key = check_key(key)
        self._options = options
        self._owner = uuid.uuid4().hex
        self._codec = codec(self.key, self._owner)
        self._report = report
        self._describe = describe
        self._took_from: str | None = None
        """The writer of the record this call was taken over from (it is in the store until
        this process writes its own)."""
        self._handing_over: asyncio.Task[None] | None = None
        """The hand-over under way: a second ``hand_over_call`` shares it."""
        self._task: asyncio.Task[None] | None = None
        self._saved: R | None = None
        """The stored snapshot (its input as appended since), None until written."""
        self._renewed_at = -math.inf
        self._failing = False
        self._lost = False
        self._driving = False
        """The call runs here (``start`` ran, ``end`` did not): its record is ours to delete."""
        self._ended = False
        """``end`` ran since the last ``claim`` began: a claim still waiting gives up."""
        self.writes = 0
        """Writes to the store (whole records and appended parts)."""
        self.written_bytes = 0
        """Bytes of those writes."""
        self.errors = 0
        """Store operations that failed."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._describe}, key={self.key!r}, writes={self.writes})"

    @property
    def stats(self) -> StoreStats:
        """What the store did so far."""
        return StoreStats(self.writes, self.written_bytes, self.errors)

    # --- the provider's ---------------------------------------------------------------------

    @abstractmethod
    def snapshot(self) -> R:
        """The call's state now."""

    @abstractmethod
    def active(self) -> bool:
        """Whether a session serves the call now (nothing is saved while none does)."""

    # --- connect ------------------------------------------------------------------------------

    async def claim(self) -> R | None:
        """Take the lease and load the record left by a previous process; see the module
        documentation. Raises ``LeaseHeldError`` when another process holds the lease."""
        options = self._options
        self._lost, self._saved, self._ended, self._took_from = False, None, False, None
        try:
            deadline = asyncio.get_running_loop().time() + options.wait_for_lease
            while not await self._store.acquire(self.key, self._owner, options.lease_ttl):
                if self._ended:
                    return None  # the transport disconnected meanwhile
                if asyncio.get_running_loop().time() >= deadline:
                    raise LeaseHeldError(
                        f"another process drives the call {self.key!r}: {self._held_why()}; "
                        "it is not taken over twice"
                    )
                await asyncio.sleep(options.lease_poll)
            self._renewed_at = asyncio.get_running_loop().time()
            # The beat keeps the lease from now on: the dials before the session opens may take
            # longer than the lease lives (a slow setup, a takeover's retries), and a lapsed
            # lease lets the process the call came from take it back.
            self._start_beat()
            record = await self._store.load(self.key)
        except LeaseHeldError:
            raise
        except StoreError as error:
            self._failed(error, "the call starts without its stored state")
            return None
        if record is None:
            return None
        try:
            snapshot = self._codec.decode(record)
            self._took_from = self._codec.writer(record)
        except RecordError as error:
            logger.warning(
                "{}: the stored state of {!r} is unusable ({}); the call starts fresh",
                self._describe,
                self.key,
                error,
            )
            self._report(error)
            return None
        return snapshot

    def _held_why(self) -> str:
        """Why a held lease was not waited out, for ``LeaseHeldError``."""
        options = self._options
        waited, ttl = options.wait_for_lease, options.lease_ttl
        if waited >= ttl:
            return (
                f"its lease was renewed all the {waited:g} s this one waited (a crashed "
                f"process's lease lapses within lease_ttl, {ttl:g} s)"
            )
        if waited > 0:
            return (
                f"its lease is held after waiting {waited:g} s (lease_wait, under lease_ttl: "
                "a crashed process's lease may still be running)"
            )
        return "its lease is held (lease_wait is 0: not waited for)"

    def start(self) -> None:
        """Start saving in the background (after ``connect`` succeeded)."""
        self._driving = True
        self._start_beat()

    def _start_beat(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"session-store-{self._describe}"
            )

    # --- handing a call over ------------------------------------------------------------------

    async def hand_over_call(
        self, timeout: float, answer_end: Awaitable[None] | None, stop_input: Callable[[], None]
    ) -> None:
        """Hand the call to another process: once the answer in progress ended
        (``answer_end``) or ``timeout`` passed, save until nothing is left unsaved, call
        ``stop_input`` (no send is taken from then on, with no await between the last check
        and it: whatever was accepted is stored), and give the lease up, keeping the record.
        Raises ``StoreError`` when the final save failed (saving goes on each beat). A second
        call while one is under way waits for it and has its outcome: the call is handed over
        once (two hand-overs' saves at once would store the same input twice)."""
        running = self._handing_over
        if running is None or running.done():
            running = self._handing_over = asyncio.get_running_loop().create_task(
                self._hand_over_call(timeout, answer_end, stop_input),
                name=f"session-hand-over-{self._describe}",
            )
            # Its outcome is each caller's; one that nobody awaits any more is not logged.
            running.add_done_callback(lambda task: task.cancelled() or task.exception())
        # Each caller's cancellation is its own: the hand-over goes on for the others (``end``
        # abandons it).
        await asyncio.shield(running)

    async def _hand_over_call(
        self, timeout: float, answer_end: Awaitable[None] | None, stop_input: Callable[[], None]
    ) -> None:
        if answer_end is not None:
            # Not in the middle of an answer (its tool calls included): the next process
            # would have the question asked again.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await answer_end
        try:
            for _ in range(HANDOVER_SAVES):
                await self.hand_over()
                if not self.unsaved():
                    break
            else:
                raise StoreError("the input kept coming faster than the store took it")
        except StoreError:
            if not self._lost:  # a lost lease ends the call here: nothing more to save
                self.start()
            raise
        stop_input()
        await self.release()
        logger.info("{}: the call {!r} is handed over", self._describe, self.key)

    # --- saving ---------------------------------------------------------------------------------

    async def _run(self) -> None:
        interval = self._options.write_interval
        loop = asyncio.get_running_loop()
        beat = loop.time()
        while True:
            # Beats at a fixed rate: a slow write does not push the next beat back, so what a
            # crash loses stays within one interval (and the write under way), however long
            # the store takes. A write longer than the interval is followed at once.
            beat = max(beat + interval, loop.time())
            await asyncio.sleep(beat - loop.time())
            try:
                if not self._driving:
                    # Connecting (its dials, a takeover): nothing is saved before the session
                    # runs here, but the lease is kept.
                    if not await self._renew_when_due():
                        return
                    continue
                if not self.active():
                    continue
                if not await self.save():
                    return
            except StoreError as error:
                self._failed(error, "retrying on the next beat")
            except Exception as error:
                # Never fatal to the call, and never a saver that died unseen. No traceback:
                # its frames hold the session's state, handles included.
                self._failed(StoreError(f"saving failed: {type(error).__name__}"), "retrying")

    async def save(self) -> bool:
        """Renew the lease when due and write what changed (see the module documentation).
        False when the lease was lost (saving stops). Raises ``StoreError``."""
        snapshot = self.snapshot()
        loop = asyncio.get_running_loop()
        lease_ttl = self._options.lease_ttl
        if not await self._renew_when_due():
            return False
        ttl = snapshot.ttl(snapshot.saved_at)
        added = _added_input(self._saved, snapshot)
        # A fenced write renews the lease too: counted from before it was sent.
        sent_at = loop.time()
        if added:
            part = self._codec.encode_part(added, snapshot.saved_at)
            if await self._store.append(
                self.key, part, ttl, lease=self._owner, lease_ttl=lease_ttl
            ):
                self._wrote(snapshot, len(part), sent_at)
                return True
            # The record is gone (the store came back empty, or it expired), or the lease is:
            # the record is written whole, under the lease (taken again if it lapsed).
            added = None
        if added is None:
            record = self._codec.encode(snapshot)
            written = await self._store.save(
                self.key, record, ttl, lease=self._owner, lease_ttl=lease_ttl
            )
            if not written:
                if not await self._reclaim():
                    return self._lease_lost()
                sent_at = loop.time()
                written = await self._store.save(
                    self.key, record, ttl, lease=self._owner, lease_ttl=lease_ttl
                )
                if not written:
                    return self._lease_lost()  # taken between the two: by another process
            self._took_from = None  # the record in the store is this process's own now
            self._wrote(snapshot, len(record), sent_at)
        if self._failing:
            self._failing = False
            logger.info("{}: the session store answers again; state saved", self._describe)
        return True

    def _wrote(self, snapshot: R, size: int, sent_at: float) -> None:
        self._saved = snapshot
        self._renewed_at = sent_at
        self.writes += 1
        self.written_bytes += size

    async def _renew_when_due(self) -> bool:
        """Renew the lease when no write renewed it lately (nothing changed, the store failed,
        or nothing is saved yet); False when it was lost (saving stops). Raises
        ``StoreError``."""
        loop = asyncio.get_running_loop()
        lease_ttl = self._options.lease_ttl
        if loop.time() - self._renewed_at >= lease_ttl / 3:
            renewed_at = loop.time()
            if not await self._store.renew(self.key, self._owner, lease_ttl):
                if not await self._reclaim():
                    return self._lease_lost()
            self._renewed_at = renewed_at
        return True

    async def _reclaim(self) -> bool:
        """This process's lease is gone (it lapsed while the store was down or this process
        stalled, or the store came back empty): take it again unless another process took
        the call over meanwhile. True when it is this process's again. Raises
        ``StoreError``."""
        if not await self._store.acquire(self.key, self._owner, self._options.lease_ttl):
            return False  # another process holds it: it drives the call now
        # Free, but another process may have taken the call and given it up since (a hand-over
        # of its own): then the record is its, and the call is not this process's any more.
        record = await self._store.load(self.key)
        writer = None
        if record is not None:
            with contextlib.suppress(RecordError):
                writer = self._codec.writer(record)
        if writer is not None and writer not in (self._owner, self._took_from):
            await self._store.release(self.key, self._owner)
            return False
        self._saved = None  # whatever the store holds, the next write is whole
        logger.info("{}: the lease of {!r} lapsed and is taken again", self._describe, self.key)
        return True

    def _lease_lost(self) -> bool:
        self._lost = True
        error = LeaseLostError(
            f"another process took the call {self.key!r} over: this one stops driving it"
        )
        logger.warning("{}: {}", self._describe, error)
        self._report(error)
        return False

    def _failed(self, error: StoreError, then: str) -> None:
        self.errors += 1
        if self._failing:
            logger.debug("{}: session store error ({}); {}", self._describe, error, then)
            return
        self._failing = True
        logger.warning("{}: session store error ({}); {}", self._describe, error, then)
        self._report(error)

    # --- the end ------------------------------------------------------------------------------

    def unsaved(self) -> bool:
        """Whether the session's state differs from what was last written."""
        return _added_input(self._saved, self.snapshot()) != ()

    async def hand_over(self) -> None:
        """The final save before another process takes the call over: stop the beats and
        write what changed (``save``); the caller checks ``unsaved`` and calls again until
        nothing is left. Raises ``StoreError``, and ``LeaseLostError`` when another process
        drives the call already."""
        await self.stop()
        if not await self.save():
            raise LeaseLostError(f"another process took the call {self.key!r} over already")

    async def release(self) -> None:
        """The call goes on in another process: give the lease up and keep the record (a later
        ``end`` leaves it be). Within ``END_TIMEOUT``; a failure is logged (the lease then
        expires by itself)."""
        self._driving = False
        await self.end(forget=False)

    async def forget(self) -> None:
        """The call handed over ended after all (nobody will take it over): delete its record,
        unless another process took it over meanwhile; as ``end``."""
        self._driving = True  # it ran here: its record is this process's to delete
        await self.end()

    async def stop(self) -> None:
        """Stop saving (the task is cancelled and awaited)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def end(self, *, forget: bool = True) -> None:
        """Stop saving and release the lease; with ``forget`` (the call is over) delete the
        record first. Within ``END_TIMEOUT``; a failure is logged, and the lease then expires
        by itself. A hand-over under way (not the caller) is abandoned first."""
        self._ended = True
        handing_over = self._handing_over
        if handing_over is not None and handing_over is not asyncio.current_task():
            handing_over.cancel()
            await asyncio.gather(handing_over, return_exceptions=True)
        await self.stop()
        driving, self._driving = self._driving, False
        if self._lost:
            return  # the call is another process's now: its record stays
        try:
            async with asyncio.timeout(END_TIMEOUT):
                # Only under this process's lease: a process that took the call over (after
                # this one stalled past the lease) keeps its record.
                if await self._store.acquire(self.key, self._owner, self._options.lease_ttl):
                    # A call that never ran here (a connect that failed or was overtaken)
                    # keeps its record for a later attempt.
                    if forget and driving:
                        await self._store.delete(self.key, lease=self._owner)
                    await self._store.release(self.key, self._owner)
        except (StoreError, TimeoutError) as error:
            self.errors += 1
            logger.warning(
                "{}: the ended call's state was not removed from the store ({})",
                self._describe,
                type(error).__name__,
            )


def _added_input(
    saved: CallRecord[Any, Any] | None, now: CallRecord[Any, Any]
) -> Sequence[Any] | None:
    """The input ``now`` adds to what is stored, when only input was added since (empty when
    nothing changed); None when the record must be written whole."""
    if saved is None or not saved.same_but_input(now):
        return None
    stored, current = saved.input, now.input
    # What was stored must still lead the input: the same messages (a transport's outbox keeps
    # the objects it stored, compared by identity; one that captures anew, by value).
    if len(current) < len(stored) or any(
        a is not b and a != b for a, b in zip(stored, current, strict=False)
    ):
        return None
    return current[len(stored) :]
