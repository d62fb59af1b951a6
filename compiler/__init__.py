"""obc: compile declarative GPU fine-tuning runs into standalone POSIX job scripts."""

# The one place the version is written (pyproject.toml reads it from here): every script's
# header names it.
__version__ = "0.3.0"
