"""Keeps realtime voice-agent sessions alive across a provider's connection rotation."""
