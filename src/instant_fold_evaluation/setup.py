"""instant_fold_evaluation: the paper's metrics, the oracle bank, closed-loop and offline evaluation."""

from setuptools import find_packages, setup

PACKAGE = "instant_fold_evaluation"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
    ],
    install_requires=["numpy", "scipy", "torch"],
    zip_safe=True,
    maintainer="Instant-Fold developers",
    description="Instant-Fold evaluation: metrics, oracle bank, closed-loop benchmark, offline checks.",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "evaluate = instant_fold_evaluation.evaluate:main",
            "evaluate_policy = instant_fold_evaluation.evaluate_policy:main",
            "compare = instant_fold_evaluation.compare:main",
        ],
    },
)
