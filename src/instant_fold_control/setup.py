"""instant_fold_control: dual-arm Cartesian controller, safety layer, Dobot and Franka drivers."""

from setuptools import find_packages, setup

PACKAGE = "instant_fold_control"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
    ],
    install_requires=["numpy", "pyyaml"],
    extras_require={"franka": ["franky-control"]},
    zip_safe=True,
    maintainer="Instant-Fold developers",
    description="Instant-Fold dual-arm Cartesian controller and robot drivers.",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "controller_node = instant_fold_control.controller_node:main",
        ],
    },
)
