"""Instant-Fold learning (no rclpy): the cloth encoder (`encoder`), the in-context policy (`policy`),
the training scaffold both trainers share (`trainer`) and their CLIs (`pretrain_encoder`,
`tokenize_episodes`, `train_policy`, `lerobot_dataset`)."""
