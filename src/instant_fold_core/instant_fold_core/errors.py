"""The project's error root: every error Instant-Fold raises on purpose derives from `InstantFoldError`.

Why one root: callers (nodes, CLIs, the controller) catch a kind of error and react to it, never
match message text. Each kind also derives from the builtin it refines (`ValueError`, ...), so code
that predates the root keeps working.
"""

from __future__ import annotations


class InstantFoldError(Exception):
    """Root of the errors Instant-Fold raises deliberately (bad input, config, checkpoint, ...)."""


class ConfigError(InstantFoldError, ValueError):
    """A configuration (YAML file, preset name, override) is unusable; the message names the key."""


class InvalidInputError(InstantFoldError, ValueError):
    """Data handed over at a boundary (arrays, a message, a file, a request) breaks its contract;
    the message names the field."""


class NonFiniteError(InvalidInputError):
    """Data holds NaN or infinite values. A kind of its own because the controller counts such
    chunks apart (`refused_nonfinite`): a diverging model, not a malformed sender."""
