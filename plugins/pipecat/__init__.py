"""Pipecat service processors."""
