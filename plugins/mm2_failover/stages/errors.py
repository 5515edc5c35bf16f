"""The errors the stages share."""

from __future__ import annotations


class ConfigurationError(ValueError):
    """The run's parameters do not match the clusters (e.g. no checkpoints topic for an alias); exit 2."""
