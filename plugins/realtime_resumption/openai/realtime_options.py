"""How an :class:`~realtime_resumption.openai.realtime_transport.OpenAIRealtimeTransport`
dials, and how long its sessions may live.

The cap is the service's own limit on one session: OpenAI closes a session 60 minutes after
``session.created`` with close code 1001, "Your session hit the maximum duration of 60
minutes." (pollen-robotics/reachy_mini_conversation_app issue 134); Azure OpenAI closes at 30
minutes (livekit/agents issues 2358, 2341). Nothing in the protocol announces it, so the
transport counts it itself from ``session.created``.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from realtime_resumption.failures import RetryPolicy
from realtime_resumption.move_timing import MIN_DEADLINE_MARGIN
from realtime_resumption.openai.conversation_seed import DEFAULT_BUDGET_TOKENS
from realtime_resumption.openai.session_config import Flavour

OPENAI_CAP: Final = 3600.0
"""Seconds an OpenAI Realtime session lives (from ``session.created``)."""
AZURE_CAP: Final = 1800.0
"""Seconds an Azure OpenAI Realtime session lives."""
DEFAULT_MODEL: Final = "gpt-realtime"
MAX_EVENT_BYTES: Final = 15 * 1024 * 1024
"""The largest client event the service takes (API reference, ``input_audio_buffer.append``:
"The client may send up to 15 MiB of audio" per event)."""


def _seconds(name: str, value: object, *, zero: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number of seconds, got {value!r}")
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        raise ValueError(f"{name} must be a finite number of seconds > 0, got {value!r}")


@dataclass(frozen=True)
class OpenAIRealtimeOptions:
    """The transport's dial and session settings; every one has a working default."""

    model: str = DEFAULT_MODEL
    """The model (OpenAI) or the deployment name (Azure)."""
    flavour: Flavour | Literal["auto"] = "auto"
    """The protocol's spelling: ``ga`` (``client.realtime``), ``beta``
    (``client.beta.realtime``); ``auto``: GA, except beta on an ``AsyncAzureOpenAI`` client,
    whose ``api-version`` endpoint speaks the preview protocol."""
    session_cap: float | Literal["service"] | None = "service"
    """Seconds a session lives from ``session.created``: ``service`` is the service's cap
    (:data:`OPENAI_CAP`, :data:`AZURE_CAP` for an Azure client); None: never move before the
    service closes the session (the close is then rebuilt from, as a drop is)."""
    move_margin: float = 120.0
    """A planned move is wanted this long before the cap, and waits for a turn boundary."""
    forced_margin: float = 15.0
    """If no boundary came, the move is forced at most this long before the cap (a third of
    ``move_margin`` when that is less, never under ``MIN_DEADLINE_MARGIN``): long enough to
    set up a new session before the old one closes."""
    seed_budget_tokens: int = DEFAULT_BUDGET_TOKENS
    """The token budget of the conversation a new session is given (oldest turns first)."""
    connect_timeout: float = 10.0
    """Seconds a dial may take, up to the session's confirmed configuration."""
    retry_delays: tuple[float, ...] = (0.0, 0.5, 1.0, 2.0, 4.0)
    """The pauses before each attempt of a move (one attempt per entry)."""
    retry_policy: RetryPolicy = field(default_factory=RetryPolicy)
    max_queued_events: int = 2_000
    """Client events held while no session takes them (a move): about 40 s of 20 ms audio.
    Past it a send raises ``SendQueueFullError``."""
    websocket_options: dict[str, Any] = field(default_factory=dict, compare=False)
    """Passed to the SDK's ``websocket_connection_options`` (TLS context, proxy, ...)."""
    dial_headers: Callable[[], Awaitable[Mapping[str, str]]] | None = field(
        default=None, compare=False, repr=False
    )
    """Asked for at every dial (each new session: a move's included), its headers added to the
    client's: credentials that expire within a call, such as a Microsoft Entra ID token
    (``{"Authorization": f"Bearer {token}"}``). A dial whose headers cannot be had (it raised)
    fails as an unreachable service would, and is retried by the same rules."""

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model:
            raise ValueError("model must be a non-empty string")
        if self.flavour not in ("auto", "ga", "beta"):
            raise ValueError(f"flavour must be 'auto', 'ga' or 'beta', not {self.flavour!r}")
        cap = self.session_cap
        if cap not in ("service", None):
            _seconds("session_cap", cap)
        _seconds("move_margin", self.move_margin, zero=True)
        _seconds("forced_margin", self.forced_margin)
        if self.forced_margin < MIN_DEADLINE_MARGIN:
            raise ValueError(
                f"forced_margin must be at least {MIN_DEADLINE_MARGIN} s: a new session needs "
                "that long to be set up before the old one closes"
            )
        if self.forced_margin > self.move_margin:
            raise ValueError("forced_margin must not exceed move_margin")
        if isinstance(cap, int | float) and self.move_margin >= cap:
            raise ValueError("move_margin must be shorter than session_cap")
        _seconds("connect_timeout", self.connect_timeout)
        if not isinstance(self.seed_budget_tokens, int) or self.seed_budget_tokens < 1:
            raise ValueError("seed_budget_tokens must be an int >= 1")
        if not self.retry_delays:
            raise ValueError("retry_delays must name at least one attempt")
        for delay in self.retry_delays:
            _seconds("a retry delay", delay, zero=True)
        if not isinstance(self.max_queued_events, int) or self.max_queued_events < 1:
            raise ValueError("max_queued_events must be an int >= 1")

    def cap_for(self, azure: bool) -> float | None:
        """The session cap in seconds for a client of this service (None: no cap)."""
        if self.session_cap == "service":
            return AZURE_CAP if azure else OPENAI_CAP
        return self.session_cap

    def flavour_for(self, azure: bool) -> Flavour:
        """The spelling a client of this service speaks."""
        if self.flavour == "auto":
            return "beta" if azure else "ga"
        return self.flavour
