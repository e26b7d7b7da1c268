"""What a connection move costs, on the emulator, with a caller streaming audio in real time.

Per profile: N planned moves (goAway, alternately at idle and mid-answer) and N lost-connection
moves (an abrupt drop at idle), each between two answered turns. Printed:

- input gap per move: the transport's ``MoveReport.gap_ms``, and as the caller lives it: the
  most any of its audio chunks was delayed on its way to the connection that kept it, beyond
  the usual latency (send time against the emulator's receive time);
- time from goAway to the move's start and end (the move waits for a resumable point);
- client audio chunks lost per 100 moves (accepted by the transport, absent from the
  session's final state, from the emulator's ledger), and duplicated ones;
- CPU per move on the client's thread (transport, SDK, TLS): rounds of a typed turn and a
  move, without audio, against rounds of the turn alone (difference of medians);
- per setup latency (``--setups``, wall seconds of each setup): the input stall of each
  planned move as the emulator's ledger measures it (the longest time no connection received
  client audio around the move) and its lag (that stall beyond the caller's 20 ms spacing of
  audio, the figure a "no stall" target is about), and a question asked while the
  replacement sets up against the same question at rest (from the end of the utterance to
  the answer's first chunk), as pairwise differences and as differences of the median and
  p95 of each (the answer's latency at rest varies by a chunk or two on its own).

Each of these runs on the service as teams measured it in 2026 (the emulator's defaults: a
resume refused with 1011 while the old connection is open, pongs 8-30 s late, the 15-minute cap
without compression) and on a kind one (``EmulatorConfig.kind()``), unless ``--services`` says
otherwise. Beside each, from the ledger: the user's speech lost and heard twice, silence heard
twice, resumes refused while the old connection was open, and server sessions rebuilt.

The emulator runs on its own thread, so CPU figures are the client's alone.

    .venv/bin/python tests/benchmarks/bench_rotation.py [--moves 20] [--profiles gemini vertex]
        [--setups 0.3 4] [--services strict kind]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from dataclasses import dataclass
from typing import Any, TypeVar

from emulator_thread import EmulatorThread
from google.oauth2.credentials import Credentials
from loguru import logger

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.move_reports import MoveReport
from realtime_resumption.resumption import ResumptionOptions
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig
from realtime_resumption.testing.emulator.caller import CallerEvent, CallerRecord, ScriptedCaller
from realtime_resumption.testing.emulator.ledger import LedgerSummary, SessionRecord
from realtime_resumption.testing.emulator.server import VERTEX_LOCATION, VERTEX_PROJECT

T = TypeVar("T")

MODEL = "gemini-live-2.5-flash-preview"
SCALE = 0.5
"""Emulator durations at 1/2: a 10-chunk answer takes 200 ms, a turn ends on 250 ms of
silence, so the transport's 0.3 s replay margin before a post-turn handle covers silence, as
in a real conversation. Audio streams in real time: 20 ms chunks every 20 ms."""
NOTICE = 4.0
"""goAway timeLeft before scaling: 2 s."""
CHUNK_MS = 20
TURN_SILENCE = 0.5 * SCALE + 0.04
WAIT = 10.0
RESUMPTION = ResumptionOptions(deadline_margin=1.0, retry_delays=(0.0, 0.05, 0.1, 0.2))
QUESTION = ("what", "is", "new", "today")


@dataclass
class _Run:
    """One phase's moves and what the caller saw."""

    moves: list[MoveReport]
    go_away_timing: list[tuple[bool, float, float]]
    """Planned moves: (at idle, ms from goAway to the move's start, to its end)."""
    caller_gap: list[float]
    audio_accepted: int
    audio_lost: int
    audio_duplicated: int
    stalls: list[float]
    """The ledger's input stall of each move (ms)."""
    lags: list[float]
    """The ledger's input lag of each move: the stall beyond the audio's usual spacing (ms)."""
    words: _Words


@dataclass
class _Words:
    """What became of the user's audio, from the ledger: speech is the user's words."""

    speech_lost: int = 0
    speech_twice: int = 0
    silence_lost: int = 0
    silence_twice: int = 0
    refused_while_open: int = 0
    sessions: int = 0
    """Server sessions the call ran on (more than one: a move rebuilt it)."""

    def __str__(self) -> str:
        return (
            f"speech lost {self.speech_lost}, speech twice {self.speech_twice}, silence lost "
            f"{self.silence_lost}, silence twice {self.silence_twice}; resumes refused while "
            f"open {self.refused_while_open}; server sessions {self.sessions}"
        )


def _words(emu: Emulator, sessions: tuple[str, ...]) -> _Words:
    summary = emu.ledger.summary()
    words = _Words(sessions=len(sessions))
    for sid in sessions:
        s = summary.sessions[sid]
        words.speech_lost += len(s.speech_lost)
        words.speech_twice += len(s.speech_duplicates)
        words.silence_lost += len(s.silence_lost)
        words.silence_twice += len(s.silence_duplicates)
        words.refused_while_open += sum(
            c.refused == "open-session" for c in emu.ledger.sessions[sid].connections
        )
    return words


def _config(service: str, **changes: Any) -> EmulatorConfig:
    """The emulator as the service was measured (``strict``: its defaults) or a kind one."""
    return EmulatorConfig(**changes) if service == "strict" else EmulatorConfig.kind(**changes)


def _ledger_stalls(summary: LedgerSummary, sessions: tuple[str, ...]) -> tuple[list[float], ...]:
    """The ledger's input stall and lag (ms) of each move of ``sessions``."""
    moves = [m for sid in sessions for m in summary.sessions[sid].moves]
    stalls = [1000 * m.input_stall for m in moves if m.input_stall is not None]
    lags = [1000 * m.input_lag for m in moves if m.input_lag is not None]
    return stalls, lags


def _transport(server: EmulatorThread, profile: str) -> GeminiLiveTransport:
    http_options = server.http_options
    common: dict[str, Any] = {
        "model": MODEL,
        "tool_call_grace": 0.02,
        "resumption": RESUMPTION,
        "http_options": http_options,
    }
    if profile == "vertex":
        return GeminiLiveTransport(
            vertexai=True,
            project=VERTEX_PROJECT,
            location=VERTEX_LOCATION,
            credentials=Credentials(token="bench"),  # type: ignore[no-untyped-call]
            transparent=True,
            **common,
        )
    return GeminiLiveTransport(api_key="bench", **common)


async def _streaming_caller(
    server: EmulatorThread, profile: str
) -> tuple[GeminiLiveTransport, ScriptedCaller, str]:
    """A connected transport and a caller streaming its microphone in real time."""
    transport = _transport(server, profile)
    caller = ScriptedCaller(transport, chunk_ms=CHUNK_MS, pace=1.0, turn_silence=TURN_SILENCE)
    await transport.connect()
    caller.start_microphone()
    return transport, caller, caller.record.session_ids[0]


async def _phase(
    server: EmulatorThread, profile: str, kind: str, count: int, notice: float = NOTICE
) -> _Run:
    """``count`` rounds of an answered turn, then (``kind``) a goAway (``notice``) or a drop."""
    transport, caller, session = await _streaming_caller(server, profile)
    idle_flags: list[bool] = []
    for round_ in range(count):
        moves = len(caller.record.moves)
        if kind == "planned" and round_ % 2:
            # Mid-answer: the goAway comes with the answer's third chunk.
            fired: list[CallerEvent] = []

            def at_chunk(event: CallerEvent, fired: list[CallerEvent] = fired) -> None:
                if not fired and event.kind == "answer_chunk" and event.chunk == 2:
                    fired.append(event)
                    server.soon(lambda emu: emu.faults.go_away(notice, session_id=session))

            remove = caller.add_listener(at_chunk)
            await caller.ask(QUESTION, timeout=WAIT)
            remove()
            idle_flags.append(False)
        else:
            await caller.ask(QUESTION, timeout=WAIT)
            await _handle_after_turn(caller)
            if kind == "planned":
                server.soon(lambda emu: emu.faults.go_away(notice, session_id=session))
                idle_flags.append(True)
            else:
                server.soon(lambda emu: emu.faults.drop(session))
        await caller.wait_until(
            lambda r, n=moves: len(r.moves) > n and not r.move_in_progress,
            timeout=WAIT,
            what="the move",
        )
    await caller.stop_microphone()
    await asyncio.sleep(0.2)  # the last chunks reach the emulator
    await transport.disconnect()
    await caller.aclose()
    return _measure(server, caller, kind, idle_flags)


async def _handle_after_turn(caller: ScriptedCaller) -> None:
    """Wait for a resumable handle newer than the last turn."""

    def seen(r: CallerRecord) -> bool:
        ends = [e.at for e in r.events if e.kind == "turn_complete"]
        since = ends[-1] if ends else 0.0
        return any(u.has_handle and u.resumable and u.at > since for u in r.resumption_updates)

    await caller.wait_until(seen, timeout=WAIT, what="a handle")


def _measure(
    server: EmulatorThread,
    caller: ScriptedCaller,
    kind: str,
    idle_flags: list[bool],
) -> _Run:
    sessions = tuple(dict.fromkeys(caller.record.session_ids))

    def collect(
        emu: Emulator,
    ) -> tuple[dict[int, float], set[int], int, tuple[list[float], ...], _Words]:
        summary = emu.ledger.summary()
        arrival: dict[int, float] = {}
        kept: set[int] = set()
        duplicated = 0
        for sid in sessions:
            arrival.update(_kept_arrivals(emu.ledger.sessions[sid]))
            kept.update(summary.sessions[sid].audio_consumed)
            duplicated += len(summary.sessions[sid].audio_duplicates)
        return arrival, kept, duplicated, _ledger_stalls(summary, sessions), _words(emu, sessions)

    arrival, kept, duplicated, (stalls, lags), words = server.call(collect)
    record = caller.record
    sent = {a.seq: a.at for a in record.audio}
    delays = {seq: arrival[seq] - at for seq, at in sent.items() if seq in arrival}
    usual = min(delays.values()) if delays else 0.0
    moves = list(record.moves)
    caller_gap = []
    for move in moves:
        window = [
            delay - usual
            for seq, delay in delays.items()
            if move.started_at - 0.2 <= sent[seq] <= move.finished_at + 0.2
        ]
        caller_gap.append(max(window, default=0.0) * 1000)
    timing = []
    if kind == "planned":
        for move, idle in zip(moves, idle_flags, strict=True):
            notice = max(at for at, _ in record.go_aways if at <= move.started_at)
            timing.append(
                (idle, (move.started_at - notice) * 1000, (move.finished_at - notice) * 1000)
            )
    return _Run(
        moves=moves,
        go_away_timing=timing,
        caller_gap=caller_gap,
        audio_accepted=len(sent),
        audio_lost=sum(1 for seq in sent if seq not in kept),
        audio_duplicated=duplicated,
        stalls=stalls,
        lags=lags,
        words=words,
    )


def _kept_arrivals(record: SessionRecord) -> dict[int, float]:
    """When each audio chunk reached the session state that kept it: the final connection's
    receipts, then those of the connection its handle came from, up to the handle's issue,
    and so on back to a fresh connection (the earliest kept copy counts)."""
    established = [c for c in record.connections if c.established]
    arrival: dict[int, float] = {}
    conn = established[-1] if established else None
    cutoff = float("inf")
    while conn is not None:
        for message in conn.client_messages:
            if message.time <= cutoff:
                for seq in message.audio_seqs:
                    arrival[seq] = min(arrival.get(seq, message.time), message.time)
        if conn.resumed_handle_index is None:
            break
        handle = record.handles[conn.resumed_handle_index]
        conn, cutoff = record.connections[handle.connection], handle.issued_at
    return arrival


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def _stats(values: list[float]) -> str:
    if not values:
        return "        n/a"
    return f"median {statistics.median(values):7.1f}  p95 {_p95(values):7.1f}"


async def _cpu_per_move(server: EmulatorThread, profile: str, kind: str, count: int) -> float:
    """Client-thread CPU milliseconds a move adds to a round of conversation.

    Rounds of a typed turn alone alternate with rounds of a typed turn and a move (``kind``:
    a goAway at idle or a drop), without audio; the figure is the difference of their medians,
    which a stray collection or scheduling hiccup does not sway."""
    transport = _transport(server, profile)
    caller = ScriptedCaller(transport)
    await transport.connect()
    session = caller.record.session_ids[0]
    alone: list[float] = []
    moved: list[float] = []
    for round_ in range(2 * count):
        start = time.thread_time()
        await caller.ask_typed("hello", timeout=WAIT)
        await _handle_after_turn(caller)
        if round_ % 2:
            moves = len(caller.record.moves)
            if kind == "planned":
                server.soon(lambda emu: emu.faults.go_away(NOTICE, session_id=session))
            else:
                server.soon(lambda emu: emu.faults.drop(session))
            await caller.wait_until(
                lambda r, n=moves: len(r.moves) > n and not r.move_in_progress,
                timeout=WAIT,
                what="the move",
            )
        (moved if round_ % 2 else alone).append(time.thread_time() - start)
    await transport.disconnect()
    await caller.aclose()
    return 1000 * (statistics.median(moved) - statistics.median(alone))


def _report(kind: str, run: _Run, cpu_ms: float) -> None:
    moves = run.moves
    reasons = {str(m.reason) for m in moves}
    outcomes = {str(m.outcome) for m in moves}
    print(f"  {kind} moves: {len(moves)} ({', '.join(sorted(reasons))}; {', '.join(outcomes)})")
    print(f"    input gap, MoveReport.gap_ms (ms)    {_stats([m.gap_ms for m in moves])}")
    print(f"    input gap, caller's audio delay (ms) {_stats(run.caller_gap)}")
    print(f"    input stall, emulator's ledger (ms)  {_stats(run.stalls)}")
    print(f"    input lag beyond the cadence (ms)    {_stats(run.lags)}")
    if kind == "planned":
        for label, idle in (("at idle", True), ("mid-answer", False)):
            starts = [start for i, start, _ in run.go_away_timing if i == idle]
            ends = [end for i, _, end in run.go_away_timing if i == idle]
            print(f"    goAway {label:10} -> move start (ms) {_stats(starts)}")
            print(f"    goAway {label:10} -> move done (ms)  {_stats(ends)}")
    lost = 100 * run.audio_lost / max(1, len(moves))
    print(
        f"    audio chunks lost per 100 moves      {lost:7.1f}  "
        f"({run.audio_lost} of {run.audio_accepted} sent; {run.audio_duplicated} duplicated)"
    )
    print(f"    the user's audio, ledger             {run.words}")
    print(f"    CPU per move, client thread (ms)     {cpu_ms:7.2f}")
    replayed = [float(m.messages_replayed) for m in moves]
    buffered = [float(m.messages_buffered) for m in moves]
    print(f"    messages replayed per move           {_stats(replayed)}")
    print(f"    messages buffered per move           {_stats(buffered)}")


def _answer_latency(record: CallerRecord, utterance_end: float) -> float:
    """Ms from the end of an utterance to the first answer chunk heard after it."""
    first = min(e.at for e in record.events if e.kind == "answer_chunk" and e.at > utterance_end)
    return 1000 * (first - utterance_end)


async def _question_during_dial(
    server: EmulatorThread, profile: str, count: int, notice: float
) -> tuple[list[float], list[float], list[float], list[float], int, _Words]:
    """Rounds of the same question at rest, then asked as a planned move starts dialling.
    Returns the latencies at rest and during the dial, the moves' ledger stalls and lags, and
    the answers the emulator counted as cut."""
    transport, caller, session = await _streaming_caller(server, profile)
    rest: list[float] = []
    dial: list[float] = []
    for _ in range(count):
        utterance = await caller.ask(QUESTION, timeout=WAIT)
        assert utterance.finished_at is not None
        rest.append(_answer_latency(caller.record, utterance.finished_at))
        await _handle_after_turn(caller)
        moves, started = len(caller.record.moves), len(caller.record.moves_started)
        server.soon(lambda emu: emu.faults.go_away(notice, session_id=session))
        await caller.wait_until(
            lambda r, n=started: len(r.moves_started) > n, timeout=WAIT, what="the move start"
        )
        utterance = await caller.ask(QUESTION, timeout=WAIT)
        assert utterance.finished_at is not None
        dial.append(_answer_latency(caller.record, utterance.finished_at))
        await caller.wait_until(
            lambda r, n=moves: len(r.moves) > n and not r.move_in_progress,
            timeout=WAIT * 4,
            what="the move",
        )
    await caller.stop_microphone()
    await asyncio.sleep(0.2)
    await transport.disconnect()
    await caller.aclose()
    sessions = tuple(dict.fromkeys(caller.record.session_ids))

    def collect(emu: Emulator) -> tuple[tuple[list[float], ...], int, _Words]:
        summary = emu.ledger.summary()
        cut = sum(len(summary.sessions[sid].answers_cut) for sid in sessions)
        return _ledger_stalls(summary, sessions), cut, _words(emu, sessions)

    (stalls, lags), cut, words = server.call(collect)
    return rest, dial, stalls, lags, cut, words


async def _setups(service: str, profile: str, setups: list[float], count: int) -> None:
    for setup in setups:
        # setup_latency is on the emulator's clock: scaled to ``setup`` wall seconds.
        config = _config(
            service, profile=profile, time_scale=SCALE, seed=1, setup_latency=setup / SCALE
        )
        with EmulatorThread(config) as server:
            # The service gives 50-60 s of notice; the bench's short one must still cover a setup.
            notice = max(NOTICE, 4 * setup / SCALE)
            run = await _phase(server, profile, "planned", count, notice)
            rest, dial, stalls, lags, cut, words = await _question_during_dial(
                server, profile, count, notice
            )
        print(f"  setups of {setup:g} s:")
        print(f"    planned moves: input stall, ledger (ms)  {_stats(run.stalls)}")
        print(f"    planned moves: input lag, ledger (ms)    {_stats(run.lags)}")
        print(
            f"    planned moves: MoveReport.gap_ms         {_stats([m.gap_ms for m in run.moves])}"
        )
        print(f"    question at rest -> answer (ms)          {_stats(rest)}")
        print(f"    question during the dial -> answer (ms)  {_stats(dial)}")
        extra = [d - r for d, r in zip(dial, rest, strict=True)]
        print(f"    during the dial minus at rest (ms)       {_stats(extra)}  (pairwise)")
        print(
            "    during the dial minus at rest (ms)       median "
            f"{statistics.median(dial) - statistics.median(rest):7.1f}  "
            f"p95 {_p95(dial) - _p95(rest):7.1f}  (of each)"
        )
        print(f"    moves with a question: input stall (ms)  {_stats(stalls)}")
        print(f"    moves with a question: input lag (ms)    {_stats(lags)}")
        print(f"    answers cut (ledger)                     {cut}")
        print(f"    planned moves: the user's audio          {run.words}")
        print(f"    moves with a question: the user's audio  {words}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--moves", type=int, default=20, help="moves of each kind per profile")
    parser.add_argument("--profiles", nargs="+", default=["gemini", "vertex"])
    parser.add_argument(
        "--setups", nargs="*", type=float, default=[0.3, 4.0], help="setup latencies (s)"
    )
    parser.add_argument(
        "--services",
        nargs="+",
        default=["strict", "kind"],
        choices=["strict", "kind"],
        help="the service as measured (the emulator's defaults) and/or a kind one",
    )
    args = parser.parse_args()
    logger.remove()  # the figures, not the logs
    print(
        f"Moves on the emulator (time scale {SCALE}), a caller streaming {CHUNK_MS} ms chunks "
        "in real time"
    )
    for service in args.services:
        for profile in args.profiles:
            config = _config(service, profile=profile, time_scale=SCALE, seed=1)
            with EmulatorThread(config) as server:
                print(f"{profile}, {service} service:")
                for kind in ("planned", "lost"):
                    run = await _phase(server, profile, kind, args.moves)
                    _report(kind, run, await _cpu_per_move(server, profile, kind, args.moves))
            await _setups(service, profile, args.setups, args.moves)


if __name__ == "__main__":
    asyncio.run(main())
