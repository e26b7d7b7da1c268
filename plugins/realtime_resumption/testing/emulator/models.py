"""The live models the emulator can stand in for: each a bundle of ``EmulatorConfig`` settings
with the reports behind them (``EmulatorConfig.model(name)``).

A profile's settings are the model's behaviour as reported, the less kind way where a report
leaves room (a close "without notice" is modelled as no goAway at all; a resume "sometimes"
refused, as always refused). Each behaviour is one entry, so a profile gains or loses one in
one line; any ``EmulatorConfig`` field can be an entry, and a change passed to
``EmulatorConfig.model`` wins over it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Profile = Literal["gemini", "vertex"]
"""The API that serves a session: the Gemini API or Vertex AI (``EmulatorConfig.profile``)."""


@dataclass(frozen=True)
class ModelProfile:
    """How the service behaves for one live model."""

    name: str
    """The model's id, as the service names it."""
    settings: Mapping[str, Any]
    """``EmulatorConfig`` fields that differ from the emulator's defaults for this model."""
    sources: tuple[str, ...]
    """Where each setting comes from (documentation, or a team's report)."""
    aliases: tuple[str, ...] = ()
    """Other names for the same behaviour (the model's other ids, a short version)."""
    apis: tuple[Profile, ...] = ("gemini", "vertex")
    """The APIs that serve the model (``EmulatorConfig.profile``)."""
    api_settings: Mapping[Profile, Mapping[str, Any]] = field(default_factory=dict)
    """Settings that hold on one API only, over ``settings``."""

    def settings_on(self, api: Profile) -> dict[str, Any]:
        """The ``EmulatorConfig`` fields of this model served on ``api``."""
        return {**self.settings, **self.api_settings.get(api, {})}


GEMINI_2_5 = ModelProfile(
    name="gemini-2.5-flash-native-audio-preview-12-2025",
    aliases=("gemini-live-2.5-flash-native-audio", "gemini-live-2.5-flash-preview", "2.5"),
    settings={
        # Everything else is the emulator's defaults: the service as teams measured it on the
        # 2.5 models in 2025 and 2026.
        "rotate_every": 600.0,
    },
    sources=(
        "rotate_every: the Live API documentation ('about 10 minutes'), goAway 50-60 s before",
        "the defaults: gemini-live-facts.md, 'Reported from the live service in 2026'",
    ),
)
"""The 2.5 native-audio models (Gemini API and Vertex ids): today's service."""

GEMINI_3_8 = ModelProfile(
    name="gemini-3.8-live",
    aliases=("3.8",),
    settings={
        "rotate_every": 3480.0,
        "rotate_without_go_away": True,
        "refuse_resume_after_deadline": True,
        "non_blocking_tools": True,
        "mid_session_client_content": True,
    },
    api_settings={"vertex": {"in_session_updates": True}},
    sources=(
        "rotate_every, rotate_without_go_away: one connection held 58 minutes, then closed 1011 "
        "'Deadline expired' with no goAway reported (discuss.ai.google.dev thread 186392, "
        "September-October 2026)",
        "refuse_resume_after_deadline: the resume after that close was sometimes refused with "
        "1007 (the same thread; modelled as always)",
        "session_cap (kept, 15 minutes without compression): the report does not say whether "
        "its session asked for compression",
        "non_blocking_tools: function calls are non-blocking by default (model page, "
        "September 2026)",
        "mid_session_client_content: client_content with roles is accepted for the whole "
        "session (model page, September 2026)",
        "in_session_updates (Vertex AI only): mid-session updates of the system instruction "
        "and tools on Vertex (model page, September 2026); the Gemini API is not documented "
        "to take them, so there a contextUpdate is refused",
    ),
)
"""gemini-3.8-live (stable since September 2026)."""

GEMINI_3_1 = ModelProfile(
    name="gemini-3.1-flash-live-preview",
    aliases=("3.1",),
    apis=("gemini",),
    settings={
        "rotate_every": 600.0,
        "resume_instruction_limit": 200,
        "refuse_resume_after_video": True,
        "instruction_change": "refuse",
    },
    sources=(
        "apis: served on the Gemini API only (google-adk #5675)",
        "rotate_every: no report for 3.1; the documented 10 minutes",
        "resume_instruction_limit: resumption breaks with a system instruction over about 200 "
        "tokens (google-gemini/cookbook #1197)",
        "refuse_resume_after_video: resuming after audio and video was refused with 1007 "
        "(googleapis/python-genai #2290)",
        "instruction_change: 3.x models do not allow a new system instruction mid-session",
    ),
)
"""gemini-3.1-flash-live-preview."""

MODEL_PROFILES: tuple[ModelProfile, ...] = (GEMINI_2_5, GEMINI_3_8, GEMINI_3_1)
"""Every model profile the emulator knows."""


def model_profile(name: str) -> ModelProfile:
    """The profile of the model ``name`` (an id or an alias, ``models/`` prefix allowed)."""
    wanted = name.removeprefix("models/")
    for profile in MODEL_PROFILES:
        if wanted == profile.name or wanted in profile.aliases:
            return profile
    known = ", ".join(p.name for p in MODEL_PROFILES)
    raise ValueError(f"no model profile named {name!r} (known: {known}, or their aliases)")


def model_names() -> tuple[str, ...]:
    """Every name a profile answers to (ids and aliases), for a command line's choices."""
    return tuple(n for p in MODEL_PROFILES for n in (p.name, *p.aliases))
