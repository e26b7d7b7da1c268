"""The network round trip from the kernel, never from a pong: a move's replay stays one round
trip wide however late the service answers pings.

The kernel's ``TCP_INFO`` is read from real sockets on loopback; the late pongs come from the
emulator (``pong_latency``)."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Iterator
from dataclasses import replace

import pytest

from realtime_resumption.gemini import GeminiLiveTransport, connection, tcp
from realtime_resumption.move_reports import MoveOutcome, MoveReason
from realtime_resumption.outbox import OutboxLimits
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig, user_audio
from realtime_resumption.testing.emulator.ledger import ConnectionRecord, SessionSummary
from realtime_resumption.transport import ContentTurn

from ..ledger_checks import assert_nothing_said_lost
from .transport_helpers import (
    Recorder,
    emulator_config,
    established,
    handle_after_the_answer,
    make_transport,
    unopened_connection,
)

TIME_SCALE = 0.05
LATE = 25.0
"""Seconds the service's pongs come late (the reported 8-30 s), at the emulator's scale."""
CHUNK = 0.02
"""A microphone's pace: one 20 ms chunk every 20 ms of the wall clock, the clock the arrival
rule measures in."""


def _tcp_info(rtt_us: int, rttvar_us: int, size: int = 104) -> bytes:
    """A Linux ``struct tcp_info`` with these round-trip fields (the rest zero)."""
    raw = bytearray(size)
    struct.pack_into("=II", raw, 68, rtt_us, rttvar_us)
    return bytes(raw)


@pytest.fixture
def loopback_pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """A connected TCP socket pair on loopback, with some data exchanged both ways."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
    with client, accepted:
        for _ in range(5):
            client.sendall(b"ping")
            accepted.recv(4)
            accepted.sendall(b"pong")
            client.recv(4)
        yield client, accepted


def test_tcp_info_parsing_takes_the_round_trip_and_twice_its_deviation() -> None:
    estimate = tcp.parse_tcp_info(_tcp_info(31_250, 4_000))
    assert estimate == tcp.RoundTrip(seconds=0.03125, jitter=0.008)
    # Longer structures (newer kernels) carry the same fields in the same place.
    assert tcp.parse_tcp_info(_tcp_info(31_250, 4_000, size=280)) == estimate


def test_tcp_info_without_a_sample_or_too_short_gives_no_estimate() -> None:
    assert tcp.parse_tcp_info(_tcp_info(0, 0)) is None  # no round trip measured yet
    assert tcp.parse_tcp_info(_tcp_info(5_000, 1_000)[:75]) is None
    assert tcp.parse_tcp_info(b"") is None


def test_an_absurd_round_trip_is_clamped() -> None:
    estimate = tcp.parse_tcp_info(_tcp_info(4_000_000_000, 3_000_000_000))
    assert estimate == tcp.RoundTrip(seconds=tcp.MAX_ROUND_TRIP, jitter=tcp.MAX_ROUND_TRIP)


def test_the_kernel_round_trip_of_a_loopback_pair(
    loopback_pair: tuple[socket.socket, socket.socket],
) -> None:
    client, accepted = loopback_pair
    # The layout the parser assumes, checked against what the kernel says elsewhere: the
    # state (ESTABLISHED) comes first and the send MSS sits where TCP_MAXSEG reads it from.
    raw = client.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
    state, snd_mss = raw[0], struct.unpack_from("=I", raw, 16)[0]
    assert state == 1
    assert snd_mss == client.getsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG)
    for sock in (client, accepted):
        estimate = tcp.round_trip(sock)
        assert estimate is not None
        # Loopback: microseconds, and nothing like a pinger's timeout.
        assert 0 < estimate.seconds < 0.05
        assert 0 <= estimate.jitter < 0.05
        assert estimate == tcp.parse_tcp_info(
            sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
        )


def test_sockets_without_an_estimate_give_none() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        assert tcp.round_trip(udp) is None
    with socket.socket() as unconnected:
        assert tcp.round_trip(unconnected) is None  # no segment acknowledged yet
    closed = socket.socket()
    closed.close()
    assert tcp.round_trip(closed) is None


def test_the_user_timeout_is_set_on_the_socket(
    loopback_pair: tuple[socket.socket, socket.socket],
) -> None:
    client, _ = loopback_pair
    assert tcp.set_user_timeout(client, 20.0)
    assert client.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == 20_000
    closed = socket.socket()
    closed.close()
    assert not tcp.set_user_timeout(closed, 20.0)


def test_without_tcp_info_there_is_no_estimate(
    monkeypatch: pytest.MonkeyPatch, loopback_pair: tuple[socket.socket, socket.socket]
) -> None:
    # As on a system other than Linux: the outbox then falls back to its fixed margin.
    monkeypatch.setattr(tcp, "_TCP_INFO", None)
    monkeypatch.setattr(tcp, "_TCP_USER_TIMEOUT", None)
    client, _ = loopback_pair
    assert tcp.round_trip(client) is None
    assert not tcp.set_user_timeout(client, 20.0)


async def _stream(transport: GeminiLiveTransport, first: int, count: int) -> None:
    for seq in range(first, first + count):
        transport.send_audio(user_audio(seq, speech=False))
        await asyncio.sleep(CHUNK)


async def test_late_pongs_never_widen_the_replay(monkeypatch: pytest.MonkeyPatch) -> None:
    async with Emulator(emulator_config("gemini", time_scale=TIME_SCALE, pong_latency=LATE)) as emu:
        transport = make_transport(emu)
        rec = Recorder(transport)
        await transport.connect()
        streaming = asyncio.create_task(_stream(transport, 1, 150))
        try:
            # A second and a half of the call: a pinger would have had its late pong by now.
            await asyncio.sleep(1.5)
            # A turn, so the handle to move from arrives while the microphone streams.
            transport.send_live_text([ContentTurn("user", "hello there")])
            await rec.wait_for("on_turn_complete")
            await rec.wait(lambda r: r.names()[-1] == "on_resumption_update")
            emu.faults.go_away(60.0)
            await rec.wait_for("on_move", timeout=5)
            await streaming
        finally:
            streaming.cancel()
            await transport.disconnect()
        await emu.wait_disconnected()

    (report,) = rec.moves
    assert (report.reason, report.outcome) == (MoveReason.PLANNED, MoveOutcome.RESUMED)
    (summary,) = emu.ledger.summary().sessions.values()
    assert_nothing_said_lost(summary)
    (move,) = summary.moves
    # What a move may replay of audio the snapshot held: audio written within one round trip
    # (milliseconds on loopback), the 40 ms tolerance and, on a loaded machine, a few times
    # the event loop's lag (up to 100 ms on a busy 2-core machine) before the handle arrived:
    # two or three chunks on a quiet machine. A round trip read from the late pongs would
    # replay their 1.25 s (60 chunks and more).
    assert len(move.audio_duplicates) * CHUNK < LATE * TIME_SCALE / 2, move.audio_duplicates


def test_a_connection_reads_the_kernel_estimate_once_per_refresh(
    loopback_pair: tuple[socket.socket, socket.socket],
) -> None:
    """Every handover asks for the round trip; the kernel is asked once per
    ``ROUND_TRIP_REFRESH`` (at the clock readings it is given)."""
    client, _ = loopback_pair
    reads: list[int] = []
    now = 100.0

    class Counted:
        """The real socket, its reads of ``TCP_INFO`` counted."""

        def getsockopt(self, level: int, option: int, buflen: int, /) -> bytes:
            reads.append(option)
            return client.getsockopt(level, option, buflen)

        def setsockopt(self, level: int, option: int, value: int, /) -> None:
            client.setsockopt(level, option, value)

    conn = unopened_connection()
    conn._socket = Counted()
    expected = tcp.round_trip(client)
    assert expected is not None
    for _ in range(5):
        assert conn.round_trip_measure(now) == (expected.seconds, expected.jitter, 0.0)
        now += connection.ROUND_TRIP_REFRESH / 10
    assert len(reads) == 1
    now += connection.ROUND_TRIP_REFRESH
    assert conn.round_trip_measure(now) is not None
    assert len(reads) == 2


UNSEEN = 0.03
"""Seconds of the emulator's simulated round trip on the wall clock: a delay in user space the
kernel reads as microseconds on loopback, as it does not see the service behind its front end."""
MOVES = 5


def _audio(connection: ConnectionRecord) -> list[int]:
    return [seq for message in connection.client_messages for seq in message.audio_seqs]


async def _replay_arrived(emu: Emulator) -> None:
    """Wait (bounded) until the last move's replay has reached the session: its old connection
    closed (all it received is in the ledger), and the new one has audio the old one never had,
    which the transport writes after the replay."""
    (session,) = emu.ledger.sessions.values()
    *_, old, new = established(session)
    async with asyncio.timeout(5):
        # Polling: the ledger has no event for it.
        while old.closed_at is None or max(_audio(new), default=0) <= max(_audio(old)):  # noqa: ASYNC110
            await asyncio.sleep(0.01)


async def _moves_while_streaming(config: EmulatorConfig, limits: OutboxLimits) -> SessionSummary:
    """``MOVES`` moves of a call on an emulator with ``config``, each from a handle that came
    while the microphone streamed silence; the session's figures."""
    async with Emulator(config) as emu:
        transport = make_transport(emu, input_buffer=limits)
        rec = Recorder(transport)
        await transport.connect()
        streaming = asyncio.create_task(_stream(transport, 1, 500))
        try:
            for moves in range(1, MOVES + 1):
                start = len(rec.events)
                transport.send_live_text([ContentTurn("user", "hello there")])
                await rec.wait(handle_after_the_answer(start))
                emu.faults.go_away(60.0)
                await rec.wait_for("on_move", moves, timeout=5)
            await _replay_arrived(emu)
        finally:
            streaming.cancel()
            await transport.disconnect()
        await emu.wait_disconnected()

    assert [m.outcome for m in rec.moves] == [MoveOutcome.RESUMED] * MOVES
    (summary,) = emu.ledger.summary().sessions.values()
    assert len(summary.moves) == MOVES
    return summary


REPLAY_SILENCE = replace(OutboxLimits(), silence_level=0.0)
"""The shipped limits, but silence is replayed too: the microphone streams silence, so the
emulator answers the turns, and every chunk counts."""


async def test_the_tolerance_covers_a_round_trip_the_kernel_does_not_see() -> None:
    """README (Limits): audio within the tolerance (40 ms) before the boundary is replayed, for
    what the kernel does not see, such as the emulator's simulated network. With a 30 ms round
    trip the kernel cannot see, moves lose no audio."""
    config = emulator_config("gemini", time_scale=TIME_SCALE, round_trip=UNSEEN / TIME_SCALE)
    summary = await _moves_while_streaming(config, REPLAY_SILENCE)
    assert summary.audio_lost == (), [m.audio_lost for m in summary.moves]


FAR = 0.1
"""Seconds of a round trip to a distant front end, on the wall clock."""


async def test_the_kernels_estimate_of_a_far_path_places_the_handle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """README (Limits): the snapshot is placed by the round trip the kernel estimates; what was
    written within it before the handle arrived is replayed. A 100 ms path, which loopback
    cannot give: the emulator delays the frames, and the kernel's reading is replaced by the
    one such a path gives (the only stand-in here; the socket, the SDK and the transport are
    real). Without the estimate the window would be the 40 ms tolerance: about three chunks
    lost a move."""
    monkeypatch.setattr(tcp, "round_trip", lambda sock: tcp.RoundTrip(seconds=FAR, jitter=0.0))
    config = emulator_config("gemini", time_scale=TIME_SCALE, round_trip=FAR / TIME_SCALE)
    summary = await _moves_while_streaming(config, REPLAY_SILENCE)
    assert summary.audio_lost == (), [m.audio_lost for m in summary.moves]
