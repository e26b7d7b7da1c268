"""GeminiLiveTransport offers the interface and says what it lacks."""

from __future__ import annotations

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.transport import (
    AudioFormatSpec,
    LLMTransport,
    SupportsCancelResponse,
    SupportsClearInputAudio,
    SupportsClearResumption,
    SupportsDiagnostics,
    SupportsDialGenerations,
    SupportsElicitResponse,
    SupportsInlineFile,
    SupportsLiveText,
    SupportsQuiesce,
    SupportsReplayHistory,
    SupportsReplayUserTurn,
    SupportsServerTurns,
)


def test_the_transport_offers_every_member_gemini_can_honour() -> None:
    transport: LLMTransport = GeminiLiveTransport(api_key="k")
    for protocol in (
        SupportsCancelResponse,
        SupportsQuiesce,
        SupportsReplayHistory,
        SupportsReplayUserTurn,
        SupportsLiveText,
        SupportsInlineFile,
        SupportsClearResumption,
        SupportsServerTurns,
        SupportsDiagnostics,
        SupportsDialGenerations,
    ):
        assert isinstance(transport, protocol), protocol.__name__


def test_members_gemini_cannot_honour_are_absent_and_capabilities_say_so() -> None:
    transport = GeminiLiveTransport(api_key="k")
    assert not isinstance(transport, SupportsElicitResponse)
    assert not isinstance(transport, SupportsClearInputAudio)
    capabilities = transport.capabilities
    assert not capabilities.elicit_response and not capabilities.clear_input_audio
    assert not capabilities.in_place_session_update and not capabilities.message_truncation
    assert capabilities.session_resumption and capabilities.quiescible
    assert capabilities.provider_evidence_kinds == frozenset()


def test_audio_format_is_16_khz_in_and_24_khz_out() -> None:
    assert GeminiLiveTransport(api_key="k").audio_format == AudioFormatSpec(16_000, 24_000)


def test_the_api_key_stays_out_of_the_repr() -> None:
    transport = GeminiLiveTransport(api_key="very-secret-api-key")
    assert "very-secret" not in repr(transport)
    assert "very-secret" not in repr(transport._auth)
