"""instant_fold_core: installable with colcon (ament_python) and with plain pip."""

from setuptools import find_packages, setup

PACKAGE = "instant_fold_core"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
    ],
    install_requires=[
        "numpy",
        "torch",
        "pyyaml",
        "safetensors",
        "timm",
        "pyarrow",
        "pillow",
        "rerun-sdk",  # fold_recording, rerun_web (imported when used)
        'zarr>=3; python_version >= "3.11"',
    ],
    python_requires=">=3.10",
    zip_safe=True,
    maintainer="Instant-Fold developers",
    description="Instant-Fold core library (no rclpy).",
    license="Apache-2.0",
)
