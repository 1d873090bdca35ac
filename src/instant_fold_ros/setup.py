"""instant_fold_ros: message conversions and ROS helpers shared by the nodes."""

from setuptools import find_packages, setup

PACKAGE = "instant_fold_ros"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*"]),
    package_data={PACKAGE: ["fastdds_profile.xml"]},
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
    ],
    install_requires=["numpy"],
    zip_safe=True,
    maintainer="Instant-Fold developers",
    description="ROS adapters shared by the Instant-Fold nodes.",
    license="Apache-2.0",
)
