"""The rotation tests' arena: emulators and rigs made for a test and torn down after it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from .arena import Arena


@pytest.fixture
async def arena() -> AsyncIterator[Arena]:
    stage = Arena()
    try:
        yield stage
    finally:
        await stage.teardown()
