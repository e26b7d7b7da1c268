"""The transport's constructor refuses arguments that do not go together, before it builds
anything (``live_options.check_arguments``)."""

from __future__ import annotations

from typing import Any

import pytest
from google import genai

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.gemini.live_options import check_arguments
from realtime_resumption.store import MemoryStore


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"response_modality": "video"}, "response_modality must be 'audio' or 'text'"),
        ({"setup_timeout": 0}, "setup_timeout must be > 0"),
        ({"transparent": True}, "transparent session resumption is a Vertex AI feature"),
        ({"store": MemoryStore()}, "a store needs a session_key"),
    ],
)
def test_arguments_that_do_not_go_together_are_refused(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        GeminiLiveTransport(api_key="key-0123456789", **kwargs)


def test_a_ready_client_excludes_what_builds_one() -> None:
    client = genai.Client(api_key="key-0123456789")
    with pytest.raises(ValueError, match="either a ready client"):
        GeminiLiveTransport(client=client, api_key="another-key-0123456789")


def _vertex(**kwargs: Any) -> bool:
    arguments: dict[str, Any] = {
        "response_modality": "audio",
        "setup_timeout": 10.0,
        "client": None,
        "api_key": None,
        "credentials": None,
        "http_options": None,
        "credential_provider": None,
        "vertexai": False,
        "project": None,
        "location": None,
        "transparent": False,
        "has_store": False,
        "session_key": None,
    }
    return check_arguments(**{**arguments, **kwargs})


def test_vertex_ai_is_chosen_by_the_flag_a_project_a_location_or_the_client() -> None:
    assert not _vertex()
    assert _vertex(vertexai=True) and _vertex(project="p") and _vertex(location="europe-west4")
    assert _vertex(project="p", transparent=True)
    vertex_client = genai.Client(vertexai=True, project="p", location="us-central1")
    assert _vertex(client=vertex_client)
    assert not _vertex(client=genai.Client(api_key="key-0123456789"), project="ignored")
