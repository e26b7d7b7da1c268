"""``Sends``: every message the app sends to the session, checked and queued in one path.

The transport's ``send_*``, ``replay_*`` and ``trigger_generation`` come here (their
documentation is the transport's). Every client message goes through :meth:`Sends._send`:
it counts it, refuses with an error what no session can take (the transport's
``Lifecycle`` says whether one can), and queues it in the ``InputPath``, to be written at
once or held during a move. The user's turns are reported to the rotation (a move waits
for the answer) and to the generation tracker; what a rebuild needs goes to the history.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Final

from google.genai import types
from loguru import logger

from realtime_resumption.gemini import validation
from realtime_resumption.gemini.input_path import InputPath
from realtime_resumption.gemini.live_options import LiveOptions
from realtime_resumption.gemini.messages import ClientMessage, context_updates_supported
from realtime_resumption.gemini.rotation import Rotation
from realtime_resumption.gemini.state import TransportState
from realtime_resumption.gemini.transport_phase import Lifecycle
from realtime_resumption.gemini.watchdog import UserTurnRetainer, is_speech
from realtime_resumption.generation import GenerationTracker
from realtime_resumption.history import ConversationHistory
from realtime_resumption.outbox import ReplayScope
from realtime_resumption.tool_calls import ToolCallTracker
from realtime_resumption.transport import (
    ContentTurn,
    GenerationOverrides,
    MessageTooLargeError,
    NotConnectedError,
    ReplayItem,
    RetainedUserTurn,
    ToolResult,
    TransportError,
)

INPUT_SAMPLE_RATE: Final = 16_000
"""The one input rate Gemini Live takes (PCM16 mono)."""


class Sends:
    """The one send path of a transport's session (see the module documentation)."""

    def __init__(
        self,
        session: TransportState,
        lifecycle: Lifecycle,
        rotation: Rotation,
        *,
        input_path: InputPath,
        tools: ToolCallTracker,
        tracker: GenerationTracker,
        history: ConversationHistory,
        retained_turn: UserTurnRetainer,
        describe: str,
    ) -> None:
        self._s = session
        self._life = lifecycle
        self._rotation = rotation
        self._input = input_path
        self._tools = tools
        self._tracker = tracker
        self._history = history
        self._retained_turn = retained_turn
        self._without_id = session.without_id
        self._describe = describe
        self._realtime_sent = False
        """The session had realtime input (Gemini 3.x takes history only before it)."""

    def __repr__(self) -> str:
        return self._describe

    @property
    def _active(self) -> bool:
        return self._s.active

    @property
    def _options(self) -> LiveOptions:
        return self._s.options

    def _now(self) -> float:
        return self._s.now()

    def new_session(self) -> None:
        """A session begins: it has had no realtime input yet."""
        self._realtime_sent = False

    def _send(self, message: ClientMessage, scope: ReplayScope = ReplayScope.SESSION) -> None:
        """Queue ``message`` for the session: written at once to the current connection, or
        held during a move. The one send path: it counts every message and refuses, with an
        error, what no session can take. ``scope``: which later connections may get it
        again."""
        self._submit(message, scope)
        self._s.feed()

    def _submit(self, message: ClientMessage, scope: ReplayScope = ReplayScope.SESSION) -> None:
        """Queue ``message`` without handing it to a connection yet (see :meth:`_send`)."""
        if not self._life.takes_input(self._active):
            raise self._input.refuse(
                message.kind,
                NotConnectedError(
                    f"{self} is disconnected" if self._life.closed else f"{self} is not connected"
                ),
            )
        try:
            validation.fits(message, f"a {message.kind} message")
        except MessageTooLargeError as error:
            raise self._input.refuse(message.kind, error) from None
        if message.kind not in ("content", "tool_response", "context_update"):
            self._realtime_sent = True
        if self._life.hold(message, scope):
            return
        self._input.submit(message, self._now(), scope)

    def _client_turn(self, text: str | None) -> None:
        """The client sent a complete user turn (``text`` when it was text)."""
        # An answer in its grace window ends here, before anything the new turn brings: its
        # end is delivered now (deferred, a tool call already on its way could be delivered
        # first, in a generation opened after this one ended).
        self._s.apply_and_schedule(self._tracker.user_turn(self._now()))
        if text:
            self._history.user_text(text)
            self._retained_turn.text(text)
        self._rotation.turn_started()
        self._rotation.user_turn()

    def send_audio(
        self, audio: bytes, *, sample_rate: int = INPUT_SAMPLE_RATE, channels: int = 1
    ) -> None:
        """``GeminiLiveTransport.send_audio``."""
        if sample_rate != INPUT_SAMPLE_RATE or channels != 1:
            raise ValueError(
                f"Gemini Live takes 16 kHz mono PCM16; got {sample_rate} Hz, {channels} "
                "channel(s): resample and downmix before sending"
            )
        pcm = validation.pcm16(audio)
        if pcm:
            # Queued first (refused there if the input bounds cannot hold it), handed to the
            # connection after the move has had its say: speech during a move waits for
            # the new connection.
            self._submit(ClientMessage.audio(pcm))
            if self._rotation.moving and is_speech(pcm):
                self._rotation.turn_during_move()
            self._s.feed()
            self._retained_turn.audio(pcm)
            # Speech counts as the user's turn while a resumed connection has not answered
            # (the watchdog), or the connection a move installed has heard nothing yet.
            if (self._rotation.watching or self._rotation.quiet) and is_speech(pcm):
                self._rotation.user_turn()

    def commit_audio(self) -> None:
        """``GeminiLiveTransport.commit_audio``."""
        self._send(ClientMessage.audio_stream_end())
        self._rotation.user_turn()

    def send_activity_start(self) -> None:
        """``GeminiLiveTransport.send_activity_start``."""
        if self._rotation.moving:
            self._rotation.turn_during_move()
        self._send(ClientMessage.activity_start())
        self._s.apply_and_schedule(self._tracker.user_turn(self._now()))
        self._rotation.user_turn()

    def send_activity_end(self) -> None:
        """``GeminiLiveTransport.send_activity_end``."""
        self._send(ClientMessage.activity_end())
        self._rotation.user_turn()

    def send_content(self, turns: Sequence[ContentTurn], turn_complete: bool = True) -> None:
        """``GeminiLiveTransport.send_content``."""
        turns = validation.turns(turns, "send_content")
        contents = tuple(
            types.Content(role=turn.role, parts=[types.Part(text=turn.text)]) for turn in turns
        )
        if not contents:
            raise ValueError("no turns to send: Gemini rejects a content-less request")
        self._send(ClientMessage.content(contents, turn_complete))
        text = "\n".join(turn.text for turn in turns if turn.role == "user" and turn.text)
        if turn_complete:
            self._client_turn(text)
        elif text:
            self._history.user_text(text)

    def send_live_text(self, turns: Sequence[ContentTurn]) -> bool:
        """``GeminiLiveTransport.send_live_text``."""
        try:
            turns = validation.turns(turns, "send_live_text")
        except (TypeError, ValueError) as error:
            logger.warning("{}: live text not sent: {}", self, error)
            return False
        texts = [turn for turn in turns if turn.text]
        if not texts:
            return False
        if len(texts) == 1:
            text = texts[0].text
        else:
            text = "\n".join(f"{turn.role}: {turn.text}" for turn in texts)
        try:
            self._send(ClientMessage.text(text))
        except MessageTooLargeError as error:
            logger.warning("{}: live text not sent: {}", self, error)
            return False
        except TransportError as error:
            logger.debug("{}: live text not sent: {}", self, error)
            return False
        self._client_turn(text)
        return True

    def send_file(self, data: bytes, mime_type: str) -> None:
        """``GeminiLiveTransport.send_file``."""
        data = validation.data(data, "send_file")
        major = validation.mime_type(mime_type, "send_file").split("/", 1)[0].lower()
        if major in ("image", "video"):
            self._send(ClientMessage.media("video", data, mime_type))
        elif major == "audio":
            self._send(ClientMessage.media("audio", data, mime_type))
        else:
            raise ValueError(
                f"realtime input takes images, video and audio, not {mime_type!r}: "
                "use send_inline_file"
            )

    def send_inline_file(self, data: bytes, mime_type: str) -> None:
        """``GeminiLiveTransport.send_inline_file``."""
        data = validation.data(data, "send_inline_file")
        mime_type = validation.mime_type(mime_type, "send_inline_file")
        part = types.Part(inline_data=types.Blob(data=data, mime_type=mime_type))
        self._send(ClientMessage.content((types.Content(role="user", parts=[part]),), False))

    def send_tool_result(self, result: ToolResult) -> None:
        """``GeminiLiveTransport.send_tool_result``."""
        result = validation.tool_result(result)
        plain, size = validation.tool_response(result.response)
        result = replace(result, response=plain)
        message = ClientMessage.tool_result(result, size, with_id=result.id not in self._without_id)
        try:
            validation.fits(message, "send_tool_result")
        except MessageTooLargeError as error:
            raise self._input.refuse("tool_response", error) from None
        if not self._active or self._life.handed_over:
            raise self._input.refuse("tool_response", NotConnectedError(f"{self} is not connected"))
        try:
            if not self._tools.admit_result(result.id):
                return
        except TransportError as error:
            raise self._input.refuse("tool_response", error) from None
        self._input.submit_result(message, result, self._now())
        self._s.feed()

    def trigger_generation(
        self, instructions: str | None = None, overrides: GenerationOverrides | None = None
    ) -> None:
        """``GeminiLiveTransport.trigger_generation``."""
        validation.generation_overrides(overrides)
        if instructions:
            self.send_content([ContentTurn("user", instructions)], turn_complete=True)
        else:
            logger.debug("{}: trigger_generation without instructions sends nothing", self)

    def replay_history(self, items: Sequence[ReplayItem]) -> None:
        """``GeminiLiveTransport.replay_history``."""
        items = validation.replay_items(items)
        message = ClientMessage.history(items)
        if message is None:
            return
        if (
            self._life.takes_input(self._active)
            and self._options.initial_history_in_client_content
            and not self._s.traits.mid_session_client_content
            and self._realtime_sent
        ):
            raise TransportError(
                "Gemini 3.x takes history only before the connection's first realtime input"
            )
        # A rebuilt session is seeded with these items again, so only a resumed one that
        # lacks them gets this message replayed.
        self._send(message, ReplayScope.RESUMED)
        self._s.seeded += tuple(items)

    def replay_user_turn(self, turn: RetainedUserTurn) -> bool:
        """``GeminiLiveTransport.replay_user_turn``."""
        if not turn.pcm:
            return False
        part = types.Part(
            inline_data=types.Blob(data=turn.pcm, mime_type=f"audio/pcm;rate={turn.sample_rate}")
        )
        try:
            # It restates audio the session log holds: never replayed to a later connection.
            self._send(
                ClientMessage.content((types.Content(role="user", parts=[part]),), True),
                ReplayScope.CONNECTION,
            )
        except TransportError as error:
            logger.debug("{}: retained turn not replayed: {}", self, error)
            return False
        self._client_turn(None)
        return True

    def replay_retained_turn(self) -> bool:
        """Re-send the user's unanswered turn (resume watchdog); False when there is none."""
        text = self._retained_turn.text_turn
        if text is not None:
            self._send(ClientMessage.content((_user_content(text),), True), ReplayScope.CONNECTION)
            return True
        turn = self._retained_turn.audio_turn(self._now())
        return turn is not None and self.replay_user_turn(turn)

    def update_in_session(self, options: LiveOptions) -> bool:
        """Send the change to ``options`` to the live connection as a context update, where
        that is all it takes (see ``update_session``); False, having sent nothing, where a
        new connection must carry it."""
        working = self._s.working
        if (
            not self._s.traits.in_session_updates
            or not self._active
            or self._life.handed_over
            or working is None
            or self._s.setup_stale
            or self._s.current is None
            or self._rotation.moving
        ):
            return False
        instruction = options.system_instruction
        new_instruction = instruction != working.system_instruction
        new_tools = options.tools != working.tools
        unchanged = replace(
            options, system_instruction=working.system_instruction, tools=working.tools
        )
        if unchanged != working or not (new_instruction or new_tools):
            return False
        if new_instruction and instruction is None:
            return False  # a context update sets an instruction; it cannot remove one
        if not context_updates_supported():
            logger.info(
                "{}: this google-genai cannot send a setup change in the session; "
                "the session moves to a connection set up with it",
                self,
            )
            return False
        message = ClientMessage.context_update(
            instruction if new_instruction else None, options.tools if new_tools else None
        )
        # Later connections are set up with the change: it is never replayed to them.
        self._send(message, ReplayScope.CONNECTION)
        self._s.update_in_session(options)
        logger.info("{}: session update sent in the session", self)
        return True


def _user_content(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])
