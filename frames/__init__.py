"""Pipecat frames that carry the session's lifecycle facts."""
