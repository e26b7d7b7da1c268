"""What the connections of one emulator share: its configuration, ledger, faults, sessions
and random draws, and which connections are being served."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from .config import EmulatorConfig
from .faults import Faults
from .ledger import Ledger
from .listener import Droppable, LiveConnections
from .sessions import SessionRegistry

Api = Literal["gemini", "vertex"]
"""Which API path a client dialled."""

C = TypeVar("C", bound=Droppable)
"""The connection type (``served_connection.Connection``)."""


@dataclass
class Hub(Generic[C]):
    """What the connections of one emulator share."""

    config: EmulatorConfig
    ledger: Ledger
    faults: Faults
    sessions: SessionRegistry
    rng: random.Random
    setup_rng: random.Random
    """Draws setup latencies (apart from ``rng``, so latencies do not shift identifiers)."""
    started_at: float
    live: LiveConnections[C]
    """The connections being served."""

    def now(self) -> float:
        """Seconds on the loop's clock since the emulator started."""
        return asyncio.get_running_loop().time() - self.started_at

    def setup_latency(self, *, resumed: bool) -> float:
        """How long this setup takes (scaled): a ``slow_setups`` fault, or the configured
        latency (drawn from its range)."""
        seconds = self.faults.take_setup_latency(resumed=resumed)
        if seconds is not None:
            return self.config.scaled(seconds)
        return self.config.draw(self.config.setup_latency, self.setup_rng)
