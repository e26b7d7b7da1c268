"""Server frames the emulator does not send, from a scripted endpoint over real TLS; and a tool
call after turnComplete, from both the scripted endpoint and the emulator."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from google import genai
from google.oauth2.credentials import Credentials

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.testing.emulator import Emulator, answer_chunk_id
from realtime_resumption.transport import ContentTurn, GenerationEndReason, ToolResult

from .transport_helpers import (
    GRACE,
    MODEL,
    Recorder,
    ScriptedServer,
    emulator_config,
    make_transport,
)

AUDIO = {
    "serverContent": {
        "modelTurn": {
            "parts": [
                {
                    "inlineData": {
                        "mimeType": "audio/pcm;rate=24000",
                        "data": base64.b64encode(b"\1\0" * 240).decode(),
                    }
                }
            ]
        }
    }
}
TURN_COMPLETE: dict[str, Any] = {"serverContent": {"turnComplete": True}}
API_KEY = "sekrit-api-key-0123456789"


async def _connect(
    scripted: ScriptedServer, **options: Any
) -> tuple[GeminiLiveTransport, Recorder]:
    options.setdefault("api_key", API_KEY)
    transport = GeminiLiveTransport(
        model=MODEL, http_options=scripted.http_options(), tool_call_grace=GRACE, **options
    )
    rec = Recorder(transport)
    await transport.connect()
    return transport, rec


async def test_a_tool_call_after_turn_complete_continues_the_same_generation(
    scripted: ScriptedServer,
) -> None:
    transport, rec = await _connect(scripted, tools=[{"name": "lookup"}])
    await scripted.send(
        AUDIO,
        TURN_COMPLETE,
        {"toolCall": {"functionCalls": [{"id": "fc-1", "name": "lookup", "args": {"q": 1}}]}},
    )
    await rec.wait_for("on_tool_call")
    # The tool call opened a second server turn, inside the first answer.
    assert transport.get_active_server_turn_id() == 2
    transport.send_tool_result(ToolResult("fc-1", "lookup", {"a": 1}))
    await scripted.send(AUDIO, {"serverContent": {"generationComplete": True}}, TURN_COMPLETE)
    await rec.wait_for("on_generation_end")
    await transport.disconnect()

    assert rec.of("on_generation_start") == [("gen_1",)]
    assert rec.of("on_model_turn_start") == [("gen_1",)]
    assert rec.of("on_generation_end") == [("gen_1", GenerationEndReason.GENERATION_COMPLETE)]
    assert rec.count("on_first_audio_chunk") == 1
    assert [a[0] for a in rec.of("on_turn_complete")] == [1, 2]
    ((calls,),) = rec.of("on_tool_call")
    assert [(c.id, c.name, c.args) for c in calls] == [("fc-1", "lookup", {"q": 1})]
    (response,) = [m for m in scripted.received if "tool_response" in m]
    assert response["tool_response"]["functionResponses"][0]["id"] == "fc-1"


async def test_a_tool_call_after_turn_complete_continues_the_same_generation_on_the_emulator(
    profile: str,
) -> None:
    cfg = emulator_config(profile, answer_chunks=4, tool_call_after_turn_complete=True)
    async with Emulator(cfg) as emu:
        transport = make_transport(emu, tools=[{"name": "lookup"}])
        rec = Recorder(transport)
        await transport.connect()
        transport.send_content([ContentTurn("user", "please lookup the weather")])
        await rec.wait_for("on_tool_call")
        # The answer's first chunk and a turnComplete came first; the call opened a second
        # server turn, inside the same answer.
        assert rec.names("on_audio_output", "on_turn_complete", "on_tool_call") == [
            "on_audio_output",
            "on_turn_complete",
            "on_tool_call",
        ]
        assert transport.get_active_server_turn_id() == 2
        ((calls,),) = rec.of("on_tool_call")
        (call,) = calls
        transport.send_tool_result(ToolResult(call.id, call.name, {"a": 1}))
        await rec.wait_for("on_generation_end")
        await transport.disconnect()
        await emu.wait_disconnected()

    assert rec.of("on_generation_start") == [("gen_1",)]
    assert rec.of("on_model_turn_start") == [("gen_1",)]
    assert rec.of("on_generation_end") == [("gen_1", GenerationEndReason.GENERATION_COMPLETE)]
    assert rec.count("on_first_audio_chunk") == 1
    assert [a[0] for a in rec.of("on_turn_complete")] == [1, 2]
    chunks = [answer_chunk_id(data) for (data,) in rec.of("on_audio_output")]
    assert chunks == [(0, k) for k in range(4)]
    # The ledger: one answer, whole, that the emulator ended twice; the result reached the
    # session that issued the call.
    (session,) = emu.ledger.sessions.values()
    (turn,) = session.turns.values()
    assert (turn.tool_calls, turn.outcome, turn.delivered) == ([call.id], "complete", 4)
    (conn,) = session.connections
    kinds = [m.kind for m in conn.server_messages if m.turn == turn.turn]
    assert kinds.count("turn_complete") == 2
    assert kinds.index("turn_complete") < kinds.index("tool_call")
    (response,) = [m for m in conn.client_messages if m.kind == "tool_response"]
    assert response.tool_response_ids == (call.id,)
    assert session.stranded_tool_responses == session.unawaited_tool_responses == []


async def test_unreadable_frames_are_skipped_and_reported(scripted: ScriptedServer) -> None:
    transport, rec = await _connect(scripted)
    await scripted.send({"error": {"code": 3, "message": "something odd"}})
    await scripted.send_raw("{not json")
    await scripted.send(AUDIO, TURN_COMPLETE)
    await rec.wait_for("on_turn_complete")
    await transport.disconnect()
    errors = [event for (event,) in rec.of("on_error")]
    assert len(errors) == 2
    assert all(e.recoverable for e in errors)
    assert rec.count("on_audio_output") == 1


@pytest.mark.parametrize(
    ("go_away", "expected"),
    [
        ({}, (None, None)),
        ({"timeLeft": "0.500s"}, ("0.500s", 0.5)),
        ({"timeLeft": "50s"}, ("50s", 50.0)),
        ({"timeLeft": "soon"}, ("soon", None)),
    ],
)
async def test_go_away_notices(
    scripted: ScriptedServer, go_away: dict[str, Any], expected: tuple[Any, Any]
) -> None:
    transport, rec = await _connect(scripted)
    await scripted.send({"goAway": go_away})
    await rec.wait_for("on_go_away")
    await transport.disconnect()
    assert rec.of("on_go_away") == [expected]


async def test_resumption_updates_as_the_provider_spells_them(scripted: ScriptedServer) -> None:
    transport, rec = await _connect(scripted)
    await scripted.send(
        {"sessionResumptionUpdate": {"newHandle": "h-1", "resumable": True}},
        {"sessionResumptionUpdate": {"newHandle": "h-2"}},
        {"sessionResumptionUpdate": {"resumable": True}},
        {"sessionResumptionUpdate": {}},
    )
    await rec.wait_for("on_resumption_update", 4)
    await transport.disconnect()
    assert rec.of("on_resumption_update") == [
        ("h-1", True, None),
        ("h-2", False, None),  # proto3 JSON omits false: no "resumable" means False
        (None, True, None),
        (None, False, None),
    ]
    assert transport.resumption_handle == "h-1"


async def test_vertex_tool_calls_without_id_are_answered_without_one(
    scripted: ScriptedServer,
) -> None:
    client = genai.Client(
        vertexai=True,
        project="p",
        location="us-central1",
        credentials=Credentials(token="t"),  # type: ignore[no-untyped-call]
        http_options=scripted.http_options(),
    )
    transport = GeminiLiveTransport(client=client, model=MODEL, tool_call_grace=GRACE)
    rec = Recorder(transport)
    await transport.connect()
    await scripted.send({"toolCall": {"functionCalls": [{"name": "lookup", "args": {}}]}})
    await rec.wait_for("on_tool_call")
    ((calls,),) = rec.of("on_tool_call")
    (call,) = calls
    transport.send_tool_result(ToolResult(call.id, call.name, {"ok": True}))
    await scripted.send(
        {
            "sessionResumptionUpdate": {
                "newHandle": "v-1",
                "resumable": True,
                "lastConsumedClientMessageIndex": "1",
            }
        }
    )
    await rec.wait_for("on_resumption_update")
    await transport.disconnect()
    (response,) = [m for m in scripted.received if "tool_response" in m]
    (sent,) = response["tool_response"]["functionResponses"]
    assert "id" not in sent and sent["name"] == "lookup"
    assert rec.of("on_resumption_update") == [("v-1", True, 1)]


async def test_voice_activity_reports_speech_start_and_stop(scripted: ScriptedServer) -> None:
    transport, rec = await _connect(scripted)
    await scripted.send(
        {"voiceActivity": {"type": "ACTIVITY_START"}},
        {"voiceActivity": {"type": "ACTIVITY_END"}},
    )
    await rec.wait_for("on_user_speech_stopped")
    await transport.disconnect()
    assert rec.names("on_speech_started", "on_user_speech_stopped") == [
        "on_speech_started",
        "on_user_speech_stopped",
    ]


async def test_thoughts_grounding_and_text(scripted: ScriptedServer) -> None:
    transport, rec = await _connect(scripted, response_modality="text")
    await scripted.send(
        {"serverContent": {"modelTurn": {"parts": [{"text": "pondering", "thought": True}]}}},
        {
            "serverContent": {
                "modelTurn": {"parts": [{"text": "Answer."}]},
                "groundingMetadata": {"webSearchQueries": ["weather"]},
            },
            "usageMetadata": {"promptTokenCount": 4, "thoughtsTokenCount": 2},
        },
        TURN_COMPLETE,
    )
    await rec.wait_for("on_generation_end")
    await transport.disconnect()
    assert rec.names(
        "on_generation_start",
        "on_reasoning_start",
        "on_reasoning_summary",
        "on_reasoning_done",
        "on_text_output",
        "on_grounding_metadata",
        "on_text_done",
        "on_turn_complete",
        "on_generation_end",
    ) == [
        "on_generation_start",
        "on_reasoning_start",
        "on_reasoning_summary",
        "on_reasoning_done",
        "on_text_output",
        "on_grounding_metadata",
        "on_text_done",
        "on_turn_complete",
        "on_generation_end",
    ]
    assert rec.of("on_grounding_metadata") == [({"web_search_queries": ["weather"]},)]
    ((usage,),) = rec.of("on_realtime_llm_usage")
    assert usage.phase == "update"
    assert usage.modality_breakdown is not None
    assert usage.modality_breakdown.reasoning_tokens == 2


async def test_close_reasons_never_carry_secrets(scripted: ScriptedServer) -> None:
    # Without rotation the close ends the session, so on_close carries its reason.
    transport, rec = await _connect(scripted, rotation=False)
    await scripted.send(
        {"sessionResumptionUpdate": {"newHandle": "handle-secret-42", "resumable": True}}
    )
    await rec.wait_for("on_resumption_update")
    await scripted.close(1008, f"key {API_KEY} and handle handle-secret-42 refused")
    await rec.wait_for("on_close")
    await transport.disconnect()
    ((code, reason),) = rec.of("on_close")
    assert code == 1008
    assert reason is not None
    assert API_KEY not in reason and "handle-secret-42" not in reason
    assert reason.startswith("key sekr")
    (close,) = [e for (e,) in rec.of("on_connection_lifecycle") if e.kind == "generation-close"]
    assert close.reason == reason
