"""instant_fold_sim: installable with colcon (ament_python) and with plain pip."""

from setuptools import find_packages, setup

PACKAGE = "instant_fold_sim"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
    ],
    install_requires=[
        "instant_fold_core",
        "numpy",
        "scipy",
        "newton==1.8.0",
        "warp-lang==1.19.0",
        "usd-core==26.11",
        "fast-simplification==0.2.0",
        "zarr==3.1.6",
        "tqdm",
        "ray==2.60.0",
        "imageio==2.38.1",
        "imageio-ffmpeg==0.8.1",
        "pillow",
    ],
    python_requires=">=3.10",
    zip_safe=True,
    maintainer="Instant-Fold developers",
    description="Instant-Fold cloth simulation (Newton) and simulated folding demonstrations.",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "generate = instant_fold_sim.generate:main",
            "viewer = instant_fold_sim.viewer:main",
            "sim_node = instant_fold_sim.sim_node:main",
        ],
        # The lock-stepped `sim` robot driver, found by the controller by name.
        "instant_fold_control.drivers": ["sim = instant_fold_sim.sim_driver:make_robot"],
    },
)
