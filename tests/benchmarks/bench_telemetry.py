"""What telemetry costs: client CPU per move and per audio chunk, with telemetry off, on the
OpenTelemetry API's no-op providers (an app with no SDK), and on the real SDK (spans exported
to memory, metrics read in memory), in the same run, interleaved.

The emulator runs on its own thread and event loop, so the figures are the client thread's CPU
time alone (``time.thread_time``). A move is a planned one (goAway at an idle moment on a
service that takes make-before-break), from the notice to ``on_move``; a chunk is 20 ms of
audio sent until written, and 40 ms of answer received and delivered. The last lines put them
together as a call does: 50 chunks each way per second and a move every ten minutes.

    .venv/bin/python tests/benchmarks/bench_telemetry.py
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable

from bench_transport import (
    RECEIVE_CHUNKS,
    cpu_per_unit,
    transport_receive,
    transport_send,
    until,
)
from emulator_thread import EmulatorThread
from loguru import logger
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracerProvider

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.move_reports import HandleKind, MoveOutcome, MoveReason, MoveReport
from realtime_resumption.redaction import redact
from realtime_resumption.telemetry import Telemetry
from realtime_resumption.testing.emulator import EmulatorConfig
from realtime_resumption.transport import (
    ConnectAttempt,
    GenerationClose,
    GenerationEndReason,
    SetupOk,
)

MODEL = "gemini-live-2.5-flash-preview"
MOVES = 20
RUNS = 5
CHUNKS_PER_SECOND = 50
MOVE_EVERY = 600.0
"""Seconds between moves in a call (Gemini Live rotates connections about every ten minutes)."""


class Sdk:
    """The real SDK, exporting to memory; cleared between runs."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.reader = InMemoryMetricReader()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.telemetry = Telemetry(
            tracer_provider=tracer_provider,
            meter_provider=MeterProvider(metric_readers=[self.reader]),
        )


def modes(sdk: Sdk) -> dict[str, Telemetry | bool]:
    return {
        "off": False,
        "no-op": Telemetry(
            tracer_provider=NoOpTracerProvider(), meter_provider=NoOpMeterProvider()
        ),
        "sdk": sdk.telemetry,
    }


async def per_move(server: EmulatorThread, telemetry: Telemetry | bool) -> float:
    transport = GeminiLiveTransport(
        api_key="bench", http_options=server.http_options, model=MODEL, telemetry=telemetry
    )
    reports: list[MoveReport] = []
    handles: list[bool] = []
    transport.on_move = reports.append
    transport.on_resumption_update = lambda _handle, resumable, _index: handles.append(resumable)
    await transport.connect()
    await until(lambda: any(handles))

    async def work() -> int:
        for n in range(1, MOVES + 1):
            handles.clear()
            server.soon(lambda emu: emu.faults.go_away(20.0))
            await until(lambda n=n: len(reports) == n)  # type: ignore[misc]
            await until(lambda: any(handles))  # the new connection's first handle
        return MOVES

    figure = await cpu_per_unit(work)
    await transport.disconnect()
    assert all(r.outcome.value == "resumed" for r in reports), reports
    return figure


async def per_chunk_sent(server: EmulatorThread, telemetry: Telemetry | bool) -> float:
    _calls, whole_path = await transport_send(server.http_options, telemetry=telemetry)
    return whole_path


async def per_chunk_received(server: EmulatorThread, telemetry: Telemetry | bool) -> float:
    return await transport_receive(server.http_options, telemetry=telemetry)


# --- the hooks alone: the telemetry's own share, without the network's noise ------------------

HOOK_MOVES = 2000
LOOKUPS = 200_000


def _report(number: int) -> MoveReport:
    return MoveReport(
        number=number,
        reason=MoveReason.PLANNED,
        handle_kind=HandleKind.AFTER_TURN,
        handle=redact("h" * 48),
        outcome=MoveOutcome.RESUMED,
        gap_ms=0.0,
        messages_buffered=2,
        messages_replayed=5,
        audio_chunks_dropped=0,
        audio_seconds_dropped=0.0,
        attempts=1,
        started_at=0.0,
        finished_at=0.4,
        audio_ms_replayed=100.0,
        go_away_notice_ms=5000.0,
        go_away_to_switch_ms=400.0,
    )


async def hooks_per_move(telemetry: Telemetry) -> float:
    """CPU microseconds the telemetry spends on one move's callbacks (a handle, the goAway,
    the move, the new connection's attempt and setup, the old one's close, one answer); the
    events are made beforehand, as the transport makes them anyway."""
    session = telemetry.session(provider="gcp.gemini", model=MODEL)
    session.on_connection_lifecycle(ConnectAttempt("att_0", handle_supplied=False))
    session.on_connection_lifecycle(SetupOk("att_0", 0))
    moves = [
        (
            ConnectAttempt(f"att_{n}", handle_supplied=True),
            SetupOk(f"att_{n}", n),
            _report(n),
            GenerationClose(f"att_{n - 1}", n - 1, 1000, None),
            f"gen_{n}",
        )
        for n in range(1, HOOK_MOVES + 1)
    ]
    handle = "h" * 48
    start = time.thread_time()
    for attempt, setup, report, close, generation in moves:
        session.on_resumption_update(handle, True, None)
        session.on_go_away("5s", 5.0)
        session.on_move_started(MoveReason.PLANNED, HandleKind.AFTER_TURN)
        session.on_connection_lifecycle(attempt)
        session.on_connection_lifecycle(setup)
        session.on_move(report)
        session.on_connection_lifecycle(close)
        session.on_generation_start(generation)
        session.on_generation_end(generation, GenerationEndReason.GENERATION_COMPLETE)
    spent = time.thread_time() - start
    session.close()
    return spent * 1e6 / HOOK_MOVES


def lookup_per_callback(telemetry: Telemetry | bool) -> float:
    """CPU nanoseconds the transport's parts spend reading one framework callback (as they
    do for every audio chunk) with and without the observer in front."""
    transport = GeminiLiveTransport(api_key="bench", model=MODEL, telemetry=telemetry)
    transport.on_audio_output = lambda _chunk: None
    callbacks = transport._s.callbacks
    start = time.thread_time()
    for _ in range(LOOKUPS):
        callbacks.on_audio_output  # noqa: B018 - the read is what is measured
    return (time.thread_time() - start) * 1e9 / LOOKUPS


Measure = Callable[[EmulatorThread, Telemetry | bool], Awaitable[float]]


async def interleaved(server: EmulatorThread, measure: Measure, sdk: Sdk) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {name: [] for name in modes(sdk)}
    for _ in range(RUNS):
        for name, telemetry in modes(sdk).items():
            samples[name].append(await measure(server, telemetry))
        sdk.exporter.clear()
    return samples


def _line(what: str, samples: dict[str, list[float]]) -> None:
    # The minimum estimates the intrinsic cost on a shared machine; the median shows the spread.
    best = {name: min(values) for name, values in samples.items()}
    figures = "  ".join(
        f"{name} {best[name]:8.1f} (median {statistics.median(values):8.1f})"
        for name, values in samples.items()
    )
    print(f"  {what:<16} {figures}")
    print(
        f"  {'':<16} no-op/off {best['no-op'] / best['off']:.3f}x   "
        f"sdk/off {best['sdk'] / best['off']:.3f}x"
    )


async def main() -> None:
    logger.remove()  # per-connection log lines would be most of the output
    sdk = Sdk()
    print(f"The hooks alone (best of {RUNS} interleaved runs; median in brackets)")
    hooks: dict[str, list[float]] = {"no-op": [], "sdk": []}
    lookups: dict[str, list[float]] = {name: [] for name in modes(sdk)}
    for _ in range(RUNS):
        for name, telemetry in modes(sdk).items():
            if isinstance(telemetry, Telemetry):
                hooks[name].append(await hooks_per_move(telemetry))
            lookups[name].append(lookup_per_callback(telemetry))
        sdk.exporter.clear()
    print(
        "  telemetry CPU per move, us: "
        + "  ".join(
            f"{name} {min(v):.1f} (median {statistics.median(v):.1f})" for name, v in hooks.items()
        )
    )
    print(
        "  reading a callback (every audio chunk), ns: "
        + "  ".join(
            f"{name} {min(v):.0f} (median {statistics.median(v):.0f})"
            for name, v in lookups.items()
        )
    )
    print(f"Client CPU microseconds (best of {RUNS} interleaved runs; median in brackets)")
    with EmulatorThread(EmulatorConfig.kind(update_after_setup=True, time_scale=0.1)) as server:
        moves = await interleaved(server, per_move, sdk)
    with EmulatorThread(EmulatorConfig(vad_silence=3600.0)) as server:
        sent = await interleaved(server, per_chunk_sent, sdk)
    with EmulatorThread(EmulatorConfig(answer_chunks=RECEIVE_CHUNKS, chunk_interval=0.0)) as server:
        received = await interleaved(server, per_chunk_received, sdk)
    print(f"per move ({MOVES} planned moves a run, goAway to on_move and the next handle)")
    _line("move", moves)
    print("per audio chunk")
    _line("sent (20 ms)", sent)
    _line("received (40 ms)", received)

    def session_second(name: str) -> float:
        per_chunk = min(sent[name]) + min(received[name])
        return CHUNKS_PER_SECOND * per_chunk + min(moves[name]) / MOVE_EVERY

    print(
        f"per session-second (50 chunks each way, a move every {MOVE_EVERY:.0f} s): "
        + "  ".join(f"{name} {session_second(name):.0f}" for name in moves)
    )
    print(
        f"  sdk/off {session_second('sdk') / session_second('off'):.3f}x   "
        f"no-op/off {session_second('no-op') / session_second('off'):.3f}x (goal <= 1.05x)"
    )


if __name__ == "__main__":
    asyncio.run(main())
