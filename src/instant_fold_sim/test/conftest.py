"""Shared fixtures: small real garments and the cpu-small generation preset."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def cpu_small():
    from instant_fold_sim.rollout import preset

    return preset("cpu-small")


@pytest.fixture(scope="session")
def small_garment(cpu_small):
    from instant_fold_sim.garments import make_procedural_garment

    return make_procedural_garment(0, spacing=cpu_small.garment_spacing)
