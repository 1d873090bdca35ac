"""In-context flow-matching policy (LeRobot-style: configuration / modeling / normalization / inference)."""

from instant_fold_learning.policy.configuration import (
    InstantFoldPolicyConfig,
    PolicyConfig,
    TrainingConfig,
    load_config,
)
from instant_fold_learning.policy.inference import ActionChunk, PolicyInputError, PolicyRunner
from instant_fold_learning.policy.modeling import InstantFoldPolicy

__all__ = [
    "ActionChunk",
    "InstantFoldPolicy",
    "InstantFoldPolicyConfig",
    "PolicyConfig",
    "PolicyInputError",
    "PolicyRunner",
    "TrainingConfig",
    "load_config",
]
