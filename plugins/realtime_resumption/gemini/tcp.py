"""What the kernel knows of a connection's TCP socket, and the one limit the transport sets on it.

**The round trip.** A move without Vertex's ``transparent`` mode places the resumption handle's
snapshot in the input by the network round trip (``gemini.outbox``, *Arrival*). A WebSocket
ping cannot measure it against the live service: its pongs come 8-30 s late (the service's
application answers them when it gets to them), so a ping reads the application's delay and a
move would replay seconds of audio. The kernel's own estimate for the socket (Linux
``TCP_INFO``: the smoothed round trip of the TCP segments and its mean deviation) is taken from
the peer's TCP acknowledgements, which no application delays. :func:`round_trip` reads it.

It sees the path to the socket's peer only: the service's front end (or a proxy), not what
lies behind it, and nothing of a delay added in user space, such as the emulator's simulated
network on loopback (there it reads tens of microseconds, a few milliseconds on a loaded
machine). ``OutboxLimits.round_trip_tolerance``
(40 ms) is what covers the rest: audio written that long before the boundary is replayed
anyway, so the emulator's default 6 ms round trip, and the 20 ms the rotation tests draw at
most, cost no audio (``tests/benchmarks/bench_replay.py --round-trips 0.006 0.02``: 0 lost;
the rotation arena, whose tolerance is smaller, adds its emulated round trip to it).

Where the kernel gives no estimate (not Linux, a socket that is not TCP, a socket already
closed) :func:`round_trip` returns None and the outbox falls back to its fixed margin
(``OutboxLimits.handle_margin``, 0.3 s: more than most internet round trips and the tolerance
together): a move then replays up to 0.3 s of audio that may be heard twice, and loses only
audio the service took in later than that. A ping is not used as a fallback: the one service
the transport is for delays its pongs, so a ping there would widen every replay by seconds.

**Dead peers.** :func:`set_user_timeout` bounds how long written data may stay unacknowledged
before the kernel drops the connection (Linux ``TCP_USER_TIMEOUT``): a peer gone from the
network is found that long after the first write it leaves unanswered, and a voice call
writes audio continuously. See ``gemini.connection.USER_TIMEOUT``.
"""

from __future__ import annotations

import socket
import struct
import sys
from dataclasses import dataclass
from typing import Final, Protocol

MAX_ROUND_TRIP: Final = 1.0
"""Seconds: a larger reading (a path in trouble, or a misreading) counts as this much, so a
move never replays more than about a second of audio for it. Geostationary satellite links,
the slowest in common use, take about 0.6 s."""

_TCP_INFO: Final = getattr(socket, "TCP_INFO", None) if sys.platform == "linux" else None
"""The layout below is Linux's; other systems number and lay out their ``TCP_INFO`` apart."""
_TCP_USER_TIMEOUT: Final = (
    getattr(socket, "TCP_USER_TIMEOUT", None) if sys.platform == "linux" else None
)
_INFO_SIZE: Final = 104
"""Bytes of ``struct tcp_info`` asked for: its first version's fields, which every Linux
since 2.6 fills."""
_RTT: Final = struct.Struct("=II")
"""``tcpi_rtt`` and ``tcpi_rttvar`` (microseconds): after eight one-byte fields and fifteen
32-bit ones."""
_RTT_OFFSET: Final = 68


class Socket(Protocol):
    """What the module needs of a socket (a ``socket.socket``, or asyncio's wrapper of one)."""

    def getsockopt(self, level: int, option: int, buflen: int, /) -> bytes: ...

    def setsockopt(self, level: int, option: int, value: int, /) -> None: ...


@dataclass(frozen=True, slots=True)
class RoundTrip:
    """The kernel's round-trip estimate for a socket, in seconds."""

    seconds: float
    """The smoothed round trip (``tcpi_rtt``), at most ``MAX_ROUND_TRIP``."""
    jitter: float
    """How far a round trip may reach above ``seconds``: twice the kernel's mean deviation
    (``tcpi_rttvar``), at most ``MAX_ROUND_TRIP``. The kernel itself takes a segment
    unacknowledged four deviations past the mean as lost; two cover nearly every sample."""


def parse_tcp_info(raw: bytes) -> RoundTrip | None:
    """The round trip in a Linux ``struct tcp_info``; None when ``raw`` is too short to hold
    it or the kernel has no sample yet (a round trip of 0)."""
    if len(raw) < _RTT_OFFSET + _RTT.size:
        return None
    rtt_us, rttvar_us = _RTT.unpack_from(raw, _RTT_OFFSET)
    if rtt_us == 0:
        return None
    return RoundTrip(
        seconds=min(rtt_us / 1e6, MAX_ROUND_TRIP),
        jitter=min(2 * rttvar_us / 1e6, MAX_ROUND_TRIP),
    )


def round_trip(sock: Socket) -> RoundTrip | None:
    """The kernel's current round-trip estimate for ``sock``; None where there is none (see
    the module documentation). Never raises: one system call, cheap enough for every write."""
    if _TCP_INFO is None:
        return None
    try:
        raw = sock.getsockopt(socket.IPPROTO_TCP, _TCP_INFO, _INFO_SIZE)
    except (OSError, ValueError):  # not TCP, or closed
        return None
    return parse_tcp_info(raw)


def set_user_timeout(sock: Socket, seconds: float) -> bool:
    """Have the kernel drop ``sock``'s connection when written data stays unacknowledged for
    ``seconds``; False where that cannot be set (not Linux, not TCP, closed)."""
    if _TCP_USER_TIMEOUT is None:
        return False
    try:
        sock.setsockopt(socket.IPPROTO_TCP, _TCP_USER_TIMEOUT, max(1, round(seconds * 1000)))
    except (OSError, ValueError):
        return False
    return True
