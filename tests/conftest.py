"""Fixtures for the whole suite."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from realtime_resumption.gemini.endpoints import ENDPOINTS


@pytest.fixture(autouse=True)
def _forget_endpoints() -> Iterator[None]:
    """Each test's emulators start unknown: an emulator on a port an earlier test's used
    must not inherit what the process learned about that one."""
    ENDPOINTS.forget()
    yield
    ENDPOINTS.forget()
