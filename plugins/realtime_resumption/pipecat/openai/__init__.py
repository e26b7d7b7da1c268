"""Pipecat services on ``OpenAIRealtimeTransport``: OpenAI Realtime (and Azure OpenAI) calls
that outlive their session.

Change one import and nothing else in the pipeline::

    from pipecat.services.openai.realtime.llm import OpenAIRealtimeLLMService   # before
    from realtime_resumption.pipecat.openai import OpenAIRealtimeLLMService     # after

Needs the ``openai`` extra (``pip install 'realtime-resumption[openai]'``).
"""

from realtime_resumption.pipecat.openai.realtime_service import (
    AzureRealtimeLLMService,
    OpenAIRealtimeLLMService,
)

__all__ = ["AzureRealtimeLLMService", "OpenAIRealtimeLLMService"]
