"""``RealtimeModelMetrics`` for an answer, from the transport's normalised usage, and for a
move between connections."""

from __future__ import annotations

import time

from livekit.agents.metrics import RealtimeModelMetrics
from livekit.agents.metrics.base import Metadata

from realtime_resumption.move_reports import MoveFigures, MoveReport
from realtime_resumption.transport import RealtimeLLMUsage

from .generations import Generation


def answer_metrics(
    usage: RealtimeLLMUsage,
    generation: Generation,
    *,
    label: str,
    model: str,
    provider: str,
) -> RealtimeModelMetrics:
    """Metrics of ``generation``: its tokens, duration, and time to first audio (text with
    the text modality) from when the user's turn ended or the reply was asked for, or from
    the generation's creation when that is unknown; -1 without output."""
    start = generation.requested_at or generation.created_at
    first = generation.first_audio_at
    ttft = max(0.0, first - start) if first is not None else -1.0
    duration = (generation.completed_at or time.time()) - generation.created_at
    output = usage.output_tokens or 0
    breakdown = usage.modality_breakdown
    return RealtimeModelMetrics(
        label=label,
        request_id=generation.response_id,
        timestamp=generation.created_at,
        duration=duration,
        ttft=ttft,
        cancelled=False,
        input_tokens=usage.input_tokens or 0,
        output_tokens=output,
        total_tokens=usage.total_tokens or 0,
        tokens_per_second=output / duration if duration > 0 else 0.0,
        input_token_details=RealtimeModelMetrics.InputTokenDetails(
            audio_tokens=(breakdown.input_audio_tokens or 0) if breakdown else 0,
            text_tokens=(breakdown.input_text_tokens or 0) if breakdown else 0,
            image_tokens=(breakdown.input_image_tokens or 0) if breakdown else 0,
            cached_tokens=(breakdown.cached_tokens or 0) if breakdown else 0,
        ),
        output_token_details=RealtimeModelMetrics.OutputTokenDetails(
            audio_tokens=(breakdown.output_audio_tokens or 0) if breakdown else 0,
            text_tokens=(breakdown.output_text_tokens or 0) if breakdown else 0,
        ),
        metadata=Metadata(model_name=model, model_provider=provider),
    )


class SessionMoveMetrics(RealtimeModelMetrics, MoveFigures):
    """One move of the session between connections, through ``metrics_collected`` as the
    realtime model's own metrics go (``request_id`` is ``move-<number>``). It is a
    ``RealtimeModelMetrics`` with no tokens and no duration, so LiveKit's usage and latency
    figures do not count it; the move's figures are its own fields (``MoveFigures``, ms as
    ``MoveReport``)."""

    move_number: int
    move_duration_ms: float


def move_metrics(
    report: MoveReport, *, label: str, model: str, provider: str
) -> SessionMoveMetrics:
    """The metrics of the move ``report`` describes (never its handle)."""
    return SessionMoveMetrics(
        label=label,
        request_id=f"move-{report.number}",
        timestamp=time.time(),
        input_token_details=RealtimeModelMetrics.InputTokenDetails(),
        output_token_details=RealtimeModelMetrics.OutputTokenDetails(),
        metadata=Metadata(model_name=model, model_provider=provider),
        move_number=report.number,
        move_duration_ms=report.duration_ms,
        **report.figures().model_dump(),
    )
