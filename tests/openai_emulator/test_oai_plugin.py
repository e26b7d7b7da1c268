"""The pytest plugin's OpenAI Realtime fixtures: configured by marker or indirect parameter."""

from __future__ import annotations

import os

import pytest

from realtime_resumption.testing.openai_emulator import OpenAIEmulator, OpenAIEmulatorConfig
from realtime_resumption.testing.pytest_plugin import openai_emulator_config

from .oai_helpers import MODEL, until


@pytest.mark.openai_emulator(profile="azure", time_scale=0.01, answer_chunks=2)
async def test_the_marker_configures_the_emulator_and_the_client_reaches_it(
    openai_emulator: OpenAIEmulator, openai_client: object
) -> None:
    assert openai_emulator.config.profile == "azure"
    assert openai_emulator.config.cap_seconds == 1800
    async with openai_client.realtime.connect(  # type: ignore[attr-defined]
        model=MODEL, websocket_connection_options=openai_emulator.websocket_options()
    ) as conn:
        assert (await until(conn, "session.created"))[-1].session.model == MODEL
    assert len(openai_emulator.ledger.sessions) == 1


@pytest.mark.parametrize(
    ("openai_emulator", "expected"),
    [
        ("azure", ("azure", 1.0, 10)),
        ({"time_scale": 0.5}, ("openai", 0.5, 10)),
        (OpenAIEmulatorConfig(answer_chunks=3), ("openai", 1.0, 3)),
    ],
    indirect=["openai_emulator"],
)
async def test_an_indirect_parameter_configures_it(
    openai_emulator: OpenAIEmulator, expected: tuple[str, float, int]
) -> None:
    config = openai_emulator.config
    assert (config.profile, config.time_scale, config.answer_chunks) == expected


async def test_the_trusted_fixture_sets_the_ca_for_the_test(
    openai_emulator_trusted: OpenAIEmulator,
) -> None:
    assert os.environ["SSL_CERT_FILE"] == openai_emulator_trusted.ca_file


@pytest.mark.openai_emulator(time_scale=0)
def test_a_bad_setting_is_a_usage_error(request: pytest.FixtureRequest) -> None:
    with pytest.raises(pytest.UsageError, match="time_scale"):
        openai_emulator_config(request)
