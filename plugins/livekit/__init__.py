"""LiveKit Agents plugin."""
