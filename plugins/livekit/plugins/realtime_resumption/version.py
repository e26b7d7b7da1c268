"""The plugin's version: the distribution's own."""

__version__ = "0.1.0"
