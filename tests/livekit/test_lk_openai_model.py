"""A real LiveKit ``AgentSession`` on the plugin's OpenAI ``RealtimeModel`` against the OpenAI
Realtime emulator (the ``openai`` SDK over real TLS WebSockets): a spoken call as stock holds
it, a dropped session carried on by a new one (``session_moved`` with what the move cost,
``session_reconnected``, no recoverable error), and a ``generate_reply`` asked for during the
move answered by the new session."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
from livekit.agents import Agent, APIConnectOptions, llm
from livekit.plugins import openai as lk_openai
from livekit.plugins import realtime_resumption as rr

from realtime_resumption.move_reports import MoveOutcome, MoveReason
from realtime_resumption.openai import AZURE_CAP, OpenAIRealtimeOptions
from realtime_resumption.testing.openai_emulator import OpenAIEmulator

from ..openai_emulator.oai_helpers import RATE, config
from .lk_helpers import CallParts, hold_a_spoken_turn, said, started_voice_call, until

PACE = 0.05


@contextlib.asynccontextmanager
async def livekit_call(
    emu: OpenAIEmulator,
    *,
    move_margin: float = 120.0,
    forced_margin: float = 15.0,
    azure: bool = False,
    agent: Agent | None = None,
    **model: Any,
) -> AsyncIterator[CallParts]:
    """A started AgentSession on our model pointed at ``emu`` (trusting its CA), with a
    24 kHz paced microphone and a real-time speaker; ``agent`` by default a brief one."""
    options = OpenAIRealtimeOptions(
        websocket_options=emu.websocket_options(),
        move_margin=move_margin,
        forced_margin=forced_margin,
    )
    if azure:
        realtime = rr.openai.RealtimeModel.with_azure(
            azure_deployment="gpt-realtime",
            azure_endpoint=f"https://{emu.config.host}:{emu.port}",
            api_key="azure-key",
            realtime_options=options,
            **model,
        )
    else:
        realtime = rr.openai.RealtimeModel(
            api_key="sk-test", base_url=emu.base_url, realtime_options=options, **model
        )
    async with started_voice_call(
        realtime, agent or Agent(instructions="Be brief."), pace=PACE, rate=RATE
    ) as call:
        yield call.parts


def test_the_constructors_take_every_keyword_of_stock() -> None:
    """One import changed, nothing else: every keyword of stock's ``RealtimeModel`` and
    ``with_azure`` is one of ours."""
    for ours, stock in (
        (rr.openai.RealtimeModel.__init__, lk_openai.realtime.RealtimeModel.__init__),
        (rr.openai.RealtimeModel.with_azure, lk_openai.realtime.RealtimeModel.with_azure),
    ):
        mine = set(inspect.signature(ours).parameters)
        theirs = set(inspect.signature(stock).parameters)
        assert theirs <= mine, theirs - mine


def test_missing_credentials_are_the_stock_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("AZURE_OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("AZURE_OPENAI_ENDPOINT", raising=False)
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        rr.openai.RealtimeModel()
    with pytest.raises(ValueError, match="Missing credentials"):
        rr.openai.RealtimeModel.with_azure(azure_deployment="d")
    with pytest.raises(ValueError, match="Missing Azure endpoint"):
        rr.openai.RealtimeModel.with_azure(azure_deployment="d", api_key="k")


def test_with_azure_dials_azure_openai_with_its_deployment() -> None:
    """``with_azure`` dials the endpoint's ``/openai``: its GA surface (``/openai/v1``, the
    key in an ``api-key`` header) without an ``api_version``, the legacy one (an
    ``AsyncAzureOpenAI`` client) with one; the deployment is the model, and the Azure
    defaults (whisper-1 transcription, Azure's 30-minute cap) apply, as with stock."""
    model = rr.openai.RealtimeModel.with_azure(
        azure_deployment="my-deployment",
        azure_endpoint="https://example.openai.azure.com/",
        api_key="azure-key",
    )
    client = model.client()
    assert not isinstance(client, openai.AsyncAzureOpenAI)
    assert str(client.base_url).startswith("https://example.openai.azure.com/openai/v1")
    assert client.default_headers["api-key"] == "azure-key"
    assert model.model == "my-deployment"
    assert model.realtime_options.model == "my-deployment"
    assert model.realtime_options.session_cap == AZURE_CAP
    assert model.provider == "example.openai.azure.com"
    assert model.config.transcription is not None
    assert model.config.transcription.model == "whisper-1"
    legacy = rr.openai.RealtimeModel.with_azure(
        azure_deployment="my-deployment",
        azure_endpoint="https://example.openai.azure.com/",
        api_key="azure-key",
        api_version="2024-10-01-preview",
    )
    assert isinstance(legacy.client(), openai.AsyncAzureOpenAI)


@pytest.mark.parametrize("azure", [False, True])
async def test_ours_holds_a_spoken_call_as_stock(azure: bool) -> None:
    """The stock test's call on ours: the speech heard once, its transcript, the spoken
    answer played out, no error (on OpenAI, and on Azure's GA surface)."""
    async with OpenAIEmulator(config(time_scale=PACE, answer_chunks=4)) as emu:
        async with livekit_call(emu, azure=azure) as (session, mic, speaker, recorder):
            spoken = await hold_a_spoken_turn(session, mic, speaker, recorder)
        await emu.wait_disconnected()
    record = emu.ledger.sessions[0]
    assert record.flavour == "ga"
    assert record.path.startswith("/openai/v1/realtime" if azure else "/v1/realtime")
    assert record.committed_speech == spoken
    assert [a.outcome for a in record.answers] == ["complete"]
    assert record.errors == []


async def test_a_dropped_session_is_carried_on_and_reported() -> None:
    """Stock reports a drop as an error and replays its mirror; ours moves: one
    ``session_moved`` (rebuilt, with its figures) then ``session_reconnected``, no error, and
    a word said before the drop is recalled after it."""
    async with OpenAIEmulator(config(time_scale=PACE, answer_chunks=3)) as emu:
        async with livekit_call(emu) as (session, mic, _, recorder):
            mic.say(["pineapple"])
            await until(lambda: len(said(session, "assistant")) >= 1)
            assert emu.faults.drop() == 1
            await until(lambda: recorder.reconnected == 1, timeout=10)
            mic.say(["recall"])
            await until(lambda: len(said(session, "assistant")) >= 2, timeout=15)
            assert "recall pineapple" in said(session, "assistant")[-1]
            assert not recorder.errors
            (moved,) = recorder.moves
            assert moved.report.outcome is MoveOutcome.REBUILT
            assert any(isinstance(m, rr.SessionMoveMetrics) for m in recorder.metrics)
    assert len(emu.ledger.sessions) == 2


async def test_an_answer_cut_by_a_drop_is_given_again_by_the_new_session() -> None:
    """The session drops while the service still generates an answer: the new session is
    given the question and answers it, whole; the move says it cut a turn, and LiveKit
    sees no error. (400 chunks at this pace: 2 s of generating on the emulator.)"""
    async with OpenAIEmulator(config(time_scale=PACE, answer_chunks=400)) as emu:
        async with livekit_call(emu) as (_, mic, speaker, recorder):
            mic.say(["long", "story"])
            await until(lambda: len(speaker.heard) >= 2, timeout=10)
            assert emu.faults.drop() == 1
            await until(lambda: recorder.reconnected == 1, timeout=10)
            await until(lambda: bool(emu.ledger.sessions[1].answers), timeout=10)
            answer = emu.ledger.sessions[1].answers[0]
            await until(lambda: answer.outcome == "complete", timeout=15)
            assert not recorder.errors
            (moved,) = recorder.moves
            assert moved.report.turn_cut
    first, second = emu.ledger.sessions
    assert first.answers[0].outcome != "complete"
    assert second.answers[0].delivered == 400


async def test_at_the_service_cap_the_call_goes_on_without_an_error() -> None:
    """The stock test's cap (its own restart off there): stock reports a recoverable error
    and replays its mirror; ours carries the call to a new session with no error, and a word
    said before the cap is recalled after it."""
    cfg = config(time_scale=PACE, answer_chunks=3, session_cap=40.0)
    async with OpenAIEmulator(cfg) as emu:
        async with livekit_call(emu) as (session, mic, _, recorder):
            mic.say(["pineapple"])
            await until(lambda: len(said(session, "assistant")) >= 1)
            await until(lambda: recorder.reconnected == 1, timeout=15)
            mic.say(["recall"])
            await until(lambda: len(said(session, "assistant")) >= 2, timeout=15)
            assert "recall pineapple" in said(session, "assistant")[-1]
            assert not recorder.errors
    first = emu.ledger.sessions[0]
    assert first.close_code == 1001 and first.closed_by == "cap"


async def test_max_session_duration_moves_the_call_before_it_at_a_turn_boundary() -> None:
    """``max_session_duration`` (stock: the connection is restarted then) is the cap the move
    comes before: a planned move between turns, reported, with no error; the service never
    closes a session for its cap."""
    cfg = config(time_scale=PACE, answer_chunks=3, session_cap=200.0)
    options = {"move_margin": 2.0, "forced_margin": 1.0}
    async with OpenAIEmulator(cfg) as emu:
        async with livekit_call(emu, max_session_duration=4.0, **options) as (
            session,
            mic,
            _,
            recorder,
        ):
            mic.say(["pineapple"])
            await until(lambda: len(said(session, "assistant")) >= 1)
            await until(lambda: recorder.reconnected == 1, timeout=10)
            (moved,) = recorder.moves
            assert moved.report.reason is MoveReason.PLANNED
            mic.say(["recall"])
            await until(lambda: len(said(session, "assistant")) >= 2, timeout=15)
            assert "recall pineapple" in said(session, "assistant")[-1]
            assert not recorder.errors
    assert emu.ledger.sessions[0].closed_by != "cap"


async def test_a_reply_asked_for_during_a_move_is_given_by_the_new_session() -> None:
    """``generate_reply`` while the session moves (its first redial refused, so the move is
    under way when the reply is asked for): the request waits for the new session, which
    answers it; the handle resolves."""
    async with OpenAIEmulator(config(time_scale=PACE, answer_chunks=2)) as emu:
        async with livekit_call(emu) as (session, _, _, recorder):
            async with asyncio.timeout(10):
                await session.generate_reply(user_input="first")  # the session is up
            emu.faults.refuse_dials(503, count=1)
            assert emu.faults.drop() == 1
            await until(lambda: bool(recorder.errors))
            assert not recorder.moves
            handle = session.generate_reply(instructions="say hi")
            async with asyncio.timeout(10):
                await handle
            assert recorder.reconnected == 1
            assert all(e.recoverable for e in recorder.errors)
    assert len(emu.ledger.sessions) == 2
    assert len(emu.ledger.sessions[0].answers) == 1
    assert len(emu.ledger.sessions[1].answers) == 1


async def test_a_session_that_cannot_connect_fails_its_reply_and_says_why() -> None:
    """Every dial refused (``conn_options``: one retry): each failed attempt is an ``error``,
    the last one not recoverable; a ``generate_reply`` waiting for the connection fails with
    a ``RealtimeError`` naming the refusal, with no key in it."""
    async with OpenAIEmulator(config(time_scale=PACE)) as emu:
        emu.faults.refuse_dials(503, count=5)
        model = rr.openai.RealtimeModel(
            api_key="sk-secret-key",
            base_url=emu.base_url,
            conn_options=APIConnectOptions(max_retry=1, retry_interval=0.05, timeout=5.0),
            realtime_options=OpenAIRealtimeOptions(websocket_options=emu.websocket_options()),
        )
        rt = model.session()
        errors: list[llm.RealtimeModelError] = []
        rt.on("error", errors.append)
        try:
            reply = rt.generate_reply()
            with pytest.raises(llm.RealtimeError, match="could not connect") as raised:
                async with asyncio.timeout(10):
                    await reply
            assert "sk-secret-key" not in str(raised.value)
            assert [e.recoverable for e in errors] == [True, False]
            failed = rt.generate_reply()
            with pytest.raises(llm.RealtimeError, match="lost"):
                await failed
        finally:
            await rt.aclose()
    assert emu.ledger.sessions == []


async def test_a_new_voice_reaches_the_live_session_and_new_ones() -> None:
    """``RealtimeModel.update_options(voice=...)`` as with stock: the live session gets a
    ``session.update`` (no move), and the model's configuration for new sessions has it."""
    async with OpenAIEmulator(config(time_scale=PACE, answer_chunks=2)) as emu:
        async with livekit_call(emu) as (session, mic, _, recorder):
            model = session.llm
            assert isinstance(model, rr.openai.RealtimeModel)
            await until(lambda: bool(emu.ledger.sessions))
            await until(lambda: emu.ledger.sessions[0].client_events["session.update"] >= 1)
            before = emu.ledger.sessions[0].client_events["session.update"]
            model.update_options(voice="cedar")
            await until(lambda: emu.ledger.sessions[0].client_events["session.update"] > before)
            assert model.config.voice == "cedar"
            mic.say(["hello"])
            await until(lambda: len(said(session, "assistant")) >= 1)
            assert not recorder.errors and not recorder.moves
    assert len(emu.ledger.sessions) == 1


def test_the_session_cap_is_max_session_duration_or_the_options_own() -> None:
    options = OpenAIRealtimeOptions(session_cap=None)
    assert rr.openai.RealtimeModel(api_key="k").realtime_options.session_cap == "service"
    kept = rr.openai.RealtimeModel(api_key="k", realtime_options=options)
    assert kept.realtime_options.session_cap is None
    given = rr.openai.RealtimeModel(api_key="k", max_session_duration=900.0)
    assert given.realtime_options.session_cap == 900.0
    unset = rr.openai.RealtimeModel(api_key="k", max_session_duration=None)
    assert unset.realtime_options.session_cap == "service"


def test_a_max_session_duration_within_the_move_margin_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"max_session_duration \(60\.0 s\) must exceed"):
        rr.openai.RealtimeModel(api_key="k", max_session_duration=60.0)


async def test_an_update_made_while_the_first_session_is_dialled_reaches_it() -> None:
    """A new voice while the dial is in flight (its ``session.created`` slow): the session
    the dial sets up is sent the update once it is up, not configured without it."""
    async with OpenAIEmulator(config(time_scale=PACE)) as emu:
        emu.faults.slow_session_created(2.0)
        model = rr.openai.RealtimeModel(
            api_key="sk-test",
            base_url=emu.base_url,
            realtime_options=OpenAIRealtimeOptions(websocket_options=emu.websocket_options()),
        )
        rt = model.session()
        try:
            await until(lambda: bool(emu.ledger.sessions))
            rt.update_options(voice="cedar")
            await until(lambda: emu.ledger.sessions[0].client_events["session.update"] >= 2)
        finally:
            await rt.aclose()
    assert len(emu.ledger.sessions) == 1


async def test_ours_holds_a_spoken_call_on_azures_legacy_surface() -> None:
    """``with_azure(api_version=...)``: Azure's legacy endpoint and the beta event names."""
    async with OpenAIEmulator(config(time_scale=PACE, answer_chunks=4)) as emu:
        async with livekit_call(emu, azure=True, api_version="2024-10-01-preview") as (
            session,
            mic,
            speaker,
            recorder,
        ):
            mic.say(["hello", "livekit"])
            await until(lambda: len(speaker.heard) >= 4 and not speaker.playing)
            await until(lambda: len(said(session, "assistant")) >= 1)
            assert "heard hello livekit" in said(session, "assistant")[0]
            assert not recorder.errors
            spoken = list(mic.spoken)
        await emu.wait_disconnected()
    record = emu.ledger.sessions[0]
    assert record.flavour == "beta"
    assert record.path.startswith("/openai/realtime")
    assert record.committed_speech == spoken
    assert [a.outcome for a in record.answers] == ["complete"]
