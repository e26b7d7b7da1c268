"""The failure policy's words and its HTTP boundaries: what a ``Ruling`` tells the app and the log.

``tests/rotation/test_move_machine.py`` checks each row's verdict; these check what mutation
testing (``make mutate MODULE=gemini/failures``) found unguarded: the README's promise that an
HTTP 401/403 says to check the key, that every 5xx is retried (only 4xx refuse the request),
and that every ruling explains itself with the code or status and the moment it happened.
"""

from __future__ import annotations

import pytest

from realtime_resumption.gemini.failures import Stage, Verdict, classify
from realtime_resumption.transport import ConnectError, ConnectFailure, SessionLostError


def http(status: int) -> ConnectError:
    return ConnectError(ConnectFailure("refused", f"HTTP {status}", code=status))


def closed(code: int) -> ConnectError:
    return ConnectError(ConnectFailure("closed", f"code {code}", code=code))


@pytest.mark.parametrize("status", [401, 403])
def test_refused_credentials_say_to_check_the_key(status: int) -> None:
    ruling = classify(http(status), Stage.DIAL)
    assert ruling.verdict is Verdict.FATAL
    assert ruling.why == (
        f"the provider refused the credentials (HTTP {status}): check the API key, "
        "its project and its permissions for the Live API"
    )


@pytest.mark.parametrize("status", [500, 501, 502, 503, 504])
def test_every_server_error_is_retried(status: int) -> None:
    ruling = classify(http(status), Stage.DIAL)
    assert ruling == classify(http(status), Stage.DIAL)
    assert ruling.verdict is Verdict.RETRY
    assert ruling.why == f"the provider refused the connection (HTTP {status})"


@pytest.mark.parametrize("status", [400, 404, 499])
def test_a_refused_request_is_fatal_and_says_so(status: int) -> None:
    ruling = classify(http(status), Stage.DIAL)
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
    by_code = classify(None, stage, code=code)
    by_error = classify(closed(code), stage)
    assert (by_code.verdict, by_code.why) == (Verdict.RETRY, expected)
    assert (by_error.verdict, by_error.why) == (Verdict.RETRY, expected)


def test_a_close_without_a_code_is_retried() -> None:
    ruling = classify(None, Stage.SETTLING)
    assert ruling.verdict is Verdict.RETRY
    assert ruling.why.startswith("the connection closed right after its setup")


def test_a_close_while_serving_starts_a_move_and_names_its_code() -> None:
    assert classify(None, Stage.SERVING, code=1001).why == "the connection closed (code 1001)"
    assert classify(closed(1006), Stage.SERVING).verdict is Verdict.MOVE


@pytest.mark.parametrize("code", [1007, 1008])
def test_a_refused_handle_names_its_code(code: int) -> None:
    ruling = classify(None, Stage.SETTLING, code=code)
    assert (ruling.verdict, ruling.why) == (
        Verdict.REFUSED,
        f"the provider refused the handle (code {code})",
    )


def test_other_errors_are_retried_with_their_own_words_or_their_type() -> None:
    assert classify(OSError("network is unreachable"), Stage.DIAL).why == "network is unreachable"
    assert classify(TimeoutError(), Stage.DIAL).why == "TimeoutError"
    assert classify(TimeoutError(), Stage.DIAL).verdict is Verdict.RETRY


def test_a_lost_session_keeps_its_reason_or_says_it_is_over() -> None:
    assert classify(SessionLostError("budget spent"), Stage.SERVING).why == "budget spent"
    ruling = classify(SessionLostError(), Stage.DIAL)
    assert (ruling.verdict, ruling.why) == (Verdict.FATAL, "the session is over")
