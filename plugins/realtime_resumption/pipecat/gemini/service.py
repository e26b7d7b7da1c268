"""``GeminiLiveLLMService``: the stock Pipecat service's drop-in, on ``GeminiLiveTransport``.

Frames in → transport calls (``process_frame``/``push_frame``); transport callbacks → frames
(``output.ResponseFrames``). The resumption helper sits inside the transport, between this
service and the connection, so the service never sees a move except as the frames of
``realtime_resumption.frames``. See the package docstring for the whole mapping.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final, cast

from google import genai
from google.genai import types
from loguru import logger
from pipecat.adapters.llm.schemas.direct_function import DirectFunction
from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
from pipecat.adapters.llm.services.gemini_live_adapter import GeminiLiveLLMAdapter
from pipecat.frames.frames import (
    CancelFrame,
    EndFrame,
    Frame,
    FunctionCallFromLLM,
    FunctionCallResultFrame,
    InputAudioRawFrame,
    InputImageRawFrame,
    InputTextRawFrame,
    InterruptionFrame,
    LLMContextFrame,
    LLMMessagesAppendFrame,
    LLMServiceMetadataFrame,
    LLMSetToolsFrame,
    SpeechControlParamsFrame,
    StartFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
)
from pipecat.processors.aggregators import async_tool_messages
from pipecat.processors.aggregators.llm_context import (
    LLMContext,
    LLMSpecificMessage,
    standard_message_text,
)
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.google.gemini_live.file_api import GeminiFileAPI
from pipecat.services.google.gemini_live.llm import (
    GeminiLiveLLMSettings,
    GeminiModalities,
    InputParams,
    language_to_gemini_language,
)
from pipecat.services.google.utils import update_google_client_http_options
from pipecat.services.llm_service import LLMService
from pipecat.services.settings import ServiceSettings
from pipecat.transcriptions.language import Language
from pipecat.utils.types import NOT_GIVEN, assert_given, is_given

from realtime_resumption import RecordError
from realtime_resumption.frames import HANDOVER
from realtime_resumption.gemini import (
    DEFAULT_RESUME_WATCHDOG,
    DEFAULT_RETRY_BUDGET,
    GeminiLiveTransport,
    OutboxLimits,
    RetryPolicy,
    StoreOptions,
    TransportOptions,
    model_version,
)
from realtime_resumption.pipecat.gemini import settings as settings_map
from realtime_resumption.pipecat.gemini import updates
from realtime_resumption.pipecat.gemini.output import ResponseFrames
from realtime_resumption.pipecat.user_input import (
    PREROLL,
    PREROLL_MARGIN,
    AudioConverter,
    ImageThrottle,
    MalformedInputError,
    Preroll,
)
from realtime_resumption.redaction import secret
from realtime_resumption.resumption import ResumptionOptions
from realtime_resumption.store import SessionStore, StoreError
from realtime_resumption.transport import (
    ContentTurn,
    NotConnectedError,
    ReplayItem,
    SessionUpdate,
    ToolCall,
    ToolCallOrphanedError,
    ToolResult,
    ToolResultScheduling,
    TransportError,
    UnknownToolCallError,
)

END_FRAME_HOLD: Final = 30.0
"""Seconds an ``EndFrame`` waits for the answer in progress to finish (as stock)."""
FRAMES_DRAIN_TIMEOUT: Final = 2.0
"""Seconds the frames of the last callbacks get to be pushed when the pipeline ends."""
CLIENT_CLOSE_TIMEOUT: Final = 2.0
"""Seconds the client ``create_client`` made gets to close at cleanup."""

_Tools = ToolsSchema | list[FunctionSchema | DirectFunction] | list[dict[str, Any]] | None

if TYPE_CHECKING:
    from opentelemetry.context import Context


class GeminiLiveLLMService(LLMService[GeminiLiveLLMAdapter]):  # type: ignore[misc]
    """Google's Gemini Live as a Pipecat realtime service that survives connection rotation.

    The constructor is the stock ``pipecat.services.google.gemini_live.llm.
    GeminiLiveLLMService`` 1.14 constructor (same parameters, defaults and deprecation
    warnings), plus what the transport needs to move sessions: ``resumption`` (when to
    move, retries), ``input_buffer`` (input held across a move), ``retry_budget`` (failed
    attempts the whole session may spend, or a ``RetryPolicy``) and ``resume_watchdog`` (how long a resumed
    connection may leave the user unanswered). ``user_audio_preroll_secs`` sizes the audio
    kept before an activity starts with server VAD disabled. ``store`` and ``session_key``
    (the app's id of the call; ``store_options`` tunes it) keep the call's state in a
    ``SessionStore`` so another process can take the call over (see the transport).

    Generation settings (``temperature``, ``max_tokens``, ``top_p``/``top_k``, the penalties,
    ``seed``, ``media_resolution``, ``thinking``, ``enable_affective_dialog``,
    ``proactivity``) reach the setup as stock sends them; a change mid-call moves the session.
    """

    # Pipecat's protected members this service uses, as Pipecat's own services do (Pipecat
    # offers no public form of them): ``_settings`` and the ``_update_settings`` override (the
    # settings machinery of every LLMService), ``_sync_registered_tool_handlers``,
    # ``_function_is_async`` (tool registration and non-blocking tools),
    # ``_warn_if_realtime_service_emits_no_turn_frames``, ``_warn_unhandled_updated_settings``,
    # ``_log_llm_conversation_setup`` (the stock warnings and logs, same texts) and
    # ``_tracing_context`` (the pipeline's trace, for the session's spans).

    Settings = GeminiLiveLLMSettings
    _settings: GeminiLiveLLMSettings
    adapter_class = GeminiLiveLLMAdapter

    _DEFAULT_MODEL: str = "models/gemini-3.8-live"

    def __init__(
        self,
        *,
        api_key: str,
        model: str | None = None,
        voice_id: str = "Charon",
        start_audio_paused: bool = False,
        start_video_paused: bool = False,
        system_instruction: str | None = None,
        tools: _Tools = None,
        params: InputParams | None = None,
        settings: GeminiLiveLLMSettings | None = None,
        inference_on_context_initialization: bool = True,
        user_audio_preroll_secs: float | None = None,
        file_api_base_url: str = "https://generativelanguage.googleapis.com/v1beta/files",
        http_options: types.HttpOptions | None = None,
        resumption: ResumptionOptions | None = None,
        input_buffer: OutboxLimits | None = None,
        retry_budget: int | RetryPolicy = DEFAULT_RETRY_BUDGET,
        resume_watchdog: float | None = DEFAULT_RESUME_WATCHDOG,
        store: SessionStore | None = None,
        session_key: str | None = None,
        store_options: StoreOptions | None = None,
        **kwargs: Any,
    ) -> None:
        self._api_key = secret(api_key)
        initial = settings_map.initial_settings(
            self.Settings,
            self,
            default_model=self._DEFAULT_MODEL,
            system_instruction=system_instruction,
            model=model,
            voice_id=voice_id,
            params=params,
            settings=settings,
        )
        super().__init__(settings=initial, **kwargs)
        # As stock: the constructor's instruction, or the one its settings carry.
        self._system_instruction_from_init: str | None = assert_given(
            self._settings.system_instruction
        )
        if isinstance(tools, list) and not all(isinstance(t, dict) for t in tools):
            tools = ToolsSchema(standard_tools=cast(list[Any], tools))
        self._tools_from_init = tools
        self._inference_on_context_initialization = inference_on_context_initialization
        self._user_audio_preroll_secs = user_audio_preroll_secs
        self._file_api_base_url = file_api_base_url
        self._file_api: GeminiFileAPI | None = None
        self._audio_input_paused = start_audio_paused
        self._video_input_paused = start_video_paused
        self._http_options = _http_options(http_options)
        self._client: genai.Client | None = None
        # As the stock service: subclasses override it; every dial uses the client it makes.
        self.create_client()

        adapter = self.get_llm_adapter()
        self._transport = GeminiLiveTransport(
            TransportOptions(
                **self._transport_auth(),
                **settings_map.live_options(self._settings),
                system_instruction=self._system_instruction_from_init,
                tools=adapter.from_standard_tools(tools) or () if tools else (),
                initial_history_in_client_content=self._takes_initial_history,
                resumption=resumption,
                input_buffer=input_buffer,
                retry_budget=retry_budget,
                resume_watchdog=resume_watchdog,
                store=store,
                session_key=session_key,
                store_options=store_options,
            )
        )
        self._frames = ResponseFrames(
            self,
            on_tool_calls=self._run_tool_calls,
            on_answer_end=self._answer_ended,
            on_setup_refused=self._roll_back_settings,
            model=lambda: assert_given(self._settings.model),
        )
        self._frames.bind(self._transport)
        telemetry = self._transport.telemetry
        if telemetry is not None:
            # With the pipeline's tracing on, the session's spans nest under its
            # conversation span, and answers under the turn span.
            telemetry.parent = self._conversation_span
            telemetry.generation_parent = self._turn_span
        self._audio = AudioConverter()
        self._images = ImageThrottle()
        self._preroll = Preroll(
            user_audio_preroll_secs if user_audio_preroll_secs is not None else PREROLL
        )
        self._vad_disabled = settings_map.vad_disabled(self._settings)
        self._before_updates: list[GeminiLiveLLMSettings] = []
        """The settings before each setup change made since the setup last worked: where a
        refused one rolls them back to."""
        self._user_speaking = False
        self._session_up = False
        self._connect_task: asyncio.Task[None] | None = None
        self._frames_task: asyncio.Task[None] | None = None
        self._context: LLMContext | None = None
        self._completed_tool_calls: set[str] = set()
        self._held_end: EndFrame | None = None
        self._end_hold_task: asyncio.Task[None] | None = None
        self._closed = False
        self._pending_update: SessionUpdate | None = None
        self._warned_before_context = False
        self._warned_fixed: set[str] = set()

    # --- what subclasses change ---------------------------------------------------------------

    def create_client(self) -> None:
        """Create the Gemini API client (``self._client``). Subclasses can override this, as
        with the stock service: every connection the session opens is dialled with it."""
        self._client = genai.Client(api_key=self._api_key, http_options=self._http_options)

    def _transport_auth(self) -> dict[str, Any]:
        """How the transport reaches the service: the client ``create_client`` made (its key
        kept out of logs), else the key."""
        if self._client is not None:
            return {"client": self._client, "secrets": [self._api_key]}
        return {"api_key": self._api_key, "http_options": self._http_options}

    @property
    def _takes_initial_history(self) -> bool:
        """Gemini 3.x on the Gemini API takes seeded history (``history_config``)."""
        version = self._gemini_version
        return version is not None and version[0] == 3

    # --- public API of the stock service ------------------------------------------------------

    @property
    def transport(self) -> GeminiLiveTransport:
        """The connection this service drives (diagnostics, ``resumption_handle``, moves)."""
        return self._transport

    async def hand_over(self) -> None:
        """Hand the call to another process (a deploy, a drain) before this pipeline ends:
        see ``GeminiLiveTransport.hand_over`` (needs ``store`` and ``session_key``). Push the
        ``EndFrame`` after it: the call goes on where the same key connects next. Or end the
        pipeline with ``EndFrame(reason=realtime_resumption.frames.HANDOVER)``, which does
        both."""
        await self._transport.hand_over()

    @property
    def file_api(self) -> GeminiFileAPI:
        """The Gemini File API client."""
        if self._file_api is None:
            self._file_api = GeminiFileAPI(api_key=self._api_key, base_url=self._file_api_base_url)
        return self._file_api

    def service_metadata_frame(self) -> LLMServiceMetadataFrame:
        """A realtime service: puts the context aggregator pair in realtime mode."""
        self._warn_if_realtime_service_emits_no_turn_frames(emits_turn_frames=False)
        return LLMServiceMetadataFrame(service_name=self.name, is_realtime_service=True)

    def can_generate_metrics(self) -> bool:
        """Gemini Live reports token usage."""
        return True

    def set_audio_input_paused(self, paused: bool) -> None:
        """Pause or resume sending the user's audio."""
        self._audio_input_paused = paused

    def set_video_input_paused(self, paused: bool) -> None:
        """Pause or resume sending the user's images."""
        self._video_input_paused = paused

    def set_model_modalities(self, modalities: GeminiModalities) -> None:
        """Answer in audio or text from the next connection (a planned move carries it)."""
        if modalities == GeminiModalities.TEXT:
            logger.warning(
                f"Modality {modalities.value!r} may not be supported by recent Gemini Live models."
            )
        self._setup_changing()
        self._settings.modalities = modalities
        self._update_transport(
            SessionUpdate(response_modality=settings_map.response_modality(self._settings))
        )

    def set_language(self, language: Language) -> None:
        """Record the language; Gemini takes it in the setup of a new session only."""
        self._settings.language = language_to_gemini_language(language) or "en-US"
        logger.info(f"Set Gemini language to: {self._settings.language}")

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self, frame: StartFrame) -> None:
        """Start pushing the transport's frames and connect (audio that arrives meanwhile is
        held, bounded)."""
        await super().start(frame)
        self._closed = False
        if self._tools_from_init:
            # Handlers register after construction: only now is it known which functions
            # run without holding the answer.
            tools = self._declared(self._tools_from_init)
            self._pending_update = _merged(
                SessionUpdate(tools=tools), self._pending_update or SessionUpdate()
            )
        if self._pending_update is not None:
            await self._transport.update_session(self._pending_update)
            self._pending_update = None
        self._frames_task = self.create_task(self._frames.run(), "gemini-live-frames")
        self._connect_task = self.create_task(self._connect(), "gemini-live-connect")
        # Let the dial begin before the next frame: from then on the transport holds what is
        # sent until the setup completes.
        await asyncio.sleep(0)

    async def stop(self, frame: EndFrame) -> None:
        """Disconnect; the frames of what the connection said last are pushed first. An
        ``EndFrame`` whose ``reason`` is ``HANDOVER`` hands the call over first (see
        ``hand_over``): the next pipeline with the same ``session_key`` continues it."""
        await super().stop(frame)
        if frame.reason == HANDOVER and not self._closed and self._transport.is_connected:
            await self._hand_over_at_end()
        await self._close(drain=True)

    async def cancel(self, frame: CancelFrame) -> None:
        """Disconnect at once."""
        await super().cancel(frame)
        await self._close(drain=False)

    async def cleanup(self) -> None:
        """Release everything at pipeline teardown (the client ``create_client`` made too)."""
        await super().cleanup()  # type: ignore[no-untyped-call]
        await self._close(drain=False)
        client = self._client
        if client is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(CLIENT_CLOSE_TIMEOUT):
                    await client.aio.aclose()
            with contextlib.suppress(Exception):
                client.close()

    async def _hand_over_at_end(self) -> None:
        try:
            await self._transport.hand_over()
        except (TransportError, StoreError) as error:
            # The pipeline ends regardless: the call ends here, as with a plain EndFrame.
            logger.warning(f"{self}: the call was not handed over ({error}); it ends here")

    async def _connect(self) -> None:
        try:
            # Retried as a move's attempts are (``resumption``, ``retry_budget``): each failed
            # dial that is retried is a non-fatal ErrorFrame, the last one a fatal one.
            await self._transport.connect(retry=True)
        except (TransportError, StoreError, RecordError) as error:
            # A store's error (another worker holds the call's lease) is the call's end here
            # as much as a failed dial: the pipeline hears it as an ErrorFrame, not the task
            # manager as an unexpected exception.
            if self._closed:
                # The pipeline ended (EndFrame, CancelFrame) while dialling: a deliberate
                # stop, not a failure.
                logger.debug(f"{self}: connecting stopped by the pipeline's end: {error}")
                return
            await self.push_error(
                f"Gemini Live: could not connect: {error}",
                exception=error,
                force_treat_as_permanent=True,
            )
            return
        self._session_up = True

    async def _close(self, *, drain: bool) -> None:
        if self._closed:
            return
        self._closed = True
        await self._transport.disconnect()
        if self._connect_task is not None:
            await self.cancel_task(self._connect_task)
            self._connect_task = None
        task = self._frames_task
        if task is not None:
            if drain:
                # The frames of what the connection said last, before the EndFrame.
                self._frames.finish()
                await asyncio.wait({task}, timeout=FRAMES_DRAIN_TIMEOUT)
            await self.cancel_task(task)
            self._frames_task = None
        self._frames.close()
        if self._end_hold_task is not None:
            await self.cancel_task(self._end_hold_task)
            self._end_hold_task = None
        self._held_end = None
        self._session_up = False

    async def _session_ready(self) -> bool:
        """Wait for the first connection; False when there is none. The connect bounds the
        wait itself: each dial within the setup timeout, its retries within ``resumption``'s
        delays and the ``retry_budget``."""
        task = self._connect_task
        if not self._session_up and task is not None and not task.done():
            await asyncio.wait({task})
        return self._session_up

    # --- frames in ----------------------------------------------------------------------------

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        """Translate the frame into transport calls; pass it on as the stock service does."""
        if isinstance(frame, EndFrame) and self._frames.responding and self._held_end is None:
            # Let the answer in progress finish (bounded), then end.
            logger.debug(f"{self}: EndFrame held until the answer in progress finishes")
            self._held_end = frame
            self._end_hold_task = self.create_task(self._release_end_later(), "end-frame-hold")
            return
        await super().process_frame(frame, direction)
        if isinstance(frame, LLMContextFrame):
            await self._context_frame(frame.context)
        elif isinstance(frame, InputAudioRawFrame):
            await self._send_audio(frame)
            await self.push_frame(frame, direction)
        elif isinstance(frame, InputImageRawFrame):
            await self._send_image(frame)
            await self.push_frame(frame, direction)
        elif isinstance(frame, InputTextRawFrame):
            await self._send_text([ContentTurn("user", frame.text)])
            await self.push_frame(frame, direction)
        elif isinstance(frame, InterruptionFrame):
            await self._frames.interrupted_locally()
            await self.push_frame(frame, direction)
        elif isinstance(frame, UserStartedSpeakingFrame):
            self._user_started_speaking()
            await self.push_frame(frame, direction)
        elif isinstance(frame, UserStoppedSpeakingFrame):
            self._user_stopped_speaking()
            await self.start_ttfb_metrics()
            await self.push_frame(frame, direction)
        elif isinstance(frame, SpeechControlParamsFrame):
            if self._user_audio_preroll_secs is None and frame.vad_params is not None:
                self._preroll.seconds = frame.vad_params.start_secs + PREROLL_MARGIN
            await self.push_frame(frame, direction)
        elif isinstance(frame, LLMMessagesAppendFrame):
            await self._append_messages(frame)
            await self.push_frame(frame, direction)
        elif isinstance(frame, LLMSetToolsFrame):
            await self._set_tools(frame)
        else:
            await self.push_frame(frame, direction)

    async def push_frame(
        self, frame: Frame, direction: FrameDirection = FrameDirection.DOWNSTREAM
    ) -> None:
        """Push ``frame``; the downstream copy of a function call's result is sent to the
        model on the way."""
        if direction == FrameDirection.DOWNSTREAM and isinstance(frame, FunctionCallResultFrame):
            self._function_call_result(frame)
        await super().push_frame(frame, direction)

    def _service_tools(self) -> ToolsSchema | list[Any] | None:
        """The tools given to the constructor (their handlers register at start)."""
        return self._tools_from_init

    def _before_context(self, what: str) -> bool:
        """Whether the first ``LLMContextFrame`` has yet to come. Until it does, the user's
        audio, images and turn frames are not sent (as with the stock service): the model
        hears nothing before it has the context's instructions."""
        if self._context is not None:
            return False
        if not self._warned_before_context:
            self._warned_before_context = True
            logger.debug(f"{self}: {what} before the first LLMContextFrame is not sent")
        return True

    async def _send_audio(self, frame: InputAudioRawFrame) -> None:
        if self._audio_input_paused:
            return
        try:
            pcm = await self._audio.convert(frame)
        except MalformedInputError as error:
            await self.push_error(f"{self}: audio frame not sent: {error}", exception=error)
            return
        if self._before_context("user audio"):
            return
        if self._vad_disabled and not self._user_speaking:
            # Outside an activity the service discards audio: keep the onset for it.
            self._preroll.keep(pcm)
            return
        try:
            self._send_pcm(pcm)
        except ValueError as error:
            # A frame longer than the input buffer holds: refused whole, never cut.
            await self.push_error(f"{self}: audio frame not sent: {error}", exception=error)

    def _send_pcm(self, pcm: bytes) -> None:
        try:
            self._transport.send_audio(pcm)
        except NotConnectedError as error:
            logger.debug(f"{self}: audio not sent: {error}")

    def _user_started_speaking(self) -> None:
        self._user_speaking = True
        if not self._vad_disabled or self._before_context("activityStart"):
            return
        try:
            self._transport.send_activity_start()
        except NotConnectedError as error:
            logger.debug(f"{self}: activityStart not sent: {error}")
            return
        onset = self._preroll.take()
        if onset:
            self._send_pcm(onset)

    def _user_stopped_speaking(self) -> None:
        self._user_speaking = False
        self._preroll.clear()
        if not self._vad_disabled or self._before_context("activityEnd"):
            return
        try:
            self._transport.send_activity_end()
        except NotConnectedError as error:
            logger.debug(f"{self}: activityEnd not sent: {error}")

    async def _send_image(self, frame: InputImageRawFrame) -> None:
        if self._video_input_paused or self._before_context("an image"):
            return
        try:
            jpeg = self._images.jpeg(frame, asyncio.get_running_loop().time())
        except MalformedInputError as error:
            await self.push_error(f"{self}: image frame not sent: {error}", exception=error)
            return
        if jpeg is None:
            return
        try:
            self._transport.send_file(jpeg, "image/jpeg")
        except NotConnectedError as error:
            logger.debug(f"{self}: image not sent: {error}")

    async def _send_text(self, turns: Sequence[ContentTurn]) -> None:
        if turns and not self._transport.send_live_text(turns):
            logger.warning(f"{self}: text not sent (no session)")

    async def _append_messages(self, frame: LLMMessagesAppendFrame) -> None:
        turns = [
            ContentTurn("user", text)
            for text in (standard_message_text(m) for m in frame.messages)
            if text
        ]
        if not turns:
            return
        if frame.run_llm is False:
            # Context for later, no answer now.
            try:
                self._transport.send_content(turns, turn_complete=False)
            except NotConnectedError as error:
                logger.debug(f"{self}: messages not sent: {error}")
            return
        await self.start_ttfb_metrics()
        await self._send_text(turns)

    async def _set_tools(self, frame: LLMSetToolsFrame) -> None:
        tools = frame.tools
        if isinstance(tools, list):
            tools = ToolsSchema(standard_tools=tools)
        self._sync_registered_tool_handlers(tools if is_given(tools) else None)
        declared = self._declared(tools) if is_given(tools) else []
        self._update_transport(SessionUpdate(tools=declared))

    def _update_transport(self, update: SessionUpdate) -> None:
        """Apply a setup change from a synchronous setter: before the service starts it
        shapes the first setup; after, the session moves to a connection that carries it at
        the next resumable point."""
        if self._frames_task is None:
            self._pending_update = _merged(self._pending_update, update)
        else:
            self.create_task(self._transport.update_session(update), "gemini-live-update")

    def _setup_changing(self) -> None:
        """The settings are about to change: keep them as they are, for a rollback. Once the
        session runs the setup they make (nothing pending), the earlier states are no longer
        a setup the transport can go back to."""
        if not self._transport.pending_setup_change:
            self._before_updates.clear()
        self._before_updates.append(copy.deepcopy(self._settings))

    def _roll_back_settings(self) -> None:
        """The service refused the changed setup and the transport went back to the one that
        worked: so do the settings (``settings`` shows what the model runs with)."""
        restored = settings_map.roll_back(
            self._settings, self._before_updates, self._transport.setup
        )
        self._before_updates.clear()
        if restored:
            logger.info(f"{self}: settings back as the session runs them: {', '.join(restored)}")

    async def _update_settings(self, delta: ServiceSettings) -> dict[str, Any]:
        """Apply a settings delta: instructions, voice, modality and generation settings reach
        the model through a planned move. A delta with a value Gemini cannot take is refused
        whole (a non-fatal ``ErrorFrame``; the session keeps its setup); ``model`` and
        ``language`` stay as the session started (warned once each); the rest is stored
        (warned)."""
        if isinstance(delta, GeminiLiveLLMSettings):
            if isinstance(delta.language, Language):
                delta.language = language_to_gemini_language(delta.language)
            problem = updates.refusal(delta, self._settings)
            if problem is not None:
                await self.push_error(
                    f"{self}: settings update refused, the session keeps its setup: {problem}"
                )
                return {}
            for name, value in updates.fixed_for_the_session(delta, self._settings).items():
                setattr(delta, name, NOT_GIVEN)
                if name not in self._warned_fixed:
                    self._warned_fixed.add(name)
                    logger.warning(
                        f"{self}: {name}={value!r} not applied: "
                        f"{updates.FIXED_FOR_THE_SESSION[name]}"
                    )
        self._setup_changing()
        changed: dict[str, Any] = await super()._update_settings(delta)  # type: ignore[arg-type]
        if not changed:
            return changed
        update = SessionUpdate(
            instructions=(
                assert_given(self._settings.system_instruction)
                if "system_instruction" in changed
                else None
            ),
            voice=assert_given(self._settings.voice) if "voice" in changed else None,
            response_modality=(
                settings_map.response_modality(self._settings) if "modalities" in changed else None
            ),
            generation=(
                settings_map.generation(self._settings)
                if settings_map.GENERATION_FIELDS.intersection(changed)
                else None
            ),
        )
        if update != SessionUpdate():
            await self._transport.update_session(update)
        unhandled = {
            k: v
            for k, v in changed.items()
            if k not in ("system_instruction", "voice", "modalities")
            and k not in settings_map.GENERATION_FIELDS
        }
        if unhandled:
            self._warn_unhandled_updated_settings(unhandled)  # type: ignore[no-untyped-call]
        return changed

    # --- the context --------------------------------------------------------------------------

    async def _context_frame(self, context: LLMContext) -> None:
        first = self._context is None
        self._context = context
        if first:
            await self._seed(context)
        else:
            await self._send_completed_tool_calls(send=True)

    async def _seed(self, context: LLMContext) -> None:
        if not await self._session_ready():
            return
        if self._transport.taken_over:
            # The call goes on from where another process left it: the session holds the
            # conversation and its setup, and a seed now would be answered again.
            logger.info(f"{self}: a call taken over from the session store; not seeded")
            return
        adapter = self.get_llm_adapter()
        params = await adapter.get_llm_invocation_params(
            context,
            system_instruction=self._system_instruction_from_init,
            service_tools=self._tools_from_init,
        )
        instruction = params["system_instruction"]
        tools = params["tools"]
        update = SessionUpdate(
            instructions=(
                instruction if instruction != self._system_instruction_from_init else None
            ),
            tools=(
                self._with_behaviors(list(tools))
                if is_given(context.tools) and is_given(tools)
                else None
            ),
        )
        if update != SessionUpdate():
            # Nothing was said yet: the transport moves to a connection with the new setup
            # now (as the stock service reconnects), and what is sent meanwhile waits for it.
            await self._transport.update_session(update)
        await self._send_completed_tool_calls(send=False)
        if self._frames.answers:
            # The conversation is under way (the first context came with a later turn): the
            # session has it already, and a seed now would be answered again.
            logger.debug(f"{self}: the first context arrived mid-conversation; not seeded")
            return
        messages: list[types.Content] = list(params["messages"])
        if not messages and self._inference_on_context_initialization:
            if not self._system_instruction_from_init:
                logger.warning(
                    f"{self}: no messages in the initial context and no system instruction: "
                    "no initial answer"
                )
                return
            context.add_message(
                {"role": "developer", "content": self._system_instruction_from_init}
            )
            messages = list((await adapter.get_llm_invocation_params(context))["messages"])
        turns = [_content_turn(content) for content in messages]
        self._log_llm_conversation_setup(context)
        await self._send_seed([t for t in turns if t is not None])

    async def _send_seed(self, turns: list[ContentTurn]) -> None:
        if not self._inference_on_context_initialization:
            self._replay(turns)
            return
        if turns and turns[-1].role == "user":
            history, last = turns[:-1], turns[-1]
        else:
            history, last = turns, ContentTurn("user", " ")
        self._replay(history)
        await self.start_ttfb_metrics()
        if self._takes_initial_history:
            # Gemini 3.x answers realtime input only.
            self._transport.send_live_text([last])
        else:
            self._transport.send_content([last], turn_complete=True)

    def _replay(self, turns: list[ContentTurn]) -> None:
        if not turns:
            return
        try:
            self._transport.replay_history([ReplayItem(t.role, text=t.text) for t in turns])
        except TransportError as error:
            logger.warning(f"{self}: conversation history not seeded: {error}")

    # --- tool calls ---------------------------------------------------------------------------

    async def _run_tool_calls(self, calls: Sequence[ToolCall]) -> None:
        if self._context is None:
            logger.error(f"{self}: function calls are not supported without a context object.")
        await self.run_function_calls(
            [
                FunctionCallFromLLM(
                    context=self._context,
                    tool_call_id=call.id,
                    function_name=call.name,
                    arguments=call.args,
                )
                for call in calls
            ]
        )

    def _function_call_result(self, frame: FunctionCallResultFrame) -> None:
        properties = frame.properties
        if properties is not None and not properties.is_final:
            logger.warning(
                f"{self}: one result per function call; the intermediate result for "
                f"{frame.function_name} is dropped"
            )
            return
        run_llm = properties.run_llm if properties is not None else None
        if run_llm is None:
            run_llm = frame.run_llm if frame.run_llm is not None else True
        result = json.dumps(frame.result, ensure_ascii=False) if frame.result else "COMPLETED"
        scheduling: ToolResultScheduling | None = None
        if self._supports_non_blocking_tools and self._function_is_async(frame.function_name):
            scheduling = "when_idle" if run_llm else "silent"
        self._send_tool_result(
            frame.tool_call_id,
            frame.function_name,
            GeminiLiveLLMAdapter.to_function_response_dict(result),
            scheduling,
        )

    def _send_tool_result(
        self,
        call_id: str,
        name: str,
        response: dict[str, Any],
        scheduling: ToolResultScheduling | None = None,
    ) -> None:
        self._completed_tool_calls.add(call_id)
        try:
            self._transport.send_tool_result(ToolResult(call_id, name, response, scheduling))
        except ToolCallOrphanedError:
            # Documented outcome: the answer that waited for it already ended as
            # tool_call_orphaned, and the model may ask again.
            logger.warning(
                f"{self}: result of {name} ({call_id}) not sent: a move left its session behind"
            )
        except UnknownToolCallError as error:
            logger.warning(f"{self}: result of {name} not sent: {error}")
        except NotConnectedError as error:
            logger.debug(f"{self}: result of {name} not sent: {error}")

    async def _send_completed_tool_calls(self, *, send: bool) -> None:
        """Results found in the context that were not sent yet (``send=False``: only note
        them, for the context a session starts with)."""
        assert self._context is not None
        names: dict[str, str] = {}
        for message in self._context.get_messages():
            if isinstance(message, LLMSpecificMessage):
                continue
            msg = cast(dict[str, Any], message)
            for call in msg.get("tool_calls") or ():
                names[call["id"]] = call["function"]["name"]
            payload = async_tool_messages.parse_message(message)
            if payload is not None:
                if (
                    payload.kind == "final"
                    and payload.tool_call_id not in self._completed_tool_calls
                ):
                    self._completed_tool_calls.add(payload.tool_call_id)
                    if send:
                        self._send_tool_result(
                            payload.tool_call_id,
                            names.get(payload.tool_call_id, "tool_call_result"),
                            GeminiLiveLLMAdapter.to_function_response_dict(payload.result),
                        )
                continue
            call_id = msg.get("tool_call_id")
            if (
                msg.get("role") == "tool"
                and msg.get("content") != "IN_PROGRESS"
                and call_id
                and call_id not in self._completed_tool_calls
            ):
                self._completed_tool_calls.add(call_id)
                if send:
                    self._send_tool_result(
                        call_id,
                        names.get(call_id, "tool_call_result"),
                        GeminiLiveLLMAdapter.to_function_response_dict(msg.get("content")),
                    )

    # --- tracing ------------------------------------------------------------------------------

    def _conversation_span(self) -> Context | None:
        """The pipeline's conversation span (``PipelineWorker(enable_tracing=True)``), as
        Pipecat's own services find it; None without tracing or before the conversation."""
        tracing = self._tracing_context
        return tracing.get_conversation_context() if tracing is not None else None

    def _turn_span(self) -> Context | None:
        """The pipeline's current turn span, else its conversation span."""
        tracing = self._tracing_context
        if tracing is None:
            return None
        turn: Context | None = tracing.get_turn_context()
        return turn if turn is not None else tracing.get_conversation_context()

    # --- model facts ----------------------------------------------------------------------------

    @property
    def _gemini_version(self) -> tuple[int, int] | None:
        return model_version(assert_given(self._settings.model) or "")

    def _declared(self, tools: Any) -> list[Any]:
        """``tools`` (a ``ToolsSchema`` or the provider's dicts) as Gemini declares them,
        with each function's behavior (``_with_behaviors``)."""
        return self._with_behaviors(list(self.get_llm_adapter().from_standard_tools(tools) or []))

    def _with_behaviors(self, tools: list[Any]) -> list[Any]:
        """``tools`` with each function's ``behavior`` as the stock service sets it: a
        function registered with ``cancel_on_interruption=False`` is ``NON_BLOCKING`` (the
        model talks on while it runs; its result then carries a scheduling), and where that
        is the model's default (3.8) the others are declared ``BLOCKING``. Nothing is set on
        a model that takes no non-blocking calls."""
        if not self._supports_non_blocking_tools:
            return tools
        default_non_blocking = self._transport.model_traits.non_blocking_calls
        out: list[Any] = []
        for tool in tools:
            declarations = tool.get("function_declarations") if isinstance(tool, dict) else None
            if not isinstance(declarations, list):
                out.append(tool)
                continue
            tagged = []
            for declaration in declarations:
                name = declaration.get("name") if isinstance(declaration, dict) else None
                if isinstance(name, str) and self._function_is_async(name):
                    declaration = {**declaration, "behavior": "NON_BLOCKING"}
                elif isinstance(name, str) and default_non_blocking:
                    declaration = {**declaration, "behavior": "BLOCKING"}
                tagged.append(declaration)
            out.append({**tool, "function_declarations": tagged})
        return out

    @property
    def _supports_non_blocking_tools(self) -> bool:
        version = self._gemini_version
        return version is None or version < (3, 0) or version >= (3, 8)

    # --- ending ---------------------------------------------------------------------------------

    async def _answer_ended(self) -> None:
        if self._held_end is not None:
            await self._release_end()

    async def _release_end_later(self) -> None:
        await asyncio.sleep(END_FRAME_HOLD)
        logger.warning(f"{self}: the answer did not finish in {END_FRAME_HOLD}s; ending anyway")
        self._end_hold_task = None
        await self._release_end()

    async def _release_end(self) -> None:
        frame, self._held_end = self._held_end, None
        if self._end_hold_task is not None and self._end_hold_task is not asyncio.current_task():
            await self.cancel_task(self._end_hold_task)
        self._end_hold_task = None
        if frame is not None:
            await self.queue_frame(frame)


def _http_options(options: types.HttpOptions | None) -> types.HttpOptions:
    """``options`` with Pipecat's client header, as the stock service sends it."""
    updated = update_google_client_http_options(options)
    if isinstance(updated, dict):
        return types.HttpOptions(**updated)
    return cast(types.HttpOptions, updated)


def _content_turn(content: types.Content) -> ContentTurn | None:
    """A seed turn from the adapter's content: its text parts (media parts are not seeded)."""
    text = "".join(part.text for part in content.parts or () if part.text)
    if not text:
        return None
    return ContentTurn("model" if content.role == "model" else "user", text)


def _merged(first: SessionUpdate | None, then: SessionUpdate) -> SessionUpdate:
    """One update with the effect of ``first`` followed by ``then``."""
    if first is None:
        return then
    changes = {k: v for k, v in vars(then).items() if v is not None}
    return dataclasses.replace(first, **changes)
