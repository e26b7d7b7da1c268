"""A real LiveKit ``AgentSession`` with the stock ``openai.realtime.RealtimeModel``
(livekit-plugins-openai 1.8.9) holding a short call against the emulator: the caller's speech
through server VAD, the input transcript, the spoken answer played out, and what stock does at
the cap (reconnect, replay of its mirror as items, the caller's words reaching the new
session)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from livekit.agents import Agent
from livekit.plugins import openai as lk_openai

from realtime_resumption.testing.openai_emulator import OpenAIEmulator

from ..livekit.lk_helpers import CallParts, hold_a_spoken_turn, said, started_voice_call, until
from .oai_helpers import RATE, config

PACE = 0.05


@contextlib.asynccontextmanager
async def livekit_call(
    emu: OpenAIEmulator, *, azure_api_version: str | None = None, **model: Any
) -> AsyncIterator[CallParts]:
    """A started AgentSession on the stock OpenAI model (its legacy Azure mode with
    ``azure_api_version``), pointed at ``emu`` through an aiohttp session that trusts its CA; a
    24 kHz paced microphone (LiveKit resamples anything else, which would lose the frames'
    numbers) and a real-time speaker."""
    connector = aiohttp.TCPConnector(ssl=emu.client_ssl_context())
    async with aiohttp.ClientSession(connector=connector) as http:
        if azure_api_version is None:
            realtime = lk_openai.realtime.RealtimeModel(
                api_key="sk-test", base_url=emu.base_url, http_session=http, **model
            )
        else:
            realtime = lk_openai.realtime.RealtimeModel.with_azure(
                azure_deployment="gpt-realtime",
                azure_endpoint=f"https://{emu.config.host}:{emu.port}",
                api_key="azure-key",
                api_version=azure_api_version,
                http_session=http,
                **model,
            )
        agent = Agent(instructions="Be brief.")
        async with started_voice_call(realtime, agent, pace=PACE, rate=RATE) as call:
            yield call.parts


@pytest.mark.parametrize("azure_api_version", [None, "2024-10-01-preview"])
async def test_stock_livekit_holds_a_spoken_call(azure_api_version: str | None) -> None:
    """GA, and the legacy Azure surface (beta names, the flat session) LiveKit maps back."""
    async with OpenAIEmulator(config(time_scale=PACE, answer_chunks=4)) as emu:
        async with livekit_call(emu, azure_api_version=azure_api_version) as (
            session,
            mic,
            speaker,
            recorder,
        ):
            spoken = await hold_a_spoken_turn(session, mic, speaker, recorder)
        await emu.wait_disconnected()
    record = emu.ledger.sessions[0]
    assert record.flavour == ("ga" if azure_api_version is None else "beta")
    assert record.committed_speech == spoken
    assert record.client_events["session.update"] >= 1
    assert [a.outcome for a in record.answers] == ["complete"]
    assert record.errors == []


async def test_stock_livekit_at_the_cap_replays_its_mirror_to_a_new_session() -> None:
    """Stock LiveKit, its own restart off: at the 1001 close it reports a recoverable error,
    dials again and gives the new session the conversation it mirrored as items; a word said
    before the cap is recalled after it."""
    cfg = config(time_scale=PACE, answer_chunks=3, session_cap=40.0)
    async with OpenAIEmulator(cfg) as emu:
        async with livekit_call(emu, max_session_duration=None) as (session, mic, _, recorder):
            mic.say(["pineapple"])
            await until(lambda: len(said(session, "assistant")) >= 1)
            await until(lambda: len(emu.ledger.sessions) >= 2, timeout=15)
            await until(lambda: bool(emu.ledger.sessions[1].seeded))
            mic.say(["recall"])
            await until(lambda: len(said(session, "assistant")) >= 2, timeout=15)
            assert "recall pineapple" in said(session, "assistant")[-1]
            assert recorder.errors and all(e.recoverable for e in recorder.errors)
    first, second = emu.ledger.sessions[:2]
    assert first.close_code == 1001 and first.closed_by == "cap"
    assert "pineapple" in " ".join(i.text for i in second.seeded)
    assert not set(first.committed_speech) & set(second.committed_speech)


async def test_stock_livekit_generate_reply_is_matched_by_its_metadata() -> None:
    """``generate_reply`` creates the user's text item, then a response whose
    ``metadata.client_event_id`` the service echoes in ``response.created``: LiveKit waits for
    that echo (10 s) to take the response as its reply."""
    async with OpenAIEmulator(config(time_scale=PACE, answer_chunks=2)) as emu:
        async with livekit_call(emu) as (session, _, _, recorder):
            handle = session.generate_reply(user_input="typed words")
            async with asyncio.timeout(5):
                await handle
            assert "heard typed words" in said(session, "assistant")[-1]
            assert not recorder.errors
    answer = emu.ledger.sessions[0].answers[0]
    assert answer.metadata is not None and "client_event_id" in answer.metadata
    assert emu.ledger.sessions[0].seeded[0].text == "typed words"
