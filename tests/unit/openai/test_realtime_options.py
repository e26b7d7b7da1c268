"""``OpenAIRealtimeOptions``: the cap per service, the spelling per client, checked values."""

from __future__ import annotations

import pytest

from realtime_resumption.openai.realtime_options import AZURE_CAP, OPENAI_CAP, OpenAIRealtimeOptions


def test_the_cap_and_the_spelling_follow_the_service() -> None:
    options = OpenAIRealtimeOptions()
    assert options.cap_for(azure=False) == OPENAI_CAP == 3600
    assert options.cap_for(azure=True) == AZURE_CAP == 1800
    assert options.flavour_for(azure=False) == "ga" and options.flavour_for(azure=True) == "beta"
    chosen = OpenAIRealtimeOptions(session_cap=600, flavour="ga")
    assert chosen.cap_for(azure=True) == 600 and chosen.flavour_for(azure=True) == "ga"
    assert OpenAIRealtimeOptions(session_cap=None).cap_for(azure=False) is None


@pytest.mark.parametrize(
    "changes",
    [
        {"session_cap": 0},
        {"session_cap": float("inf")},
        {"session_cap": 100, "move_margin": 100},
        {"move_margin": 10, "forced_margin": 20},
        {"forced_margin": 0.5},
        {"connect_timeout": 0},
        {"retry_delays": ()},
        {"retry_delays": (-1.0,)},
        {"max_queued_events": 0},
        {"seed_budget_tokens": 0},
        {"flavour": "v2"},
        {"model": ""},
    ],
)
def test_a_bad_value_is_a_value_error(changes: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        OpenAIRealtimeOptions(**changes)  # type: ignore[arg-type]


def test_a_cap_that_is_no_number_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        OpenAIRealtimeOptions(session_cap=True)  # type: ignore[arg-type]
