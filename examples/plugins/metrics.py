"""A stand-in Axolotl plugin: embedded into the run dir by `files:`."""

from axolotl.integrations.base import BasePlugin


class MetricsPlugin(BasePlugin):
    """Logs one line per training step."""
