"""Offline command-line tools: pretrain the cloth encoder, train the policy (torchrun-ready).

The training loops live in instant_fold_core (encoder/training.py, policy/training.py) so they
can be imported and tested without ROS; these modules are their command-line entry points.
"""
