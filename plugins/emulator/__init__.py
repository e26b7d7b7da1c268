"""A local Gemini Live server for tests, the demo and users' own tests."""
