"""mhalib: reference implementations, checkers and tools for the multi-head attention course."""

__version__ = "0.1.0"
