"""mapreport: compile-time mapping accuracy and runtime adaptation gain, per shape."""

__version__ = "0.1.0"
