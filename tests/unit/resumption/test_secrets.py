"""The helper never logs a resumption handle whole, even when the driver's own errors quote it
(README, Limits: handles never whole in logs): a reconnect that fails with the handle in its
message, and an ``on_reconnect_failed`` that raises with it, are logged with the handle redacted
and their own words kept."""

from __future__ import annotations

import asyncio

import pytest
from loguru import logger

from realtime_resumption.redaction import redact
from realtime_resumption.resumption import ResumptionOptions, SessionResumption

pytestmark = pytest.mark.looptime

HANDLE = "CiQ0ZjVmYjY4My1lNzQ0LTRmYTktOWVkNy1kZTI2Y2U5MjE0ZWUSC2F1ZGlvLWNoYXQ"


async def test_errors_that_quote_the_handle_are_logged_with_it_redacted() -> None:
    lines: list[str] = []
    sink = logger.add(lambda message: lines.append(str(message)), level="DEBUG")
    failures: list[Exception] = []

    async def reconnect(handle: str) -> None:
        raise ConnectionError(f"the server refused handle {handle}")

    def failed(error: Exception) -> None:
        failures.append(error)
        raise RuntimeError(f"cannot restore the session of {HANDLE}")

    helper = SessionResumption(
        reconnect, ResumptionOptions(retry_delays=(0.0, 0.5)), on_reconnect_failed=failed
    )
    try:
        helper.resumption_update(HANDLE, True)
        assert helper.connection_lost()
        async with asyncio.timeout(10):
            while not helper.stopped:  # noqa: ASYNC110
                await asyncio.sleep(0.1)
    finally:
        helper.dispose()
        logger.remove(sink)

    assert len(failures) == 1
    assert not [line for line in lines if HANDLE in line]
    hidden = redact(HANDLE)
    assert any(f"ConnectionError: the server refused handle {hidden}" in line for line in lines)
    assert any(
        f"on_reconnect_failed raised RuntimeError: cannot restore the session of {hidden}" in line
        for line in lines
    )
