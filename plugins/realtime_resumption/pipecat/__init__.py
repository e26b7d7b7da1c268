"""Pipecat services on ``GeminiLiveTransport``: Gemini Live that survives connection rotation.

Change one import and nothing else in the pipeline::

    from pipecat.services.google.gemini_live.llm import GeminiLiveLLMService   # before
    from realtime_resumption.pipecat import GeminiLiveLLMService                # after

The shape: resumption and the generation lifecycle are pipeline processors that translate
framework frames into transport calls and transport callbacks into frames; the resumption
helper sits between the LLM service and the connection, inside the transport. The whole
translation:

=====================================  ==================================================
Frame in                               Transport call
=====================================  ==================================================
StartFrame                             ``connect()`` (audio meanwhile held, bounded)
EndFrame                               the open answer finishes (≤ 30 s), ``disconnect()``
CancelFrame                            ``disconnect()`` at once
InputAudioRawFrame                     ``send_audio`` (resampled to 16 kHz mono)
InputImageRawFrame                     ``send_file`` (JPEG, at most 1/s)
InputTextRawFrame                      ``send_live_text``
first LLMContextFrame                  ``update_session`` (instruction/tools it brings),
                                       ``replay_history`` + the turn to answer
later LLMContextFrame                  ``send_tool_result`` for results not yet sent
LLMMessagesAppendFrame                 ``send_live_text`` (``run_llm=False``: quiet content)
FunctionCallResultFrame (downstream)   ``send_tool_result`` (orphaned by a move: logged)
InterruptionFrame                      TTSStoppedFrame when the bot speaks (as stock)
LLMUpdateSettingsFrame, LLMSetTools…   ``update_session``: a planned move carries it
=====================================  ==================================================

=====================================  ==================================================
Transport callback                     Frames out (downstream unless marked)
=====================================  ==================================================
on_generation_start                    GenerationStartedFrame; pending TranscriptionFrame ↑
on_audio_output                        [TTSStartedFrame, LLMFullResponseStartFrame]
                                       TTSAudioRawFrame (24 kHz)
on_output_transcription                LLMTextFrame(append_to_context=False), TTSTextFrame
on_text_output                         [LLMFullResponseStartFrame] LLMTextFrame
on_reasoning_summary                   LLMThoughtStart/Text/EndFrame
on_tool_call                           ``run_function_calls`` (FunctionCallsStarted, …)
on_interrupted / end ``interrupted``   ``broadcast_interruption()`` (InterruptionFrame ↕)
on_grounding_metadata                  LLMSearchResponseFrame (at the answer's end)
on_usage_metadata                      MetricsFrame (LLM usage, at the answer's end)
on_generation_end                      TTSStoppedFrame, LLMFullResponseEndFrame,
                                       GenerationEndedFrame
on_input_transcription                 TranscriptionFrame ↑ (per sentence, 0.5 s flush)
on_go_away                             GoAwayFrame
on_move_started / on_move              SessionMovingFrame / SessionMovedFrame
on_resumption_update                   SessionResumptionUpdateFrame (handle redacted)
on_error (recoverable)                 ErrorFrame ↑ (non-fatal)
on_error (session lost)                SessionLostFrame, one fatal ErrorFrame ↑
=====================================  ==================================================

The response Start/End pair follows the transport's generation lifecycle: it never
straddles a move, and a tool call that finishes an answer after ``turnComplete`` stays in
its pair. ``GenerationLifecycleProcessor`` gives the same paired lifecycle behind any other
realtime service.
"""

from realtime_resumption.pipecat.gemini.service import GeminiLiveLLMService
from realtime_resumption.pipecat.gemini.vertex import (
    GeminiLiveVertexLLMService,
    ServiceAccountTokens,
)
from realtime_resumption.pipecat.lifecycle import GenerationLifecycleProcessor

__all__ = [
    "GeminiLiveLLMService",
    "GeminiLiveVertexLLMService",
    "GenerationLifecycleProcessor",
    "ServiceAccountTokens",
]
