"""The project's error root: every error Instant-Fold raises on purpose derives from `InstantFoldError`.

Why one root: callers (nodes, CLIs, the controller) catch a kind of error and react to it, never
match message text. Each kind also derives from the builtin it refines (`ValueError`,
`RuntimeError`), so code that predates the root keeps working.

The kinds, by what a caller does about them:
- `ConfigError`: fix the configuration (a YAML file, preset name, override, graph or spec).
- `InvalidInputError` (`NonFiniteError` apart): refuse the data and go on; the sender is wrong.
- `ArtifactError`: a file or store on disk is missing, incomplete or corrupt; re-create or re-download it.
- `ExternalError`: something outside this code (a robot, camera, simulator, peer process,
  executable, optional package) failed or cannot be reached; check the set-up, retry.
Module errors (`DriverError`, `CheckpointError`, ...) refine one of these, or the root itself
when none fits (`PolicyServerError`: a request in the wrong state). The Isaac Lab bridge's
`protocol`, `server` and `assets` modules run in another interpreter without the project and
keep builtin bases; the client turns their errors into `BridgeError` (an `ExternalError`).
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


class ArtifactError(InstantFoldError, RuntimeError):
    """A file or store the project reads or writes (checkpoint, episode store, bag, tokenised
    episodes) is missing, incomplete or corrupt, or cannot be written; the message names the path."""


class ExternalError(InstantFoldError, RuntimeError):
    """Something outside this code failed or cannot be reached: a robot or camera, the simulator
    process, an executable or optional package; the message says what to check."""
