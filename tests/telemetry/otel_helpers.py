"""The real OpenTelemetry SDK, in memory: a tracer and a meter provider for one test (never
the process's global providers, which can be set only once), and readers of what they got."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    HistogramDataPoint,
    InMemoryMetricReader,
    NumberDataPoint,
)
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from realtime_resumption.redaction import redact
from realtime_resumption.telemetry import Telemetry


@dataclass
class Otel:
    """An SDK tracer provider exporting to memory and a meter provider read in memory."""

    exporter: InMemorySpanExporter = field(default_factory=InMemorySpanExporter)
    reader: InMemoryMetricReader = field(default_factory=InMemoryMetricReader)

    def __post_init__(self) -> None:
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.telemetry = Telemetry(
            tracer_provider=self.tracer_provider, meter_provider=self.meter_provider
        )

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()

    @property
    def spans(self) -> tuple[ReadableSpan, ...]:
        """The finished spans, in the order they ended."""
        return tuple(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        """The finished spans called ``name``, in the order they started."""
        return sorted((s for s in self.spans if s.name == name), key=lambda s: s.start_time or 0)

    def points(self, name: str) -> list[Any]:
        """The data points of metric ``name`` (none when it was never recorded)."""
        data = self.reader.get_metrics_data()
        found: list[Any] = []
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        found.extend(metric.data.data_points)
        return found

    def counted(self, name: str) -> dict[tuple[tuple[str, Any], ...], int | float]:
        """A counter's values by their attributes (sorted pairs)."""
        points = self.points(name)
        assert all(isinstance(p, NumberDataPoint) for p in points)
        return {tuple(sorted(dict(p.attributes).items())): p.value for p in points}

    def histogram(self, name: str) -> list[HistogramDataPoint]:
        points = self.points(name)
        assert all(isinstance(p, HistogramDataPoint) for p in points)
        return points


class Armed(SpanProcessor):
    """Exports finished spans to memory only while armed: the process's global tracer
    provider can be set once, and other tests must not fill this one's memory."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.armed = False

    def on_end(self, span: ReadableSpan) -> None:
        if self.armed:
            self.exporter.export((span,))


@functools.cache
def global_sdk() -> Armed:
    """An SDK tracer provider installed as the process's global one (Pipecat's tracing uses
    only the global provider), with an :class:`Armed` processor on it."""
    armed = Armed()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    assert isinstance(trace.get_tracer_provider(), TracerProvider)
    provider.add_span_processor(armed)
    return armed


def parent_of(span: ReadableSpan, spans: Iterable[ReadableSpan]) -> ReadableSpan | None:
    """The span among ``spans`` that is ``span``'s parent."""
    if span.parent is None:
        return None
    return next((s for s in spans if s.context.span_id == span.parent.span_id), None)


def ancestors(span: ReadableSpan, spans: Iterable[ReadableSpan]) -> list[str]:
    """The names of ``span``'s ancestors among ``spans``, nearest first."""
    every = list(spans)
    names: list[str] = []
    current = parent_of(span, every)
    while current is not None:
        names.append(current.name)
        current = parent_of(current, every)
    return names


def texts(spans: Iterable[ReadableSpan]) -> Iterator[str]:
    """Every string the spans carry: attribute values, event attributes, status
    descriptions, names."""
    for span in spans:
        yield span.name
        if span.status.description:
            yield span.status.description
        values: list[Any] = list((span.attributes or {}).values())
        for event in span.events:
            yield event.name
            values.extend((event.attributes or {}).values())
        for value in values:
            if isinstance(value, (tuple, list)):
                yield from (str(v) for v in value)
            else:
                yield str(value)


def assert_no_secret(spans: Iterable[ReadableSpan], secrets: Iterable[str]) -> None:
    """No span carries any of ``secrets``: neither whole nor in its redacted form (which
    shows its first characters), nor its second half."""
    carried = list(texts(spans))
    checked = 0
    for secret in secrets:
        assert len(secret) > 8
        checked += 1
        for text in carried:
            assert secret not in text, "a span carries a handle"
            assert redact(secret) not in text, "a span carries a redacted handle"
            assert secret[len(secret) // 2 :] not in text, "a span carries part of a handle"
    assert checked, "no secret to look for"
