"""Gemini Live transport over google-genai."""
