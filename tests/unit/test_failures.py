"""The failure policy: the verdict of each row of its table, its words, its HTTP boundaries,
its budget's edges and its jittered delays.

The README's promises among them: an HTTP 401/403 says to check the key, every 5xx is retried
(only 4xx refuse the request), every ruling explains itself with the code or status and the
moment it happened, and the retry budget ends a session after 20 failed attempts or 120 s,
wherever the clock starts.
"""

from __future__ import annotations

import math
import random

import pytest

from realtime_resumption.failures import (
    Budget,
    CloseMeaning,
    RetryPolicy,
    Stage,
    Verdict,
    classify,
    connect_delays,
)
from realtime_resumption.gemini.close_codes import read_close
from realtime_resumption.transport import ConnectError, ConnectFailure, SessionLostError


def http(status: int) -> ConnectError:
    return ConnectError(ConnectFailure("refused", f"HTTP {status}", code=status))


def closed(code: int) -> ConnectError:
    return ConnectError(ConnectFailure("closed", f"code {code}", code=code))


@pytest.mark.parametrize("status", [401, 403])
def test_refused_credentials_say_to_check_the_key(status: int) -> None:
    ruling = classify(http(status), Stage.DIAL, reading=read_close)
    assert ruling.verdict is Verdict.FATAL
    assert ruling.why == (
        f"the provider refused the credentials (HTTP {status}): check the API key, "
        "its project and its permissions"
    )


@pytest.mark.parametrize("status", [500, 501, 502, 503, 504])
def test_every_server_error_is_retried(status: int) -> None:
    ruling = classify(http(status), Stage.DIAL, reading=read_close)
    assert ruling == classify(http(status), Stage.DIAL, reading=read_close)
    assert ruling.verdict is Verdict.RETRY
    assert ruling.why == f"the provider refused the connection (HTTP {status})"


@pytest.mark.parametrize("status", [400, 404, 499])
def test_a_refused_request_is_fatal_and_says_so(status: int) -> None:
    ruling = classify(http(status), Stage.DIAL, reading=read_close)
    assert ruling.verdict is Verdict.FATAL
    assert ruling.why == f"the provider refused the request (HTTP {status}): check the setup"


@pytest.mark.parametrize(
    ("stage", "when"),
    [
        (Stage.DIAL, "during setup"),
        (Stage.SETTLING, "right after its setup"),
        (Stage.PROBATION, "right after the switch"),
    ],
)
@pytest.mark.parametrize("code", [1000, 1006])
def test_a_close_before_serving_is_retried_and_says_when(
    stage: Stage, when: str, code: int
) -> None:
    expected = f"the connection closed {when} (code {code})"
    by_code = classify(None, stage, reading=read_close, code=code)
    by_error = classify(closed(code), stage, reading=read_close)
    assert (by_code.verdict, by_code.why) == (Verdict.RETRY, expected)
    assert (by_error.verdict, by_error.why) == (Verdict.RETRY, expected)


def test_a_close_without_a_code_is_retried_and_says_it_had_none() -> None:
    ruling = classify(None, Stage.SETTLING, reading=read_close)
    assert (ruling.verdict, ruling.why) == (
        Verdict.RETRY,
        "the connection closed right after its setup (no close code)",
    )


def test_any_close_while_serving_starts_a_move_even_without_a_code() -> None:
    ruling = classify(None, Stage.SERVING, reading=read_close)
    assert (ruling.verdict, ruling.why) == (Verdict.MOVE, "the connection closed (no close code)")


@pytest.mark.parametrize("stage", [Stage.DIAL, Stage.SETTLING, Stage.PROBATION])
def test_a_first_1011_is_retried_and_a_second_with_the_same_handle_refuses_it(
    stage: Stage,
) -> None:
    """1011 is a refused resume or a passing failure: no strike counted unless the caller
    says so (the probation's ruling does not), so the first is retried."""
    assert classify(None, stage, reading=read_close, code=1011).verdict is Verdict.RETRY
    refused = classify(None, stage, reading=read_close, code=1011, strikes=1)
    assert (refused.verdict, refused.why) == (
        Verdict.REFUSED,
        "the handle was refused twice (code 1011)",
    )


def test_a_close_while_serving_starts_a_move_and_names_its_code() -> None:
    assert (
        classify(None, Stage.SERVING, reading=read_close, code=1001).why
        == "the connection closed (code 1001)"
    )
    assert classify(closed(1006), Stage.SERVING, reading=read_close).verdict is Verdict.MOVE


@pytest.mark.parametrize("code", [1007, 1008])
def test_a_refused_handle_names_its_code(code: int) -> None:
    ruling = classify(None, Stage.SETTLING, reading=read_close, code=code)
    assert (ruling.verdict, ruling.why) == (
        Verdict.REFUSED,
        f"the provider refused the handle (code {code})",
    )


def test_other_errors_are_retried_with_their_own_words_or_their_type() -> None:
    assert (
        classify(OSError("network is unreachable"), Stage.DIAL, reading=read_close).why
        == "network is unreachable"
    )
    assert classify(TimeoutError(), Stage.DIAL, reading=read_close).why == "TimeoutError"
    assert classify(TimeoutError(), Stage.DIAL, reading=read_close).verdict is Verdict.RETRY


def test_a_lost_session_keeps_its_reason_or_says_it_is_over() -> None:
    assert (
        classify(SessionLostError("budget spent"), Stage.SERVING, reading=read_close).why
        == "budget spent"
    )
    ruling = classify(SessionLostError(), Stage.DIAL, reading=read_close)
    assert (ruling.verdict, ruling.why) == (Verdict.FATAL, "the session is over")


# --- the retry budget's edges (README: "20 failed attempts, 120 s without a lasting connection")


def test_the_budget_in_time_counts_from_the_first_failure_whatever_the_clock_reads() -> None:
    """The event loop's clock starts anywhere: 119 s of failures from t=5000 s is within the
    budget, 121 s is not, and the reason says how long it has been."""
    budget = Budget(RetryPolicy())
    assert budget.charge(5000.0) is None
    assert budget.overdue(5119.0) is None
    assert budget.overdue(5120.0) is None
    why = budget.overdue(5121.0)
    assert why == "no connection has held for 121 s (the retry budget allows 120 s)"
    budget.healthy()
    assert (budget.streak, budget.overdue(9000.0)) == (0, None)


def test_the_budget_in_count_allows_exactly_its_attempts() -> None:
    budget = Budget(RetryPolicy(attempts=2))
    assert budget.charge(0.0) is None
    assert budget.streak == 1
    assert budget.charge(0.0) == "the session's retry budget (2 failed attempts) is spent"


def test_a_budget_of_one_attempt_and_the_jitter_bounds_are_accepted() -> None:
    assert RetryPolicy(attempts=1).attempts == 1
    assert RetryPolicy(jitter=0.0).spread(2.0) == 2.0
    assert RetryPolicy(jitter=1.0, random=lambda: 0.75).spread(2.0) == 3.0
    with pytest.raises(TypeError, match="within must be a number of seconds"):
        RetryPolicy(within="120")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="retry_budget must be an int >= 1"):
        RetryPolicy(attempts=2.5)  # type: ignore[arg-type]


def test_jitter_spreads_delays_and_keeps_zero_at_zero() -> None:
    draws = iter([0.0, 1.0])
    policy = RetryPolicy(jitter=0.5, random=lambda: next(draws))
    assert policy.spread(0.0) == 0.0
    assert policy.spread(2.0) == 1.0
    assert policy.spread(2.0) == 3.0
    rng = random.Random(1)
    spread = {round(RetryPolicy(random=rng.random).spread(1.0), 6) for _ in range(20)}
    assert len(spread) == 20, "a storm of sessions does not redial in lockstep"


# --- the failure policy's table ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "stage", "code", "strikes", "verdict"),
    [
        (http(401), Stage.DIAL, None, 0, Verdict.FATAL),
        (http(403), Stage.DIAL, None, 0, Verdict.FATAL),
        (http(400), Stage.DIAL, None, 0, Verdict.FATAL),
        (http(429), Stage.DIAL, None, 0, Verdict.RETRY),
        (http(503), Stage.DIAL, None, 0, Verdict.RETRY),
        (closed(1007), Stage.DIAL, None, 0, Verdict.REFUSED),
        (None, Stage.SETTLING, 1008, 0, Verdict.REFUSED),
        (None, Stage.PROBATION, 1007, 0, Verdict.REFUSED),
        (None, Stage.SETTLING, 1011, 0, Verdict.RETRY),
        (None, Stage.SETTLING, 1011, 1, Verdict.REFUSED),
        (None, Stage.SETTLING, 1000, 0, Verdict.RETRY),
        (None, Stage.SERVING, 1008, 0, Verdict.MOVE),
        (TimeoutError("slow"), Stage.DIAL, None, 0, Verdict.RETRY),
        (OSError("unreachable"), Stage.DIAL, None, 0, Verdict.RETRY),
        (SessionLostError("over"), Stage.SETTLING, None, 0, Verdict.FATAL),
    ],
)
def test_the_failure_policy_table(
    error: BaseException | None, stage: Stage, code: int | None, strikes: int, verdict: Verdict
) -> None:
    assert classify(error, stage, reading=read_close, code=code, strikes=strikes).verdict is verdict


def test_retry_policy_validates_its_fields() -> None:
    with pytest.raises(ValueError, match="retry_budget"):
        RetryPolicy(attempts=0)
    with pytest.raises(ValueError, match="within"):
        RetryPolicy(within=0)
    with pytest.raises(ValueError, match="jitter"):
        RetryPolicy(jitter=2)


@pytest.mark.parametrize("code", [1007, 1008])
def test_a_close_code_means_only_what_the_providers_reading_says(code: int) -> None:
    """The policy knows no provider's codes: a close Gemini's reading makes a refused handle
    is a plain close, retried, under a reading that gives it no meaning."""
    assert classify(None, Stage.SETTLING, reading=read_close, code=code).verdict is Verdict.REFUSED
    ruling = classify(None, Stage.SETTLING, reading=lambda _: CloseMeaning.CLOSED, code=code)
    assert ruling.verdict is Verdict.RETRY


# --- connect's ``retry``: the pauses before each dial of a session's first connection --------


def test_false_dials_once_and_true_takes_the_sessions_own_delays() -> None:
    assert connect_delays(False) == (0.0,)
    assert connect_delays(True) is None


def test_a_sequence_gives_the_pauses() -> None:
    assert connect_delays([0, 0.5, 2]) == (0, 0.5, 2)


@pytest.mark.parametrize("retry", [(), (-1.0,), (math.inf,), (math.nan,), (True, 1.0), ("1",)])
def test_what_is_no_pauses_is_refused(retry: tuple[object, ...]) -> None:
    with pytest.raises(ValueError, match="retry must be True, False or pauses in seconds"):
        connect_delays(retry)  # type: ignore[arg-type]
