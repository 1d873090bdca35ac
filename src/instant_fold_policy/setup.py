"""instant_fold_policy: the policy server."""

from setuptools import find_packages, setup

PACKAGE = "instant_fold_policy"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
    ],
    install_requires=["numpy", "torch"],
    zip_safe=True,
    maintainer="Instant-Fold developers",
    description="Instant-Fold policy server.",
    license="Apache-2.0",
    entry_points={"console_scripts": ["policy_server_node = instant_fold_policy.policy_server_node:main"]},
)
