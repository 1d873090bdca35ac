"""Offline command-line tools: pretrain the cloth encoder, tokenise episode stores, train the policy (torchrun).

The logic lives in instant_fold_core (encoder/training.py, policy/training.py,
policy/tokenize_episodes.py) so it can be imported and tested without ROS; these modules are
their command-line entry points.
"""
