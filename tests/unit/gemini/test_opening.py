"""``connect``'s ``retry`` as the pauses before each dial of a session's first connection."""

from __future__ import annotations

import math

import pytest

from realtime_resumption.failures import connect_delays


def test_false_dials_once_and_true_takes_the_sessions_own_delays() -> None:
    assert connect_delays(False) == (0.0,)
    assert connect_delays(True) is None


def test_a_sequence_gives_the_pauses() -> None:
    assert connect_delays([0, 0.5, 2]) == (0, 0.5, 2)


@pytest.mark.parametrize("retry", [(), (-1.0,), (math.inf,), (math.nan,), (True, 1.0), ("1",)])
def test_what_is_no_pauses_is_refused(retry: tuple[object, ...]) -> None:
    with pytest.raises(ValueError, match="retry must be True, False or pauses in seconds"):
        connect_delays(retry)  # type: ignore[arg-type]
