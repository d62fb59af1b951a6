"""obc: compile declarative GPU fine-tuning runs into standalone POSIX job scripts."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("obc")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0"
