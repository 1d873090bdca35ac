"""instant_fold_learning: the learned models (cloth encoder, in-context policy), their trainers and CLIs.

ROS-free: installable with colcon (ament_python) and with plain pip.
"""

from setuptools import find_packages, setup

PACKAGE = "instant_fold_learning"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
    ],
    install_requires=["instant_fold_core", "numpy", "torch", "timm", "safetensors", "tqdm", "matplotlib"],
    python_requires=">=3.10",
    zip_safe=True,
    maintainer="Instant-Fold developers",
    description="Instant-Fold learning: cloth encoder, in-context policy, trainers (no rclpy).",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "pretrain_encoder = instant_fold_learning.pretrain_encoder:main",
            "tokenize_episodes = instant_fold_learning.tokenize_episodes:main",
            "train_policy = instant_fold_learning.train_policy:main",
            "lerobot_dataset = instant_fold_learning.lerobot_dataset:main",
        ],
    },
)
