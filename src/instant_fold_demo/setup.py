"""instant_fold_demo: demonstration capture (recording, hand tracking, keyframes, correction page)."""

from setuptools import find_packages, setup

PACKAGE = "instant_fold_demo"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*"]),
    package_data={PACKAGE: ["static/*"]},
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
    ],
    install_requires=["numpy", "rosbags", "mediapipe", "fastapi", "uvicorn"],
    zip_safe=False,
    maintainer="Instant-Fold developers",
    description="Instant-Fold demonstration capture.",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "recorder_node = instant_fold_demo.recorder_node:main",
            "record_demo = instant_fold_demo.recorder_node:record_main",
            "bag_player = instant_fold_demo.player_node:main",
            "sim_demonstrator = instant_fold_demo.sim_demonstrator:main",
        ],
    },
)
