"""Sessions per core: concurrent GeminiLiveTransport sessions through a rotation storm.

For each N, N sessions spread over several emulator processes each ask one question (so each
holds a resumption handle), then stream 20 ms audio in real time: silence, with a short
utterance every ``--speech-every`` seconds (0: silence only; 0.3, an utterance's length: the
user talks without pause, so no turn ends and no newer handle comes); midway (or
``--storm-at`` seconds in) every session gets goAway at once (the storm) and moves. Reported
per N:

- event loop lag of the client process (a 10 ms ticker's lateness): its max before the storm,
  and max and p99 over the run (the max beyond the one before is what the moves added); and
  the CPU time of the longest loop turn before the storm and from it on (turn pre / post, 0
  when none took 1 ms: the lag the client's own work causes, unaffected by other processes
  on a shared machine);
- caller audio delay: from a chunk's real-time capture instant to its first arrival at an
  emulator (client lateness, the transport's queues and any hold during the move, the
  network); p50 / p95 / max over every chunk that arrived;
- speech lost / heard twice: the user's speech chunks a session's final state lacks (or
  never received), and those it heard twice (the ledger's figures, speech by what was sent);
  the lost split into never arrived and arrived but lacking from the final state (a resume
  from a snapshot without them, not replayed); silence skipped: silent chunks that never
  arrived (the transport does not replay silence beyond its padding: not a loss). The ledger
  is read once every transport wrote everything it held, so a chunk that is merely late is
  not counted lost (drain: how long that took after the streams ended, the client's own
  backlog; past ``WAIT`` the run is marked, and what was still held counts as lost), and
  then once the emulators have read it all (an emulator behind has chunks in its socket);
- reported dropped: the audio chunks the transports say they gave up (their input stats, for
  chunks never written, plus their move reports, for chunks a resumed session lacked; a chunk
  dropped while no connection was live is in both), and silent: per session, the speech
  lost beyond what it reported dropped (at least that much was lost without a report:
  every loss past the bounds must be counted, so anything above 0 is a fault, the client's
  unless the emulators lagged: see their loop lag below);
- the garbage collector's pauses during the run (the longest per generation: a full
  collection walks the whole heap and stops the loop; ``--gc-freeze`` freezes what start-up
  loaded, as a server process would);
- client CPU per session-second (the client process's CPU time, from the stream's start until
  it was all written, over N x the streamed seconds), and beside it the bare google-genai
  SDK's sending the same audio to the same emulators, and the wire floor's: the same audio
  as one fixed JSON text per chunk on the SDK's WebSocket, the least a Python client does
  (``--no-baseline`` skips both; ratios are ours over each); on lines of their own, whether
  each baseline kept up with the N sessions, no move made (its loop lag p99, and how late its
  chunks went out against their schedule, p95): where the bare SDK itself falls behind, the
  client's core, not the moves, is the limit; and the cores the emulator processes took
  meanwhile (from ``/proc``): on a 2-core machine, server processes that take more than one
  leave the client less than its core; and their event loops' lag (max, p99; each emulator
  process samples its own with ``loop_ticker``). A server that lags takes input in late, and
  a handle it issues meanwhile lacks input that had already reached it: a blind spot of the
  arrival rule, which places a handle by the network's round trip (README, *Limits*). The
  same line counts the speech lacking that had reached an emulator, unread, before it issued
  the handle the session resumed from (``HandleRecord.input_waiting``): that loss is the
  server's.

The emulators run in processes of their own (``emulator_process``; ``--emulators`` of them,
sessions dealt round-robin), so their CPU is not the client's; all read the same monotonic
clock. Where the machine has too little left for them, they lag, and what that costs is printed
apart (their loop lag, and the speech lost behind input they had received unread). The
largest N with p95 < 50 ms and no speech lost or heard twice is the measured capacity of one
client process (one core). Figures are printed, never asserted; on a shared machine they are
noisy.

    .venv/bin/python tests/benchmarks/bench_sessions.py                  # N = 25, 50, 100, 150
    .venv/bin/python tests/benchmarks/bench_sessions.py --sessions 10 --seconds 6
    .venv/bin/python tests/benchmarks/bench_sessions.py --sessions 150 --spread 3 --seconds 20
    # one session, a move from a 45 s old handle while the user talks throughout:
    .venv/bin/python tests/benchmarks/bench_sessions.py --sessions 1 --seconds 50 --storm-at 45 \
        --speech-every 0.3 --no-baseline
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import wire_floor
from emulator_process import EmulatorProcess
from google import genai
from google.genai import types
from loguru import logger
from loop_ticker import LoopTicker

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.gemini.messages import INPUT_AUDIO_MIME
from realtime_resumption.move_reports import MoveReport
from realtime_resumption.resumption import ResumptionOptions
from realtime_resumption.testing.emulator import EmulatorConfig, user_audio
from realtime_resumption.testing.emulator.ledger import Ledger
from realtime_resumption.transport import ContentTurn

MODEL = "gemini-live-2.5-flash-preview"
CHUNK = 0.02
NOTICE = 10.0
"""goAway timeLeft of the storm: ample time for every session to reach its move."""
DELAY_GOAL = 0.05
WAIT = 60.0
"""Bound of every wait of the benchmark."""
UTTERANCE = 0.3
"""Seconds of each utterance when the stream has speech."""


def _report(ledger: Ledger, started_at: float) -> dict[str, Any]:
    summary = ledger.summary()
    first_arrival: dict[int, float] = {}
    for record in ledger.sessions.values():
        for conn in record.connections:
            for message in conn.client_messages:
                for seq in message.audio_seqs:
                    first_arrival.setdefault(seq, started_at + message.time)
    sessions = summary.sessions.values()
    return {
        "arrivals": first_arrival,
        "behind": _waiting_at_resumed_handles(ledger),
        "unread": [h.input_waiting for r in ledger.sessions.values() for h in r.handles],
        "lacking": {seq for s in sessions for seq in s.audio_lost},
        "receipts": sum(len(s.audio_received) for s in sessions),
        "twice": {seq for s in sessions for seq in s.audio_duplicates},
        "moves": len(summary.moves),
        "max_stall": summary.max_input_stall,
    }


def _waiting_at_resumed_handles(ledger: Ledger) -> set[int]:
    """Audio seqs that had reached an emulator, unread, when it issued a handle a session
    then resumed from (``HandleRecord.input_waiting``): the snapshot lacks them, and a client
    that placed the handle by its arrival saw them as held."""
    waiting: set[int] = set()
    for record in ledger.sessions.values():
        for conn in record.connections:
            if conn.resumed_handle_index is None:
                continue
            handle = record.handles[conn.resumed_handle_index]
            first, last = handle.consumed_through, handle.consumed_through + handle.input_waiting
            for message in record.connections[handle.connection].client_messages:
                if first < message.index <= last:
                    waiting.update(message.audio_seqs)
    return waiting


class _TurnCpu:
    """The CPU time of each event loop turn: this thread's, so another process's load on a
    shared machine does not count. A turn's CPU is how long it kept every other call of the
    process waiting: the loop lag the client's own work causes, which the ticker's lateness
    (scheduling by the machine included) only bounds from above."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.samples: list[tuple[float, float]] = []
        """(loop time at the turn's end, its CPU seconds), for turns of 1 ms or more."""
        self._loop: Any = loop
        self._run_once: Callable[[], None] | None = None

    def start(self) -> None:
        # A benchmark's instrument: the loop's turn is private, measured by wrapping it.
        run_once = self._run_once = self._loop._run_once
        samples, clock = self.samples, self._loop.time

        def measured() -> None:
            cpu = time.thread_time()
            run_once()
            cpu = time.thread_time() - cpu
            if cpu >= 0.001:
                samples.append((clock(), cpu))

        self._loop._run_once = measured

    def stop(self) -> None:
        if self._run_once is not None:
            del self._loop._run_once
            self._run_once = None

    def largest(self, since: float = -math.inf, until: float = math.inf) -> float:
        """The largest turn's CPU between the two instants."""
        return max((cpu for at, cpu in self.samples if since <= at < until), default=0.0)


def _speaks(k: int, index: int, speech_every: float) -> bool:
    """Whether chunk ``k`` of session ``index`` is speech: an utterance every
    ``speech_every`` seconds, the sessions' utterances staggered."""
    if speech_every <= 0:
        return False
    period = round(speech_every / CHUNK)
    return (k + index * 7) % period < round(UTTERANCE / CHUNK)


def _pct(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[int(share * (len(ordered) - 1))] if ordered else 0.0


@dataclass
class _Session:
    index: int
    transport: GeminiLiveTransport
    speech_every: float
    sent: dict[int, float] = field(default_factory=dict)
    """seq -> the instant it was captured (its real-time schedule)."""
    speech: set[int] = field(default_factory=set)
    moves: list[MoveReport] = field(default_factory=list)
    moved: asyncio.Event = field(default_factory=asyncio.Event)

    async def warm_up(self) -> None:
        answered, handle = asyncio.Event(), asyncio.Event()
        self.transport.on_generation_end = lambda gid, reason: answered.set()
        self.transport.on_resumption_update = lambda h, resumable, index: handle.set()
        self.transport.on_move = self._moved
        await self.transport.connect()
        self.transport.send_live_text([ContentTurn("user", "hello")])
        async with asyncio.timeout(WAIT):
            await answered.wait()
            await handle.wait()

    def _moved(self, report: MoveReport) -> None:
        self.moves.append(report)
        self.moved.set()

    async def stream(self, start: float, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        chunks = round(seconds / CHUNK)
        base = self.index * 1_000_000
        for k in range(chunks):
            due = start + k * CHUNK
            if (wait := due - loop.time()) > 0:
                await asyncio.sleep(wait)
            seq = base + k
            self.sent[seq] = due
            speech = _speaks(k, self.index, self.speech_every)
            if speech:
                self.speech.add(seq)
            self.transport.send_audio(user_audio(seq, speech=speech))


@dataclass(frozen=True)
class _Result:
    sessions: int
    lag_max: float
    lag_before: float
    """The loop lag's max before the storm: ``lag_max`` beyond it is what the moves added."""
    turn_before: float
    """The largest CPU time of one event loop turn before the storm."""
    turn_after: float
    """The largest from the storm on: what the moves cost the loop's lag, whatever the
    machine's load."""
    lag_p99: float
    p50: float
    p95: float
    worst: float
    speech_lost: int
    speech_lacking: int
    """Of ``speech_lost``: received, but absent from the session's final state."""
    speech_behind: int
    """Of the speech lacking: chunks an emulator had received, unread, when it issued the
    handle the session resumed from (the server behind its input)."""
    handles: int
    handles_behind: int
    """Handles issued with client messages unread (``HandleRecord.input_waiting``)."""
    most_unread: int
    speech_twice: int
    reported_dropped: int
    """Audio chunks the transports reported dropped (input stats and move reports)."""
    silent_loss: int
    """Speech lost beyond what the session's transport reported dropped."""
    silence_skipped: int
    moves: int
    max_stall: float | None
    cpu_per_session_second: float
    drain: float
    """Seconds from the streams' end until no transport held input to write: the client's
    own backlog (caller delay beyond it is the network's and the server's)."""
    server_cores: float | None
    """Cores the emulator processes took meanwhile (None without ``/proc``)."""
    server_lag_max: float
    server_lag_p99: float
    """The emulators' event loop lag meanwhile: a server that lags takes input late, and a
    handle it issues then lacks input that had reached it (the arrival rule's blind spot)."""

    @property
    def ok(self) -> bool:
        return (
            self.p95 < DELAY_GOAL
            and self.speech_lost == 0
            and self.silent_loss == 0
            and self.speech_twice == 0
            and self.moves >= self.sessions
        )


def _config() -> EmulatorConfig:
    # Prompt pongs: with the service's 8-30 s pongs, the bare SDK's baseline would close its
    # own connections (websockets' 20 s keepalive) under load; the transport copes with either.
    return EmulatorConfig(notice=NOTICE, setup_timeout=WAIT, pong_latency=0.0)


async def _level(
    servers: list[EmulatorProcess], sessions: int, seconds: float, options: Args, first: int
) -> _Result:
    """One N: sessions ``first`` .. ``first + sessions - 1`` (their chunks' seqs are theirs
    alone: the emulators' ledgers hold every level's)."""
    clients = [genai.Client(api_key="bench", http_options=s.http_options) for s in servers]
    resumption = ResumptionOptions(storm_spread=options.spread)
    rigs = [
        _Session(
            first + i,
            GeminiLiveTransport(
                client=clients[i % len(clients)], model=MODEL, resumption=resumption
            ),
            options.speech_every,
        )
        for i in range(sessions)
    ]
    await asyncio.gather(*(rig.warm_up() for rig in rigs))
    loop = asyncio.get_running_loop()
    lag = LoopTicker()
    start = loop.time() + 0.2
    lag.start()
    turns = _TurnCpu(loop)
    turns.start()
    await _servers_lag(servers)  # forgets the emulators' lag before this level's streams
    meter = _CpuMeter(servers, loop)
    streams = [asyncio.create_task(rig.stream(start, seconds)) for rig in rigs]
    storm = start + (seconds / 2 if options.storm_at is None else options.storm_at)
    await asyncio.sleep(max(0.0, storm - loop.time()))
    await asyncio.gather(*(server.fault("go_away") for server in servers))
    await asyncio.gather(*streams)
    ended = loop.time()
    await lag.stop()
    turns.stop()
    async with asyncio.timeout(WAIT):
        await asyncio.gather(*(rig.moved.wait() for rig in rigs))
    # Everything held is written first: a chunk the loop is late with is late, not lost.
    for _ in range(round(WAIT / 0.05)):
        if not any(_held(rig.transport) for rig in rigs):
            break
        await asyncio.sleep(0.05)
    drain = loop.time() - ended
    # Until the backlog is written: a client that fell behind writes the streamed audio after.
    cpu, server_cores = meter.read()
    server_lag = await _servers_lag(servers)
    reports = await _settled(servers)
    dropped = [_dropped(rig) for rig in rigs]
    await asyncio.gather(*(rig.transport.disconnect() for rig in rigs))
    arrivals = {seq: at for r in reports for seq, at in r["arrivals"].items()}
    lacking = set().union(*(r["lacking"] for r in reports))
    twice = set().union(*(r["twice"] for r in reports))
    behind = set().union(*(r["behind"] for r in reports))
    unread = [waiting for r in reports for waiting in r["unread"]]
    delays: list[float] = []
    speech_lost = speech_lacking = speech_behind = speech_twice = skipped = silent = 0
    for rig, reported in zip(rigs, dropped, strict=True):
        lost_here = 0
        for seq, due in rig.sent.items():
            if seq in arrivals:
                delays.append(arrivals[seq] - due)
            speech = seq in rig.speech
            if seq not in arrivals or seq in lacking:
                if speech:
                    lost_here += 1
                    speech_lacking += seq in lacking
                    speech_behind += seq in lacking and seq in behind
                else:
                    skipped += 1
            speech_twice += speech and seq in twice
        speech_lost += lost_here
        silent += max(0, lost_here - reported)
    return _Result(
        sessions=sessions,
        lag_max=max(lag.samples, default=0.0),
        lag_before=max(lag.before(storm), default=0.0),
        turn_before=turns.largest(until=storm),
        turn_after=turns.largest(since=storm),
        lag_p99=_pct(lag.samples, 0.99),
        p50=statistics.median(delays),
        p95=_pct(delays, 0.95),
        worst=max(delays),
        speech_lost=speech_lost,
        speech_lacking=speech_lacking,
        speech_behind=speech_behind,
        handles=len(unread),
        handles_behind=sum(1 for waiting in unread if waiting),
        most_unread=max(unread, default=0),
        speech_twice=speech_twice,
        reported_dropped=sum(dropped),
        silent_loss=silent,
        silence_skipped=skipped,
        moves=sum(len(rig.moves) for rig in rigs),
        max_stall=max((r["max_stall"] or 0.0 for r in reports), default=None),
        cpu_per_session_second=cpu / (sessions * seconds),
        drain=drain,
        server_cores=server_cores,
        server_lag_max=max(server_lag, default=0.0),
        server_lag_p99=_pct(server_lag, 0.99),
    )


async def _servers_lag(servers: list[EmulatorProcess]) -> list[float]:
    """The emulators' loop lag samples since the last call, all of them together."""
    return [
        lag for samples in await asyncio.gather(*(s.loop_lag() for s in servers)) for lag in samples
    ]


class _CpuMeter:
    """From when it is made: this process's CPU time, and how many cores the emulator
    processes took (a client measured on a machine whose server side takes more than its
    share is measured short of a core)."""

    def __init__(self, servers: list[EmulatorProcess], loop: asyncio.AbstractEventLoop) -> None:
        self._servers = servers
        self._loop = loop
        self._since = loop.time()
        self._client = time.process_time()
        self._server = self._servers_cpu()

    def _servers_cpu(self) -> float | None:
        total = 0.0
        for server in self._servers:
            seconds = server.cpu_seconds()
            if seconds is None:
                return None
            total += seconds
        return total

    def read(self) -> tuple[float, float | None]:
        """This process's CPU seconds so far, and the emulators' cores (None without
        ``/proc``)."""
        client = time.process_time() - self._client
        server, elapsed = self._servers_cpu(), self._loop.time() - self._since
        if server is None or self._server is None or elapsed <= 0:
            return client, None
        return client, (server - self._server) / elapsed


async def _settled(servers: list[EmulatorProcess]) -> list[dict[str, Any]]:
    """The emulators' reports once they have read what the client wrote: an emulator that
    fell behind (its process starved on a shared machine) still has chunks in its socket, and
    they are late, not lost. Read again, a second apart, until no more audio arrives."""
    received = -1
    reports: list[dict[str, Any]] = []
    for _ in range(round(WAIT)):
        await asyncio.sleep(1.0)
        reports = [_report(await s.ledger(), s.started_at) for s in servers]
        # Every receipt, replays included: a replay read late leaves the final state lacking.
        now = sum(r["receipts"] for r in reports)
        if now == received:
            break
        received = now
    return reports


def _held(transport: GeminiLiveTransport) -> bool:
    """Whether the transport still holds input to write."""
    stats = transport.get_diagnostics().input
    return stats is not None and stats.buffered > 0


def _dropped(rig: _Session) -> int:
    """Audio chunks the session's transport reported dropped: those never written (its input
    stats) and those its resumed sessions lacked (its move reports)."""
    stats = rig.transport.get_diagnostics().input
    unsent = stats.audio_chunks_dropped if stats is not None else 0
    return unsent + sum(report.audio_chunks_dropped for report in rig.moves)


async def _sdk_send(session: Any, pcm: bytes) -> None:
    await session.send_realtime_input(audio=types.Blob(data=pcm, mime_type=INPUT_AUDIO_MIME))


async def _sdk_drain(session: Any) -> None:
    while True:
        async for _ in session.receive():
            pass


BASELINES: dict[str, tuple[Callable[[Any, bytes], Any], Callable[[Any], Any]]] = {
    "sdk": (_sdk_send, _sdk_drain),
    "floor": (wire_floor.send, wire_floor.drain),
}
"""The baselines' way to send a chunk and to receive (answers dropped). ``sdk``: the bare
google-genai SDK, the cost the transport is compared with. ``floor``: ``wire_floor``, the
least a client does per chunk through websockets' public API."""


@dataclass(frozen=True)
class _Baseline:
    """A baseline's run: its CPU per session-second, and whether one process kept up with N
    of its sessions, no move made (the loop lag's p99, and how late its chunks were sent
    against their real-time schedule, p95): where the bare SDK itself falls behind, no
    transport on top of it can keep up."""

    cpu_per_session_second: float
    lag_p99: float
    late_p95: float
    server_cores: float | None

    def __str__(self) -> str:
        return (
            f"{self.cpu_per_session_second * 1e6:.0f} us/session-s, loop lag p99 "
            f"{_ms(self.lag_p99)} ms, chunks sent late p95 {_ms(self.late_p95)} ms, "
            f"emulators {_cores(self.server_cores)}"
        )


async def _baseline(
    name: str,
    servers: list[EmulatorProcess],
    sessions: int,
    seconds: float,
    speech_every: float,
    first: int,
) -> _Baseline:
    """Baseline ``name`` (``BASELINES``) streaming the same audio, no move made."""
    send, drain = BASELINES[name]
    clients = [genai.Client(api_key="bench", http_options=s.http_options) for s in servers]
    config = types.LiveConnectConfig(response_modalities=[types.Modality.AUDIO])
    async with contextlib.AsyncExitStack() as stack:
        live = [
            await stack.enter_async_context(
                clients[i % len(clients)].aio.live.connect(model=MODEL, config=config)
            )
            for i in range(sessions)
        ]

        late: list[float] = []

        async def stream(index: int, session: Any, start: float) -> None:
            loop = asyncio.get_running_loop()
            for k in range(round(seconds / CHUNK)):
                due = start + k * CHUNK
                if (wait := due - loop.time()) > 0:
                    await asyncio.sleep(wait)
                speech = _speaks(k, index, speech_every)
                await send(session, user_audio(index * 1_000_000 + k, speech=speech))
                late.append(loop.time() - due)

        readers = [asyncio.create_task(drain(session)) for session in live]
        lag = LoopTicker()
        lag.start()
        loop = asyncio.get_running_loop()
        start = loop.time() + 0.2
        meter = _CpuMeter(servers, loop)
        await asyncio.gather(*(stream(first + i, s, start) for i, s in enumerate(live)))
        cpu, server_cores = meter.read()
        await lag.stop()
        for reader in readers:
            reader.cancel()
        await asyncio.wait(readers)
    return _Baseline(
        cpu / (sessions * seconds), _pct(lag.samples, 0.99), _pct(late, 0.95), server_cores
    )


def _cores(cores: float | None) -> str:
    return "-" if cores is None else f"{cores:.2f} cores"


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f}"


@dataclass(frozen=True)
class Args:
    sessions: list[int]
    seconds: float
    emulators: int
    spread: float
    speech_every: float
    baseline: bool
    storm_at: float | None


class _GcPauses:
    """The garbage collector's pauses while the ``with`` block runs: a full collection walks
    every tracked object of the process, and stops its event loop meanwhile."""

    def __init__(self) -> None:
        self._started = 0.0
        self.pauses: dict[int, list[float]] = {0: [], 1: [], 2: []}

    def __enter__(self) -> _GcPauses:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *_: object) -> None:
        gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.pauses[info["generation"]].append(time.perf_counter() - self._started)

    def __str__(self) -> str:
        return "garbage collections: " + ", ".join(
            f"gen {g} x{len(p)} longest {_ms(max(p, default=0.0))} ms"
            for g, p in self.pauses.items()
        )


async def _main(args: Args) -> None:
    logger.remove()
    print(
        f"python {sys.version.split()[0]}; {args.emulators} emulator process(es); "
        f"{args.seconds:g} s each; storm_spread {args.spread:g} s; "
        f"an utterance every {args.speech_every:g} s"
    )
    print(
        f"{'sessions':>8} {'turn pre':>8} {'turn post':>9} {'lag pre':>8} {'lag max':>8} "
        f"{'lag p99':>8} {'p50 ms':>7} {'p95 ms':>7} {'max ms':>7} {'speech lost':>11} "
        f"{'lacking':>8} {'reported':>8} {'silent':>6} {'twice':>6} {'silence skipped':>15} "
        f"{'moves':>6} {'stall ms':>9} {'drain ms':>9} {'CPU us/session-s':>17} "
        f"{'bare SDK':>9} {'ratio':>6} {'floor':>6} {'ratio':>6}"
    )
    best = None
    async with contextlib.AsyncExitStack() as stack:
        servers = [
            await stack.enter_async_context(EmulatorProcess(_config()))
            for _ in range(args.emulators)
        ]
        first = 0  # each level's sessions (and the baseline's) number on from the last
        for n in args.sessions:
            with _GcPauses() as pauses:
                r = await _level(servers, n, args.seconds, args, first)
            first += n
            bare = floor = None
            if args.baseline:
                bare = await _baseline("sdk", servers, n, args.seconds, args.speech_every, first)
                first += n
                floor = await _baseline("floor", servers, n, args.seconds, args.speech_every, first)
                first += n
            cpu = r.cpu_per_session_second
            ratio = f"{cpu / bare.cpu_per_session_second:.2f}" if bare else "-"
            over_floor = f"{cpu / floor.cpu_per_session_second:.2f}" if floor else "-"
            print(
                f"{n:>8} {_ms(r.turn_before):>8} {_ms(r.turn_after):>9} "
                f"{_ms(r.lag_before):>8} {_ms(r.lag_max):>8} {_ms(r.lag_p99):>8} {_ms(r.p50):>7} "
                f"{_ms(r.p95):>7} {_ms(r.worst):>7} {r.speech_lost:>11} {r.speech_lacking:>8} "
                f"{r.reported_dropped:>8} {r.silent_loss:>6} {r.speech_twice:>6} "
                f"{r.silence_skipped:>15} {r.moves:>6} {_ms(r.max_stall):>9} {_ms(r.drain):>9} "
                f"{cpu * 1e6:>17.0f} "
                f"{'-' if bare is None else f'{bare.cpu_per_session_second * 1e6:.0f}':>9} "
                f"{ratio:>6} "
                f"{'-' if floor is None else f'{floor.cpu_per_session_second * 1e6:.0f}':>6} "
                f"{over_floor:>6}"
                f"{'' if r.ok else '   over the goal'}"
                f"{'' if r.drain < WAIT else '   (input still held after the drain wait)'}",
                flush=True,
            )
            print(f"         {pauses}", flush=True)
            print(
                f"         emulators while streaming: {_cores(r.server_cores)}, their loop "
                f"lag max {_ms(r.server_lag_max)} ms, p99 {_ms(r.server_lag_p99)} ms",
                flush=True,
            )
            print(
                f"         handles the emulators issued with input unread: {r.handles_behind} "
                f"of {r.handles} (at most {r.most_unread} messages); speech lacking that had "
                f"reached them, unread, before the handle it was resumed from: {r.speech_behind}",
                flush=True,
            )
            if bare is not None and floor is not None:
                print(f"         bare SDK, no move: {bare}", flush=True)
                print(f"         wire floor, no move: {floor}", flush=True)
            if r.ok:
                best = r
    if best is None:
        print("no N kept p95 < 50 ms with no speech lost or heard twice")
    else:
        print(
            f"largest N with p95 < 50 ms, no speech lost or heard twice: {best.sessions} "
            "sessions on one client process (one core; goal >= 150)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, nargs="+", default=[25, 50, 100, 150])
    parser.add_argument("--seconds", type=float, default=6.0, help="streamed seconds per N")
    parser.add_argument("--emulators", type=int, default=2, help="emulator processes")
    parser.add_argument("--spread", type=float, default=0.0, help="ResumptionOptions.storm_spread")
    parser.add_argument(
        "--speech-every",
        type=float,
        default=3.0,
        help=f"0: silence only; {UTTERANCE:g} (an utterance's length): the user never pauses",
    )
    parser.add_argument(
        "--storm-at", type=float, default=None, help="seconds into the stream (default: midway)"
    )
    parser.add_argument("--no-baseline", dest="baseline", action="store_false")
    parser.add_argument(
        "--gc-freeze",
        action="store_true",
        help="gc.freeze() once everything is imported, as a server process would at start-up",
    )
    ns = parser.parse_args()
    if ns.gc_freeze:
        # What was loaded at start-up (the SDK, the frameworks' modules, pydantic's models)
        # leaves the collector's generations: a full collection then walks only what the calls
        # made since, not the whole heap (see the README, "Many calls in one process").
        gc.freeze()
    asyncio.run(
        _main(
            Args(
                ns.sessions,
                ns.seconds,
                max(1, ns.emulators),
                ns.spread,
                ns.speech_every,
                ns.baseline,
                ns.storm_at,
            )
        )
    )


if __name__ == "__main__":
    main()
