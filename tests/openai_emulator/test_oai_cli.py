"""The command line: documents its faults, prints where to connect, serves until Ctrl-C."""

from __future__ import annotations

import asyncio
import ssl

import openai
import pytest

from realtime_resumption.testing.openai_emulator.__main__ import _config, _parser, main

from ..emulator.emu_helpers import command_line, exists, interrupt
from .oai_helpers import MODEL


def test_help_documents_every_fault_and_the_cap(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["--help"])
    assert caught.value.code == 0
    text = capsys.readouterr().out
    for flag in (
        "--session-cap",
        "--cap-error-event",
        "--refuse-next",
        "--slow-sessions",
        "--drop-every",
        "--api-key",
        "--profile",
    ):
        assert flag in text
    assert "1001" in text and "3600" in text and "1800" in text


def test_flags_reach_the_configuration() -> None:
    args = _parser().parse_args(["--profile", "azure", "--no-session-cap", "--time-scale", "0.5"])
    config = _config(args)
    assert config.profile == "azure" and config.cap_seconds is None and config.time_scale == 0.5
    assert _config(_parser().parse_args(["--profile", "azure"])).cap_seconds == 1800


def test_bad_values_exit_with_a_message() -> None:
    with pytest.raises(SystemExit, match="time_scale"):
        main(["--time-scale", "0"])
    with pytest.raises(SystemExit, match="--drop-every"):
        main(["--drop-every", "-1"])


async def test_serves_until_interrupted() -> None:
    async with command_line(
        "realtime_resumption.testing.openai_emulator", "--time-scale", "0.01", "--refuse-next", "1"
    ) as process:
        assert process.stdout is not None
        async with asyncio.timeout(20):
            base_url = (await process.stdout.readline()).decode().split()[-1]
            await process.stdout.readline()
            ca_file = (await process.stdout.readline()).decode().split()[-1]
        assert base_url.startswith("https://127.0.0.1:") and exists(ca_file)
        client = openai.AsyncOpenAI(
            api_key="sk-any", base_url=base_url, websocket_base_url=base_url.replace("https", "wss")
        )
        options = {"ssl": ssl.create_default_context(cafile=ca_file)}
        with pytest.raises(Exception, match="429"):
            async with client.realtime.connect(model=MODEL, websocket_connection_options=options):
                pass
        async with client.realtime.connect(
            model=MODEL, websocket_connection_options=options
        ) as conn:
            assert (await asyncio.wait_for(conn.recv(), 5)).type == "session.created"
        assert "1 session(s)" in await interrupt(process)
        assert not exists(ca_file)
