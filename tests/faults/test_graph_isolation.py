"""Faults: two graphs on one ROS domain answered for each other.

Before (issue "faults and bad input", item 2): the main job set no ROS domain, so its graph shared
the default domain with any other run, or with a graph left over from one, on the machine: "graph
ready" came in 1.6 s from the other graph's nodes, and the other policy server rejected the fold
goal. Now a run without ROS_DOMAIN_ID reserves a domain no other run or test on the machine holds
(the lock files `instant_fold_ros.domains` uses), with localhost discovery; a ROS_DOMAIN_ID the
user set is kept.
"""

from __future__ import annotations

from instant_fold import sim_fold


def test_concurrent_main_jobs_get_domains_of_their_own(monkeypatch) -> None:
    monkeypatch.delenv("ROS_DOMAIN_ID", raising=False)
    with sim_fold.graph_environment() as first, sim_fold.graph_environment() as second:
        domains = {first["ROS_DOMAIN_ID"], second["ROS_DOMAIN_ID"]}
        assert len(domains) == 2 and "0" not in domains  # 0: every unconfigured ROS process's domain
        assert first["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"


def test_a_domain_the_user_chose_is_kept(monkeypatch) -> None:
    monkeypatch.setenv("ROS_DOMAIN_ID", "7")
    with sim_fold.graph_environment() as env:
        assert env["ROS_DOMAIN_ID"] == "7"
