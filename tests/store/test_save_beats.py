"""The saver's beats keep their rate on a slow store: a write's own time does not push the next
beat back, so what a crash loses stays within one ``write_interval`` (and the write under way).
Measured on loop time (looptime, with the emulator in the same loop)."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from realtime_resumption.gemini.live_options import StoreOptions
from realtime_resumption.store import MemoryStore
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig

from ..transport.transport_helpers import Recorder, answered_with_handle
from .takeover_helpers import make_transport, stream_speech

pytestmark = pytest.mark.looptime

WRITE_TAKES = 0.2
"""Loop-time seconds each write of the slow store takes: most of the interval."""
INTERVAL = 0.25


class _SlowStore(MemoryStore):
    """A store whose every write takes ``WRITE_TAKES`` (a distant Redis), noting when each
    began."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[float] = []

    async def _slow(self) -> None:
        self.writes.append(asyncio.get_running_loop().time())
        await asyncio.sleep(WRITE_TAKES)

    async def save(self, *args: object, **kwargs: object) -> bool:  # type: ignore[override]
        await self._slow()
        return await super().save(*args, **kwargs)  # type: ignore[arg-type]

    async def append(self, *args: object, **kwargs: object) -> bool:  # type: ignore[override]
        await self._slow()
        return await super().append(*args, **kwargs)  # type: ignore[arg-type]


async def test_a_slow_store_does_not_slow_the_beats() -> None:
    store = _SlowStore()
    async with Emulator(EmulatorConfig()) as emu:
        transport = make_transport(
            emu, store, StoreOptions(write_interval=INTERVAL, lease_ttl=10.0, lease_wait=0.0)
        )
        rec = Recorder(transport)
        await transport.connect()
        try:
            await answered_with_handle(transport, rec)
            start = len(store.writes)
            # Two seconds of the user talking: every beat has new input to write.
            await stream_speech(transport, 0, 100)
            beats = store.writes[start:]
        finally:
            await transport.disconnect()
    gaps = [later - earlier for earlier, later in itertools.pairwise(beats)]
    assert len(gaps) >= 3, beats
    # Every beat one interval after the last, not an interval after the last write ended.
    assert max(gaps) == pytest.approx(INTERVAL, abs=0.01), gaps
