"""instant_fold_training: command-line entry points of the trainers."""

from setuptools import find_packages, setup

PACKAGE = "instant_fold_training"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
    ],
    install_requires=["torch"],
    zip_safe=True,
    maintainer="Instant-Fold developers",
    description="Instant-Fold training CLIs.",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "pretrain_encoder = instant_fold_training.pretrain_encoder:main",
            "train_policy = instant_fold_training.train_policy:main",
            "tokenize_episodes = instant_fold_training.tokenize_episodes:main",
            "evaluate_policy = instant_fold_training.evaluate_policy:main",
            "evaluate = instant_fold_training.evaluate:main",
            "lerobot_dataset = instant_fold_training.lerobot_dataset:main",
        ],
    },
)
