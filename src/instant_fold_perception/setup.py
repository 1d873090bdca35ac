"""instant_fold_perception: camera, segmentation and tokenizer nodes."""

from setuptools import find_packages, setup

PACKAGE = "instant_fold_perception"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
    ],
    install_requires=["numpy", "scipy", "pyrealsense2", "torch", "sam2"],
    zip_safe=True,
    maintainer="Instant-Fold developers",
    description="Instant-Fold perception nodes.",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "camera_node = instant_fold_perception.camera_node:main",
            "segmentation_node = instant_fold_perception.segmentation_node:main",
            "tokenizer_node = instant_fold_perception.tokenizer_node:main",
        ],
    },
)
