"""The trace of one call with two moves, printed as a tree.

It starts the bundled emulator (the service as measured: it refuses a resume while the old
connection is open), runs a call under an app span (``call``) with the OpenTelemetry SDK
exporting to memory, and prints every span the transport made: a planned move at a goAway,
then a move after the connection drops, each answer, each connection.

    python -m examples.telemetry_trace

An app sends the same spans to any OTLP collector by giving the SDK an OTLP exporter instead
(see the README, Telemetry).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.telemetry import Telemetry
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig
from realtime_resumption.transport import ContentTurn

_SHORT = ("realtime.move.", "realtime.connection.", "realtime.generation.", "realtime.", "gen_ai.")
_HIDDEN = {"gen_ai.provider.name", "gen_ai.request.model"}
"""On every span of the session: shown once, on the first line."""


def tree(spans: Sequence[ReadableSpan]) -> list[str]:
    """``spans`` as an indented tree, children in the order they started: name, duration,
    attributes (prefixes shortened) and events."""
    by_parent: dict[int | None, list[ReadableSpan]] = {}
    ids = {span.context.span_id for span in spans}
    for span in spans:
        parent = span.parent.span_id if span.parent and span.parent.span_id in ids else None
        by_parent.setdefault(parent, []).append(span)
    lines: list[str] = []

    def walk(parent: int | None, depth: int) -> None:
        for span in sorted(by_parent.get(parent, ()), key=lambda s: s.start_time or 0):
            duration = ((span.end_time or 0) - (span.start_time or 0)) / 1e6
            shown = {k: v for k, v in (span.attributes or {}).items() if k not in _HIDDEN}
            status = " ERROR" if span.status.status_code.name == "ERROR" else ""
            lines.append(
                f"{'  ' * depth}{span.name} {duration:.0f} ms{status}  {_pairs(shown)}".rstrip()
            )
            for event in span.events:
                offset = (event.timestamp - (span.start_time or 0)) / 1e6
                lines.append(
                    f"{'  ' * depth}  · +{offset:.0f} ms {event.name}  "
                    f"{_pairs(dict(event.attributes or {}))}".rstrip()
                )
            walk(span.context.span_id, depth + 1)

    walk(None, 0)
    return lines


def _pairs(attributes: dict[str, object]) -> str:
    def short(key: str) -> str:
        return next((key[len(p) :] for p in _SHORT if key.startswith(p)), key)

    def value(v: object) -> str:
        if isinstance(v, float):
            return f"{v:.0f}"
        if isinstance(v, tuple):
            return ",".join(map(str, v))
        return str(v)

    return " ".join(f"{short(k)}={value(v)}" for k, v in attributes.items())


async def main() -> list[str]:
    """Runs the call; returns the lines it printed."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry = Telemetry(tracer_provider=provider)
    app = provider.get_tracer("example")

    async with Emulator(EmulatorConfig(answer_chunks=5, chunk_interval=0.02)) as emulator:
        client = emulator.client()  # yours to close: the transport closes only its own
        transport = GeminiLiveTransport(client=client, telemetry=telemetry)
        answered = asyncio.Event()
        moved = asyncio.Event()
        handles = asyncio.Event()
        transport.on_generation_end = lambda _id, _reason: answered.set()
        transport.on_move = lambda _report: moved.set()
        transport.on_resumption_update = lambda _h, resumable, _i: resumable and handles.set()

        async def ask(question: str) -> None:
            answered.clear()
            handles.clear()
            transport.send_live_text([ContentTurn("user", question)])
            async with asyncio.timeout(10):
                await answered.wait()
                await handles.wait()  # the place to move from, after the answer

        async def wait_moved() -> None:
            async with asyncio.timeout(10):
                await moved.wait()
            moved.clear()

        with app.start_as_current_span("call"):
            await transport.connect()
            await ask("hello")
            await emulator.faults.go_away(time_left=5.0)  # the service's ten-minute notice
            await wait_moved()
            await ask("are you still there")
            emulator.faults.drop()  # the network drops the connection
            await wait_moved()
            await ask("and now")
            await transport.disconnect()
        await client.aio.aclose()
    provider.shutdown()

    spans = exporter.get_finished_spans()
    first = next(s for s in spans if s.name == "realtime.connection").attributes or {}
    lines = [
        f"(every session span: gen_ai.provider.name={first.get('gen_ai.provider.name')} "
        f"gen_ai.request.model={first.get('gen_ai.request.model')})",
        *tree(spans),
    ]
    for line in lines:
        print(line)
    return lines


if __name__ == "__main__":
    asyncio.run(main())
