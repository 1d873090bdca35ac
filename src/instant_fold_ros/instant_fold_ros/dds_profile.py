"""The Fast DDS profile every Instant-Fold process starts with (`fastdds_profile.xml` beside this file).

Why: with Fast DDS's defaults, about one policy query in twenty waited 2-3 s on a quiet machine.
Each participant's shared-memory segment is 512 KiB, less than one simulated RGB-D frame with its
mask; while image samples held it, the participant's other samples (the simulator's `sim/step`
answers, so the arm state the policy waits for) were dropped and repaired only at the reliable
writer's next heartbeat, every 3 s (docs/architecture.md, "DDS transport"). The profile gives each
participant a 16 MiB segment and a 100 ms heartbeat.

It is applied where a process starts ROS (`node_main.run_node`, the main job, the process runner,
the test harness), before rclpy creates its participant, so a node started by `ros2 launch`,
`ros2 run` or the runner gets it alike. A profile the user chose (`FASTDDS_DEFAULT_PROFILES_FILE`
already set) and other middlewares (`RMW_IMPLEMENTATION`) are left alone.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from pathlib import Path

#: The project's profile.
PROFILE = Path(__file__).with_name("fastdds_profile.xml")
#: Where Fast DDS looks for its default profile file.
PROFILE_VARIABLE = "FASTDDS_DEFAULT_PROFILES_FILE"
#: The middlewares the profile is for (an unset `RMW_IMPLEMENTATION` means ROS's default, Fast DDS).
FAST_DDS_RMWS = ("", "rmw_fastrtps_cpp", "rmw_fastrtps_dynamic_cpp")


def use_project_dds_profile(environ: MutableMapping[str, str] | None = None) -> Path | None:
    """Point Fast DDS at the project's profile in `environ` (the process's environment by default,
    inherited by its children) unless a profile is already chosen or another middleware is used.
    Returns the profile now in effect (None: not Fast DDS)."""
    env = os.environ if environ is None else environ
    if env.get("RMW_IMPLEMENTATION", "") not in FAST_DDS_RMWS:
        return None
    if not env.get(PROFILE_VARIABLE):
        env[PROFILE_VARIABLE] = str(PROFILE)
    return Path(env[PROFILE_VARIABLE])
