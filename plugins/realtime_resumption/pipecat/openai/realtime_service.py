"""``OpenAIRealtimeLLMService`` and ``AzureRealtimeLLMService``: the stock Pipecat services'
drop-ins, on ``OpenAIRealtimeTransport``.

They are the stock classes (pipecat-ai 1.14) with the wire replaced: the constructor, the
settings, the adapter, the context handling, function calling and interruptions are stock's;
every client event stock would write goes to the transport's calls instead
(:meth:`send_client_event`), and the transport's callbacks come back as frames through the
same translator the Gemini service uses (``ResponseFrames``), with the package's frames
(``SessionMovingFrame``/``SessionMovedFrame``, the generation lifecycle) among them. So a
session lost to a drop or the service's cap is moved to a new one given the conversation, and
the pipeline sees the move only as those frames.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import time
from collections.abc import Sequence
from typing import Any, Final, cast
from urllib.parse import parse_qs, urlsplit, urlunsplit

import openai
from loguru import logger
from pipecat.frames.frames import (
    FunctionCallFromLLM,
    InputAudioRawFrame,
    ProposedUserStartedSpeakingFrame,
    ProposedUserStoppedSpeakingFrame,
)
from pipecat.metrics.metrics import LLMTokenUsage
from pipecat.services.azure.realtime.llm import AzureRealtimeLLMService as _StockAzure
from pipecat.services.openai.realtime import events
from pipecat.services.openai.realtime.llm import OpenAIRealtimeLLMService as _StockOpenAI
from pipecat.services.openai.realtime.llm import OpenAIRealtimeLLMSettings
from pipecat.utils.types import assert_given

from realtime_resumption.openai import (
    AZURE_CAP,
    OpenAIRealtimeOptions,
    OpenAIRealtimeTransport,
    SessionConfig,
)
from realtime_resumption.pipecat.gemini.output import ResponseFrames
from realtime_resumption.pipecat.openai.stock_members import (
    missing_methods,
    missing_state,
    refuse_if_missing,
)
from realtime_resumption.store import SessionStore, StoreError, StoreOptions
from realtime_resumption.transport import (
    CancelResponseOptions,
    ContentTurn,
    RealtimeLLMUsage,
    SessionUpdate,
    ToolCall,
    ToolResult,
    TransportError,
)

PCM_RATE: Final = 24_000
"""The session's PCM16 input rate, to which stock resamples any other (its
``OPENAI_SAMPLE_RATE``)."""
FRAMES_DRAIN_TIMEOUT: Final = 2.0
"""Seconds the frames of the last callbacks get to be pushed when the pipeline ends."""

refuse_if_missing(missing_methods(_StockOpenAI))


class OpenAIRealtimeLLMService(_StockOpenAI):  # type: ignore[misc]
    """OpenAI Realtime as a Pipecat realtime service whose call outlives its session.

    The stock ``pipecat.services.openai.realtime.llm.OpenAIRealtimeLLMService`` constructor
    (same keywords, defaults and ``Settings``), plus ``options``: how the transport dials and
    when it moves (:class:`~realtime_resumption.openai.OpenAIRealtimeOptions`; its ``model``
    is the settings' model), and ``store``/``session_key``/``store_options``: the call kept in
    a ``SessionStore`` under ``session_key`` (the app's id of the call), so a pipeline in
    another process that connects with the same key takes the call over (see
    ``OpenAIRealtimeTransport``).
    """

    _settings: OpenAIRealtimeLLMSettings

    def __init__(
        self,
        *,
        options: OpenAIRealtimeOptions | None = None,
        store: SessionStore | None = None,
        session_key: str | None = None,
        store_options: StoreOptions | None = None,
        **kwargs: Any,
    ) -> None:
        if options is not None and not isinstance(options, OpenAIRealtimeOptions):
            raise TypeError(f"options must be OpenAIRealtimeOptions, not {type(options).__name__}")
        if store is not None and session_key is None:
            raise ValueError("a store needs a session_key: the call's key in it")
        super().__init__(**kwargs)
        refuse_if_missing(missing_state(self))
        self._options = options or OpenAIRealtimeOptions()
        self._store = store
        self._session_key = session_key
        self._store_options = store_options
        self._transport: OpenAIRealtimeTransport | None = None
        self._frames: ResponseFrames | None = None
        self._frames_task: asyncio.Task[None] | None = None
        self._tool_names: dict[str, str] = {}
        """Open function calls: call id to name (a result is sent with its call's name)."""
        self._playback_started: float | None = None
        """When the audio of the answer playing now began (``time.monotonic()``), until the
        bot stopped speaking: stock's start of playback, for the cut at an interruption."""

    @property
    def transport(self) -> OpenAIRealtimeTransport | None:
        """The transport while the service runs (its ``move_log`` has the moves)."""
        return self._transport

    # --- the connection -----------------------------------------------------------------------

    def _client(self) -> openai.AsyncOpenAI:
        """The SDK's client for ``base_url``: its path without ``/realtime`` is the SDK's
        ``websocket_base_url`` (the SDK appends it and ``?model=``). The headers stock would
        send are asked for at each dial (``dial_headers``): a token provider's token expires
        within a long call."""
        parts = urlsplit(self.base_url)
        path = parts.path.rstrip("/").removesuffix("/realtime")
        base = urlunsplit((parts.scheme, parts.netloc, path, "", ""))
        return openai.AsyncOpenAI(api_key=self.api_key or "unused", websocket_base_url=base)

    def _dial_model(self) -> str:
        query = parse_qs(urlsplit(self.base_url).query)
        if "model" in query:
            return query["model"][0]
        return str(assert_given(self._settings.model))

    def _session_config(self, session: events.SessionProperties) -> SessionConfig:
        """The transport's configuration for what stock would send: a setting stock leaves
        out is the service's default, so an absent turn detection is server VAD (``False``
        turns it off, as with stock)."""
        wire = session.model_dump(exclude_none=True)
        audio_in = wire.setdefault("audio", {}).setdefault("input", {})
        detection = audio_in.get("turn_detection")
        if detection is False:
            del audio_in["turn_detection"]
        elif detection is None:
            audio_in["turn_detection"] = {"type": "server_vad"}
        return SessionConfig.from_session(wire, "ga")

    async def _outgoing_session(self) -> events.SessionProperties:
        """The session stock's ``session.update`` would carry (the adapter settles the
        instructions and tools, as stock)."""
        settings = assert_given(self._settings.session_properties).model_copy()
        adapter = self.get_llm_adapter()
        if self._context:
            params = await adapter.get_llm_invocation_params(
                self._context,
                system_instruction=assert_given(self._settings.system_instruction),
                service_tools=settings.tools,
            )
            if params["system_instruction"]:
                settings.instructions = params["system_instruction"]
            settings.tools = cast(list[Any], params["tools"])
        else:
            settings.tools = cast(list[Any], adapter.from_standard_tools(settings.tools))
        outgoing: events.SessionProperties = self._strip_unsupported_reasoning(settings)
        return outgoing

    async def _connect(self) -> None:
        if self._transport is not None:
            return
        options = dataclasses.replace(
            self._options, model=self._dial_model(), dial_headers=self._auth_headers
        )
        try:
            config = self._session_config(await self._outgoing_session())
            transport = OpenAIRealtimeTransport(
                self._client(),
                config,
                options,
                store=self._store,
                session_key=self._session_key,
                store_options=self._store_options,
            )
        except (TypeError, ValueError) as exc:
            await self.push_error(error_msg=f"OpenAI Realtime: bad settings: {exc}", exception=exc)
            return
        frames = ResponseFrames(
            self,
            on_tool_calls=self._tool_calls,
            on_answer_end=self._answer_ended,
            model=lambda: options.model,
            provider="OpenAI Realtime",
        )
        frames.bind(transport)
        transport.on_realtime_llm_usage = frames.in_turn(self._usage)
        transport.on_speech_started = frames.in_turn(self._speech_started)
        transport.on_user_speech_stopped = frames.in_turn(self._speech_stopped)
        transport.on_first_audio_chunk = self._first_audio
        self._frames = frames
        self._frames_task = self.create_task(frames.run(), name="openai_realtime_frames")
        try:
            await transport.connect()
        except (TransportError, StoreError) as exc:
            # A store's error (another process holds the call's lease) ends the call here too.
            await self.push_error(error_msg=f"Error connecting: {exc}", exception=exc)
            await transport.disconnect()
            await self._stop_frames()
            return
        self._transport = transport
        self._api_session_ready = True
        if self._run_llm_when_api_session_ready:
            self._run_llm_when_api_session_ready = False
            await self._create_response()

    async def _disconnect(self) -> None:
        self._api_session_ready = False
        await self.stop_all_metrics()  # type: ignore[no-untyped-call]
        transport, self._transport = self._transport, None
        if transport is not None:
            await transport.disconnect()
        await self._stop_frames()
        self._completed_tool_calls = set()
        self._open_function_calls = set()
        self._tool_names.clear()
        self._response_active = False
        self._response_create_owed = False

    async def _stop_frames(self) -> None:
        frames, task = self._frames, self._frames_task
        self._frames = self._frames_task = None
        if frames is None:
            return
        if task is not None:
            # The frames of what the session said last.
            frames.finish()
            await asyncio.wait({task}, timeout=FRAMES_DRAIN_TIMEOUT)
            await self.cancel_task(task)
        frames.close()

    # --- client events to transport calls -----------------------------------------------------

    async def send_client_event(self, event: events.ClientEvent) -> None:
        """What stock would send, given to the transport (which holds it through a move)."""
        transport = self._transport
        if transport is None:
            logger.debug(f"{self}: no session; {type(event).__name__} not sent")
            return
        try:
            await self._send(transport, event)
        except TransportError as exc:
            await self.push_error(error_msg=f"Send error: {exc}", exception=exc)

    async def _send_user_audio(self, frame: InputAudioRawFrame) -> None:
        """Stock's, with 24 kHz audio handed to the transport as it is: stock encodes every
        chunk into a client event's base64 that :meth:`_send` would only decode again. Audio
        to resample, and the pre-roll stock keeps while turn detection is off, take stock's
        path."""
        transport = self._transport
        if transport is None or frame.sample_rate != PCM_RATE or self._is_turn_detection_disabled():
            await super()._send_user_audio(frame)  # type: ignore[no-untyped-call]
            return
        if not frame.audio:
            return
        try:
            transport.send_audio(frame.audio)
        except TransportError as exc:
            await self.push_error(error_msg=f"Send error: {exc}", exception=exc)

    async def _send(self, transport: OpenAIRealtimeTransport, event: events.ClientEvent) -> None:
        if isinstance(event, events.InputAudioBufferAppendEvent):
            transport.send_audio(base64.b64decode(event.audio))
        elif isinstance(event, events.InputAudioBufferCommitEvent):
            transport.commit_audio()
        elif isinstance(event, events.InputAudioBufferClearEvent):
            transport.clear_audio()
        elif isinstance(event, events.ResponseCancelEvent):
            await transport.cancel_response(CancelResponseOptions(truncate=False))
        elif isinstance(event, events.ConversationItemTruncateEvent):
            # The cut at an interruption is ``_truncate_current_audio_response``'s: the
            # transport knows the answer's item and the audio it received.
            logger.debug(f"{self}: truncation is the transport's")
        elif isinstance(event, events.SessionUpdateEvent):
            await self._update_session(transport, event.session)
        elif isinstance(event, events.ConversationItemCreateEvent):
            self._create_item(transport, event.item)
        elif isinstance(event, events.ResponseCreateEvent):
            transport.trigger_generation()
        else:
            logger.warning(
                f"{self}: {type(event).__name__} is not carried by the transport; not sent"
            )

    async def _update_session(
        self, transport: OpenAIRealtimeTransport, session: events.SessionProperties
    ) -> None:
        config = self._session_config(session)
        await transport.update_session(
            SessionUpdate(instructions=config.instructions, tools=config.tools, voice=config.voice)
        )

    def _create_item(
        self, transport: OpenAIRealtimeTransport, item: events.ConversationItem
    ) -> None:
        if item.type == "function_call_output":
            call_id = item.call_id or ""
            if call_id not in self._tool_names:
                # A result the first context brings, of a call no session of this service
                # made: the transport takes results of its own calls only.
                logger.warning(f"{self}: the result of call {call_id!r} is not replayed")
                return
            name = self._tool_names.pop(call_id)
            transport.send_tool_result(
                ToolResult(call_id, name, _response(item.output), scheduling="silent")
            )
            return
        if item.type != "message":
            logger.warning(f"{self}: a {item.type} item is not carried by the transport")
            return
        for part in item.content or ():
            if part.type == "input_image" and part.image_url:
                header, _, data = part.image_url.partition(",")
                mime = header.removeprefix("data:").removesuffix(";base64")
                transport.send_file(base64.b64decode(data), mime)
        text = "".join(part.text or "" for part in item.content or () if part.text)
        if text:
            turn = ContentTurn("model" if item.role == "assistant" else "user", text)
            transport.send_content([turn], turn_complete=False)

    async def _create_response(self) -> None:
        """Stock's response request, without its ``LLMFullResponseStartFrame``: the answer's
        Start/End pair follows the transport's generation (``ResponseFrames``)."""
        if not self._api_session_ready:
            self._run_llm_when_api_session_ready = True
            return
        if self._response_active:
            self._response_create_owed = True
            return
        assert self._context is not None
        if self._llm_needs_conversation_setup and self._taken_over():
            # The call goes on from where another process left it: the session holds the
            # conversation and its setup, and a seed now would be answered again. A result
            # of a function the stored call had open still asks for its answer.
            logger.info(f"{self}: a call taken over from the session store; not seeded")
            self._llm_needs_conversation_setup = False
            if not self._results_awaiting_response:
                return
        if self._llm_needs_conversation_setup:
            self._log_llm_conversation_setup(self._context)
            adapter = self.get_llm_adapter()
            params = await adapter.get_llm_invocation_params(self._context)
            for item in params["messages"]:
                await self.send_client_event(events.ConversationItemCreateEvent(item=item))
            await self._send_session_update()  # type: ignore[no-untyped-call]
            self._llm_needs_conversation_setup = False
        self._response_active = True
        # Stock clears it at ``response.created``; the request is where this service knows
        # the response takes in every result delivered before it.
        self._results_awaiting_response = False
        await self.start_processing_metrics()
        await self.start_ttfb_metrics()
        await self.send_client_event(events.ResponseCreateEvent())

    def _taken_over(self) -> bool:
        return self._transport is not None and self._transport.taken_over

    # --- transport callbacks ------------------------------------------------------------------

    async def _tool_calls(self, calls: Sequence[ToolCall]) -> None:
        for call in calls:
            self._tool_names[call.id] = call.name
            self._open_function_calls.add(call.id)
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

    async def _answer_ended(self) -> None:
        await self.stop_processing_metrics()
        self._response_active = False
        if self._response_create_owed:
            self._response_create_owed = False
            if self._results_awaiting_response:
                await self._create_response()

    async def _usage(self, usage: RealtimeLLMUsage) -> None:
        if self._frames is not None and usage.kind == "response" and usage.phase == "final":
            await self._frames.report_tokens(token_usage(usage))

    async def _speech_started(self) -> None:
        # As stock on ``input_audio_buffer.speech_started``: the pipeline's user-turn
        # strategy decides; an answer owed is moot.
        self._response_create_owed = False
        await self.broadcast_frame(ProposedUserStartedSpeakingFrame)

    async def _speech_stopped(self) -> None:
        await self.start_ttfb_metrics()
        await self.start_processing_metrics()
        await self.broadcast_frame(ProposedUserStoppedSpeakingFrame)

    def _first_audio(self) -> None:
        if self._playback_started is None:
            self._playback_started = time.monotonic()

    async def _truncate_current_audio_response(self) -> None:
        """Stock's cut at an interruption: the answer playing is cut at the time since its
        first audio (the transport keeps it within the audio received), so the conversation
        holds what the user heard."""
        started, self._playback_started = self._playback_started, None
        if started is not None and self._transport is not None:
            self._transport.truncate_answer(time.monotonic() - started)

    async def _handle_bot_stopped_speaking(self) -> None:
        self._playback_started = None  # played whole: nothing to cut

    async def _handle_interruption(self) -> None:
        await super()._handle_interruption()  # type: ignore[no-untyped-call]
        if self._frames is not None:
            # The bot's audio stops now, as stock's; the pair ends with the generation.
            await self._frames.interrupted_locally()


class AzureRealtimeLLMService(OpenAIRealtimeLLMService, _StockAzure):  # type: ignore[misc]
    """Azure OpenAI Realtime (the v1 surface) as the stock ``pipecat.services.azure.realtime.
    llm.AzureRealtimeLLMService``'s drop-in: its constructor (``base_url``, ``api_key`` or
    ``token_provider``), plus ``options`` and the store's keywords. Sessions move before
    Azure's 30-minute cap unless ``options.session_cap`` says otherwise."""

    def __init__(self, *, options: OpenAIRealtimeOptions | None = None, **kwargs: Any) -> None:
        if options is None or options.session_cap == "service":
            options = dataclasses.replace(options or OpenAIRealtimeOptions(), session_cap=AZURE_CAP)
        super().__init__(options=options, **kwargs)


def _response(output: str | None) -> dict[str, Any]:
    """A function call's output as the transport's ``ToolResult.response``: the JSON object
    stock would send, or the value under ``result``."""
    if output is None:
        return {}
    try:
        value = json.loads(output)
    except ValueError:
        return {"result": output}
    return value if isinstance(value, dict) else {"result": value}


def token_usage(usage: RealtimeLLMUsage) -> LLMTokenUsage:
    """Pipecat's token usage from an answer's usage, as stock reads ``response.done``."""
    raw = usage.provider_raw
    inputs = raw.get("input_token_details") or {}
    outputs = raw.get("output_token_details") or {}
    cached = inputs.get("cached_tokens_details") or {}
    return LLMTokenUsage(
        prompt_tokens=usage.input_tokens or 0,
        completion_tokens=usage.output_tokens or 0,
        total_tokens=usage.total_tokens or 0,
        cache_read_input_tokens=inputs.get("cached_tokens"),
        input_audio_tokens=inputs.get("audio_tokens"),
        output_audio_tokens=outputs.get("audio_tokens"),
        cache_read_input_audio_tokens=cached.get("audio_tokens"),
    )
