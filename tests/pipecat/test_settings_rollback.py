"""A settings update the service itself refuses (a voice it does not know) is rolled back by the
transport to the setup that last worked, and the service's own settings follow it back: what
``service.settings`` shows is what the model runs with. An update a move carried before the
refused one stays. Real pipelines on the emulator, which refuses unknown voices as the service
does."""

from __future__ import annotations

from pipecat.frames.frames import (
    ErrorFrame,
    InputTextRawFrame,
    LLMFullResponseEndFrame,
    LLMUpdateSettingsFrame,
)

from realtime_resumption.frames import SessionMovedFrame, SessionResumptionUpdateFrame
from realtime_resumption.pipecat import GeminiLiveLLMService
from realtime_resumption.testing.emulator import Emulator
from realtime_resumption.transport import SetupRefusedError

from . import services
from .rig import Rig, emulator_config


async def _answered(rig: Rig, answers: int) -> None:
    """A question answered, and the resumption handle that follows it."""
    updates = rig.count(SessionResumptionUpdateFrame)
    await rig.queue(InputTextRawFrame("hello there"))
    await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= answers)
    await rig.wait(lambda: rig.count(SessionResumptionUpdateFrame) > updates)


async def test_a_refused_settings_update_rolls_the_services_settings_back() -> None:
    async with Emulator(emulator_config()) as emu:
        service = services.ours(emu)
        async with Rig([service]) as rig:
            await _answered(rig, 1)
            before = (service.settings.voice, service.settings.temperature)
            delta = GeminiLiveLLMService.Settings(voice="Klingon", temperature=0.2)
            await rig.queue(LLMUpdateSettingsFrame(delta=delta))
            await rig.wait(lambda: rig.count(ErrorFrame, up=True) >= 1)
            after = (service.settings.voice, service.settings.temperature)

    (error,) = rig.of(ErrorFrame, up=True)
    assert isinstance(error.exception, SetupRefusedError)
    assert before == ("Charon", None)
    assert after == before, "the settings still show the refused update"


async def test_an_update_a_move_carried_stays_when_a_later_one_is_refused() -> None:
    async with Emulator(emulator_config()) as emu:
        service = services.ours(emu)
        async with Rig([service]) as rig:
            await _answered(rig, 1)
            delta = GeminiLiveLLMService.Settings(voice="Puck", temperature=0.7)
            await rig.queue(LLMUpdateSettingsFrame(delta=delta))
            await rig.wait(lambda: rig.count(SessionMovedFrame) >= 1)
            await _answered(rig, 2)
            delta = GeminiLiveLLMService.Settings(voice="Klingon", max_tokens=100)
            await rig.queue(LLMUpdateSettingsFrame(delta=delta))
            await rig.wait(lambda: rig.count(ErrorFrame, up=True) >= 1)
            after = (
                service.settings.voice,
                service.settings.temperature,
                service.settings.max_tokens,
            )

    assert after == ("Puck", 0.7, 4096)
