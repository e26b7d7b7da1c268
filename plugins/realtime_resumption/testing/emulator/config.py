"""The emulator's settings: profile, pacing, handle rules and rotation."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Literal

from .models import Profile, model_profile

InstructionChange = Literal["accept", "ignore", "refuse"]
RefusalTiming = Literal["before_setup_complete", "after_setup_complete"]
Range = float | tuple[float, float]
"""Seconds, or a (low, high) range each draw is taken from (seeded)."""

PROFILES: tuple[Profile, ...] = ("gemini", "vertex")
INSTRUCTION_CHANGES: tuple[InstructionChange, ...] = ("accept", "ignore", "refuse")
REFUSAL_TIMINGS: tuple[RefusalTiming, ...] = ("before_setup_complete", "after_setup_complete")

HANDLE_VALIDITY: dict[Profile, float] = {"gemini": 7200.0, "vertex": 86400.0}
"""How long each profile's handles stay valid after their session ended, as documented: 2 h
on the Gemini API, 24 h on Vertex AI (whose page also says "around 10 minutes")."""

PREBUILT_VOICES: frozenset[str] = frozenset(
    "Achernar Achird Algenib Algieba Alnilam Aoede Autonoe Callirrhoe Charon Despina "
    "Enceladus Erinome Fenrir Gacrux Iapetus Kore Laomedeia Leda Orus Puck Pulcherrima "
    "Rasalgethi Sadachbia Sadaltager Schedar Sulafat Umbriel Vindemiatrix Zephyr "
    "Zubenelgenubi".split()
)
"""The 30 prebuilt voices Google documents for Gemini speech."""

KIND_SERVICE: dict[str, Any] = {
    "refuse_resume_while_open": False,
    "refuse_unknown_voice": False,
    "pong_latency": 0.0,
    "session_cap": None,
}
"""The settings of a kinder service than the one teams measured in 2026: a resume is accepted
while an earlier connection of its session is open, pongs are prompt, sessions have no cap, any
voice name is taken.
``EmulatorConfig.kind()`` applies them."""

_RANGES = ("setup_latency", "handle_delay", "pong_latency")


@dataclass
class EmulatorConfig:
    """How the emulated service behaves.

    Every duration is in seconds and is multiplied by ``time_scale`` before the emulator waits
    on it or writes it on the wire (goAway ``timeLeft`` included), so a whole scenario can run
    in a fraction of a second while client-side clocks stay consistent with what they are told.
    """

    profile: Profile = "gemini"
    """``gemini`` (Gemini API) or ``vertex`` (Vertex AI) resumption and closing behaviour."""
    time_scale: float = 1.0
    answer_chunks: int = 10
    """Audio chunks per answer (text parts with the TEXT modality)."""
    chunk_interval: float = 0.04
    """Time between answer chunks; the first chunk comes one interval after the turn ends."""
    chunk_ms: int = 40
    """Audio duration carried by each answer chunk (24 kHz PCM16 mono)."""
    vad_silence: float = 0.5
    """Silent input audio (measured in audio time) that ends a user audio turn."""
    vad_threshold: int = 500
    """RMS level (PCM16) above which input audio counts as speech."""
    setup_latency: float | tuple[float, float] = 0.3
    """Time between the client's setup message and setupComplete (the service's work, not the
    network). A (low, high) range draws each setup's latency from a generator seeded with
    ``seed``, so runs repeat. ``faults.slow_setups`` overrides it for chosen setups."""
    round_trip: float = 0.006
    """Network round trip: everything on the wire (the HTTP upgrade, data frames, pings and
    pongs, close frames, the end of the connection; not the TLS handshake) arrives half of it
    after it was sent, in order, both ways. The delay adds latency, not a throughput limit;
    0 puts nothing between the socket and websockets."""
    update_after_setup: bool = False
    """Send a resumption update right after setupComplete. The service does not: it says
    nothing after setupComplete until it has something to say, so by default a new
    connection's first handle follows its first answer."""
    handle_delay: tuple[float, float] = (0.02, 0.07)
    """Vertex: the handle follows turnComplete after a delay drawn from this range."""
    handle_validity: float | None = None
    """How long a handle stays valid after its session ended (its last open connection
    closed); while the session has an open connection its handles are valid. None: the
    profile's documented figure (``HANDLE_VALIDITY``: 2 h Gemini API, 24 h Vertex AI). A
    handle past it is refused with ``refuse_close_code``."""
    handle_lifetime: float | None = None
    """A stricter rule for tests: handles older than this since they were issued are refused
    too, open session or not (0 makes every handle stale at once). None: no such limit."""
    refuse_close_code: int = 1007
    """Close code for an expired or unknown handle, and for a resume of a session that
    reached ``session_cap``."""
    refuse_after_setup_complete: bool = False
    """Refuse a bad handle after sending setupComplete instead of before it."""
    refuse_resume_while_open: bool = True
    """Refuse (close 1011) a setup with the handle of a session that still has an open
    connection, as the live service was measured to do in 2026; closing the old connection
    first makes the same handle work. False accepts it (make-before-break)."""
    refuse_resume_while_open_when: RefusalTiming = "before_setup_complete"
    """When that refusal comes: ``before_setup_complete`` (right after the setup frame
    arrived, no setupComplete, no setup latency: as measured) or ``after_setup_complete``
    (setupComplete after the setup latency, then the close)."""
    pong_latency: Range = (8.0, 30.0)
    """How late the service answers a WebSocket ping (measured at 8-30 s in 2026): each pong
    is drawn from the range (seeded), pongs leave in the order of their pings, data frames are
    not held behind them. 0: prompt pongs."""
    session_cap: float | None = 900.0
    """Session time (connected time, across the session's resumed connections, overlaps
    counted once) after which a session whose setup does not enable context-window compression
    ends (the documented 15 minutes for audio): goAway ``notice`` before the cap, the profile's
    deadline close at it, and any later resume of the session is refused with
    ``refuse_close_code``. A setup with ``contextWindowCompression.slidingWindow`` has no cap.
    None: no cap."""
    refuse_unknown_voice: bool = True
    """A setup whose prebuilt voice is not one of :data:`PREBUILT_VOICES` is refused: close 1007
    "Request contains an invalid argument." before ``setupComplete``, as the service answers an
    invalid argument (Vertex is reported to reject a misspelt voice). False: any name is taken."""
    overstay_1008: bool = False
    """At a goAway's deadline close with 1008 "client failed to close the connection after
    receiving a GoAway signal" (one report) instead of the profile's deadline close (Gemini
    1011 "Deadline expired ...", Vertex 1000), which is what is seen most."""
    rotate_every: float | None = None
    """A connection's life: each connection gets goAway ``notice`` before this age (measured
    from its setupComplete) and is closed at it with the profile's deadline close. It depends
    on the model (``EmulatorConfig.model``): about 10 minutes on the 2.5 models, 58 minutes
    reported on gemini-3.8-live. None: connections live until something else ends them."""
    rotate_without_go_away: bool = False
    """Rotations send no goAway: the deadline close (Gemini 1011 "Deadline expired ...",
    Vertex 1000) comes without notice, as reported of gemini-3.8-live's 58-minute
    connection. The 2.5 models warn first."""
    refuse_resume_after_deadline: bool = False
    """After a rotation closed a connection without a goAway (``rotate_without_go_away``),
    every later resume of its session is refused with ``refuse_close_code`` (1007): its
    handles are gone, and a client must start a new session. Reported of gemini-3.8-live
    ("sometimes"; modelled as always)."""
    resume_instruction_limit: int | None = None
    """A resume of a session whose system instruction is longer than this many tokens (four
    characters a token) is refused with ``refuse_close_code``, as reported of
    gemini-3.1-flash-live-preview (about 200 tokens). None: no such limit."""
    refuse_resume_after_video: bool = False
    """A resume of a session that was sent video input is refused with
    ``refuse_close_code``, as reported of gemini-3.1-flash-live (after audio and video)."""
    notice: float = 50.0
    """goAway ``timeLeft`` used by rotations and by default ``go_away()``."""
    silence_after_go_away: bool = False
    """Rotations: after goAway the connection sends nothing more."""
    voice_activity: bool = False
    """Send ``voiceActivity`` start/end messages for user speech, as newer servers do."""
    tool_call_after_turn_complete: bool = False
    """An answer that calls tools sends its first chunk and turnComplete, and only then the
    toolCall; after the tool response it finishes (the rest of the chunks, generationComplete,
    turnComplete). The service does this: the call that completes an answer arrives after the
    turn boundary. No handle is issued at that first turnComplete (the answer goes on)."""
    instruction_change: InstructionChange = "accept"
    """What a session does with a new system instruction mid-session (a resume whose setup
    carries a different one, or a ``contextUpdate``): ``accept`` it (the new connection's setup
    applies, as for tools and voice), ``ignore`` it (the session keeps its instruction), or
    ``refuse`` it (close 1007: Gemini 3.x models are reported not to allow it)."""
    non_blocking_tools: bool = False
    """The model goes on answering while a function runs, as gemini-3.8-live does by default
    (model page, September 2026; google-genai ``Behavior.NON_BLOCKING``): a call whose
    declaration does not say ``behavior: BLOCKING`` is sent and the answer continues; its
    response, whenever it comes (on a later connection of the session too, if the handle
    resumed from was issued after the call), is taken by its ``scheduling``: ``INTERRUPT``
    cuts the answer in progress and answers the result, ``WHEN_IDLE`` (and none) answers it
    once the answer in progress is over, ``SILENT`` takes it without answering. False: every
    call holds its answer until its response, as the 2.5 models were measured to do (a
    ``NON_BLOCKING`` declaration changes nothing)."""
    in_session_updates: bool = False
    """The session takes ``contextUpdate`` (a new system instruction or tool list) in the
    session, as gemini-3.8-live does on Vertex AI (model page, September 2026; google-genai's
    ``send_context_update``); ``instruction_change`` still decides what it does with a new
    instruction (``refuse``: close 1007). False: the model takes no setup change in the
    session, and a ``contextUpdate`` closes the connection with 1007 "Request contains an
    invalid argument.", as a bad argument does."""
    mid_session_client_content: bool = False
    """A session set up with ``historyConfig.initialHistoryInClientContent`` (the 3.x models'
    history seeding) takes ``client_content`` turns with roles for the whole session, as
    gemini-3.8-live does (model page, September 2026). False: it takes them only before the
    connection's first realtime input and closes with 1007 after it, as
    gemini-3.1-flash-live-preview does. Sessions set up without ``historyConfig`` (the 2.5
    models) take content throughout either way."""
    setup_timeout: float = 120.0
    """How long a new connection may take to send its setup message."""
    hang_limit: float = 600.0
    """Upper bound of every open-ended wait (a hung setup, a pending tool call)."""
    host: str = "127.0.0.1"
    port: int = 0
    seed: int = 0
    """Seeds the handle delays, setup latencies, pong latencies and identifiers, so runs
    repeat."""

    @classmethod
    def kind(cls, **changes: Any) -> EmulatorConfig:
        """A configuration of the kinder service (``KIND_SERVICE``), with ``changes``."""
        return cls(**{**KIND_SERVICE, **changes})

    @classmethod
    def model(cls, name: str, **changes: Any) -> EmulatorConfig:
        """The service as it behaves for the live model ``name`` (an id such as
        ``"gemini-3.8-live"``, or an alias such as ``"3.8"``; see ``models.MODEL_PROFILES``),
        with ``changes`` over the profile's settings. ValueError for an unknown model, or an
        API (``profile``) that does not serve it."""
        model = model_profile(name)
        config = cls(**{**model.settings_on(changes.get("profile", "gemini")), **changes})
        if config.profile not in model.apis:
            served = " and ".join(
                "Vertex AI" if a == "vertex" else "the Gemini API" for a in model.apis
            )
            only = " only" if len(model.apis) == 1 else ""
            raise ValueError(f"{model.name} is served on {served}{only}, not on {config.profile!r}")
        return config

    @property
    def handle_validity_seconds(self) -> float:
        """``handle_validity``, or the profile's documented figure (unscaled)."""
        if self.handle_validity is not None:
            return self.handle_validity
        return HANDLE_VALIDITY[self.profile]

    def __post_init__(self) -> None:
        for name in _RANGES:
            value = getattr(self, name)
            if isinstance(value, list):  # e.g. read back from JSON
                setattr(self, name, tuple(value))
        if self.profile not in PROFILES:
            raise ValueError(f"profile must be one of {PROFILES}, not {self.profile!r}")
        if self.instruction_change not in INSTRUCTION_CHANGES:
            raise ValueError(
                f"instruction_change must be one of {INSTRUCTION_CHANGES}, "
                f"not {self.instruction_change!r}"
            )
        if self.refuse_resume_while_open_when not in REFUSAL_TIMINGS:
            raise ValueError(
                f"refuse_resume_while_open_when must be one of {REFUSAL_TIMINGS}, "
                f"not {self.refuse_resume_while_open_when!r}"
            )
        if not self.time_scale > 0:
            raise ValueError("time_scale must be > 0")
        if self.answer_chunks < 1:
            raise ValueError("answer_chunks must be >= 1")
        if not 1 <= self.chunk_ms <= 10_000:
            raise ValueError("chunk_ms must be between 1 and 10000 (frames stay under 1 MiB)")
        for name in _RANGES:
            value = getattr(self, name)
            if isinstance(value, tuple):
                if len(value) != 2 or not 0 <= value[0] <= value[1]:
                    raise ValueError(f"{name} must be (low, high) with 0 <= low <= high")
            elif name == "handle_delay" or not value >= 0:
                raise ValueError(f"{name} must be >= 0 or a (low, high) range")
        if not 1000 <= self.refuse_close_code <= 4999:
            raise ValueError("refuse_close_code must be a WebSocket close code (1000-4999)")
        if self.rotate_every is not None and not self.rotate_every > 0:
            raise ValueError("rotate_every must be > 0 or None")
        for name in ("chunk_interval", "vad_silence", "notice", "round_trip"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        for name in ("handle_validity", "handle_lifetime"):
            value = getattr(self, name)
            if value is not None and not value >= 0:
                raise ValueError(f"{name} must be >= 0 or None")
        limit = self.resume_instruction_limit
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 1
        ):
            raise ValueError("resume_instruction_limit must be an int >= 1 or None")
        if self.session_cap is not None and not self.session_cap > 0:
            raise ValueError("session_cap must be > 0 or None")
        for name in ("setup_timeout", "hang_limit"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0")

    @property
    def one_way(self) -> float:
        """The scaled delay of the wire in each direction (half the round trip)."""
        return self.scaled(self.round_trip / 2)

    def scaled(self, seconds: float) -> float:
        """``seconds`` on the emulator's clock (multiplied by ``time_scale``)."""
        return seconds * self.time_scale

    def draw(self, value: Range, rng: random.Random) -> float:
        """``value`` (or a draw from its range, with ``rng``) on the emulator's clock."""
        seconds = rng.uniform(*value) if isinstance(value, tuple) else value
        return self.scaled(seconds)
