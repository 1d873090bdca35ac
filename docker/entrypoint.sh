#!/usr/bin/env bash
# Source ROS 2 and the workspace, then run the given command (default: an interactive shell).
set -e
# shellcheck disable=SC1091
source /opt/ros/jazzy/setup.bash
# shellcheck disable=SC1091
source /ws/scripts/env.sh
exec "$@"
