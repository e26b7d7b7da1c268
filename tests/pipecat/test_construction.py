"""The constructors are the stock 1.14 ones (every parameter, name, default and deprecation
warning) plus the rotation options; the Vertex service works offline against the emulator in
Vertex mode, turning credentials into a token only when it dials."""

from __future__ import annotations

import inspect
import json
import warnings
from typing import Any

import pytest
from google import genai
from google.genai import types as genai_types
from google.oauth2 import service_account
from loguru import logger
from pipecat.frames.frames import ErrorFrame, InputTextRawFrame, LLMFullResponseEndFrame
from pipecat.services.google.gemini_live.llm import GeminiLiveLLMService as StockService
from pipecat.services.google.gemini_live.llm import InputParams
from pipecat.services.google.gemini_live.vertex.llm import (
    GeminiLiveVertexLLMService as StockVertexService,
)

from realtime_resumption.frames import SessionMovedFrame
from realtime_resumption.gemini import Credential
from realtime_resumption.pipecat import GeminiLiveLLMService, GeminiLiveVertexLLMService
from realtime_resumption.pipecat.gemini import vertex
from realtime_resumption.testing.emulator import Emulator

from .rig import FAST, MODEL, Rig, emulator_config

ROTATION = {"resumption", "input_buffer", "retry_budget", "resume_watchdog"}
STORE = {"store", "session_key", "store_options"}


def _parameters(cls: type) -> dict[str, inspect.Parameter]:
    return dict(inspect.signature(cls.__init__).parameters)


@pytest.mark.parametrize(
    ("ours", "stock", "extra"),
    [
        (GeminiLiveLLMService, StockService, ROTATION | STORE),
        (
            GeminiLiveVertexLLMService,
            StockVertexService,
            ROTATION | STORE | {"transparent", "credential_provider"},
        ),
    ],
)
def test_the_constructor_is_the_stock_one_plus_rotation_options(
    ours: type, stock: type, extra: set[str]
) -> None:
    mine, theirs = _parameters(ours), _parameters(stock)
    assert set(mine) - set(theirs) == extra
    for name, parameter in theirs.items():
        assert name in mine, name
        assert (mine[name].kind, mine[name].default) == (parameter.kind, parameter.default), name
    # In the stock order, with ours after them (before **kwargs).
    assert [n for n in mine if n in theirs] == list(theirs)


def _warnings(make: Any) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        make()
    return sorted(str(w.message) for w in caught if issubclass(w.category, DeprecationWarning))


def test_deprecated_arguments_warn_as_stock_and_land_in_the_settings() -> None:
    kwargs: dict[str, Any] = {
        "api_key": "k",
        "model": "gemini-live-2.5-flash-preview",
        "voice_id": "Puck",
        "params": InputParams(temperature=0.5),
    }
    stock_warnings = _warnings(lambda: StockService(**kwargs))
    our_warnings = _warnings(lambda: GeminiLiveLLMService(**kwargs))
    assert our_warnings == stock_warnings and len(stock_warnings) >= 3
    ours = GeminiLiveLLMService(**kwargs)
    stock = StockService(**kwargs)
    for field in ("model", "voice", "temperature", "language", "max_tokens", "modalities"):
        assert getattr(ours.settings, field) == getattr(stock.settings, field), field


def test_vertex_refuses_an_api_key_as_stock_does() -> None:
    with pytest.raises(ValueError, match="Invalid parameter 'api_key'"):
        GeminiLiveVertexLLMService(location="l", project_id="p", api_key="k")


async def test_vertex_runs_offline_on_the_emulator_with_a_credential_provider() -> None:
    dials = 0

    async def tokens() -> Credential:
        nonlocal dials
        dials += 1
        return Credential("emulator-token")

    async with Emulator(emulator_config("vertex")) as emu:
        service = GeminiLiveVertexLLMService(
            location="us-central1",
            project_id="emulator-project",
            credential_provider=tokens,
            http_options=emu.http_options(),
            settings=GeminiLiveVertexLLMService.Settings(model=MODEL),
            transparent=True,
        )
        assert dials == 0  # nothing is fetched before a dial
        async with Rig([service]) as rig:
            await rig.queue(InputTextRawFrame("hello there"))
            await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 1)
        (session,) = emu.ledger.sessions.values()
    (connection,) = session.connections
    assert connection.api == "vertex"
    assert connection.setup is not None and connection.setup.transparent
    assert dials == 1


def _service_account_json() -> str:
    """A well-formed service account (a fresh key; no such account exists)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    return json.dumps(
        {
            "type": "service_account",
            "project_id": "p",
            "private_key_id": "1",
            "private_key": pem,
            "client_email": "bot@p.iam.gserviceaccount.com",
            "token_uri": "https://oauth2.googleapis.com/token",
        }
    )


@pytest.mark.parametrize(
    "credentials",
    [{"credentials": "not json"}, {"credentials": "{}"}, {"credentials_path": "/no/such.json"}],
    ids=["not-json", "missing-fields", "missing-file"],
)
def test_vertex_refuses_malformed_or_missing_credentials_as_stock(
    credentials: dict[str, str],
) -> None:
    where = {"location": "us-central1", "project_id": "p"}
    with pytest.raises(Exception) as stock:
        StockVertexService(**where, **credentials)  # type: ignore[arg-type]
    with pytest.raises(type(stock.value)) as ours:
        GeminiLiveVertexLLMService(**where, **credentials)  # type: ignore[arg-type]
    assert str(ours.value) == str(stock.value)


def test_vertex_without_any_credentials_raises_as_stock(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    # No key file, no gcloud file, not a Google Cloud machine. (Stock would find that out by
    # pinging the metadata server, so only ours runs here.)
    for name in ("GOOGLE_APPLICATION_CREDENTIALS", *vertex._CLOUD_ENVIRONMENT):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path))
    monkeypatch.setattr(vertex, "_DMI_PRODUCT", tmp_path / "product_name")
    with pytest.raises(ValueError, match=r"^No valid credentials provided\.$"):
        GeminiLiveVertexLLMService(location="us-central1", project_id="p")
    # A key file named by the environment is a source.
    key_file = tmp_path / "sa.json"
    key_file.write_text(_service_account_json())
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key_file))
    GeminiLiveVertexLLMService(location="us-central1", project_id="p")


def test_vertex_loads_good_credentials_without_the_network(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The refresh is the network call: count it (stock makes it in its constructor).
    refreshed: list[object] = []
    monkeypatch.setattr(
        service_account.Credentials, "refresh", lambda self, request: refreshed.append(self)
    )
    where = {"location": "us-central1", "project_id": "p"}
    info = _service_account_json()
    StockVertexService(credentials=info, **where)
    assert len(refreshed) == 1
    service = GeminiLiveVertexLLMService(credentials=info, **where)
    assert len(refreshed) == 1
    assert service.transport.is_connected is False


def test_the_key_is_held_as_a_secret() -> None:
    key = "AIzaSyD-not-a-real-key-0123456789abcdef"
    service = GeminiLiveLLMService(api_key=key)
    assert key not in repr(vars(service)) and key not in str(vars(service))
    assert key not in repr(service.transport)


async def test_create_client_is_the_hook_every_dial_uses() -> None:
    made: list[object] = []

    class OwnClient(GeminiLiveLLMService):
        def create_client(self) -> None:
            # The constructor's http_options point nowhere; this client reaches the emulator.
            self._client = genai.Client(api_key="own-key", http_options=emu.http_options())
            made.append(self._client)

    async with Emulator(emulator_config()) as emu:
        service = OwnClient(
            api_key="unused",
            http_options=genai_types.HttpOptions(base_url="https://127.0.0.1:9"),
            settings=GeminiLiveLLMService.Settings(model=MODEL),
            resumption=FAST,
        )
        async with Rig([service]) as rig:
            await rig.queue(InputTextRawFrame("hello there"))
            await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 1)
            emu.faults.drop()
            await rig.wait(lambda: rig.count(SessionMovedFrame) >= 1)
            await rig.queue(InputTextRawFrame("hello there"))
            await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 2)
        (session,) = emu.ledger.sessions.values()
    assert len(made) == 1
    assert len(session.connections) == 2  # the first dial and the move's, both with it


async def test_a_vertex_subclass_client_from_create_client_dials() -> None:
    from google.oauth2.credentials import Credentials

    class OwnVertexClient(GeminiLiveVertexLLMService):
        def create_client(self) -> None:
            # As the stock Vertex service makes its client (here with a ready token).
            self._client = genai.Client(
                vertexai=True,
                credentials=Credentials(token="emulator-token"),  # type: ignore[no-untyped-call]
                project=self._project_id,
                location=self._location,
                http_options=emu.http_options(),
            )

    async with Emulator(emulator_config("vertex")) as emu:
        service = OwnVertexClient(
            location="us-central1",
            project_id="emulator-project",
            credential_provider=_never,
            settings=GeminiLiveVertexLLMService.Settings(model=MODEL),
        )
        async with Rig([service]) as rig:
            await rig.queue(InputTextRawFrame("hello there"))
            await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 1)
        (session,) = emu.ledger.sessions.values()
    assert [c.api for c in session.connections] == ["vertex"]


async def _never() -> Credential:
    raise AssertionError("the subclass's client is used, not the credential provider")


async def test_the_key_behind_the_client_stays_out_of_logs_and_errors() -> None:
    key = "AIzaSy-echoed-by-the-server-0123456789"
    logged: list[str] = []
    sink = logger.add(lambda m: logged.append(str(m)), level="TRACE")
    try:
        async with Emulator(emulator_config()) as emu:
            service = GeminiLiveLLMService(
                api_key=key,
                http_options=emu.http_options(),
                settings=GeminiLiveLLMService.Settings(model=MODEL),
                resumption=FAST,
            )
            async with Rig([service]) as rig:
                await rig.queue(InputTextRawFrame("hello there"))
                await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 1)
                # A server that echoes the key in its close reason.
                await emu.faults.close(1011, f"key {key} refused")
                await rig.wait(lambda: rig.count(SessionMovedFrame) >= 1)
    finally:
        logger.remove(sink)
    assert any("key" in line and "refused" in line for line in logged)
    assert not [line for line in logged if key in line]
    assert not [e for e in rig.of(ErrorFrame, up=True) if key in e.error]
