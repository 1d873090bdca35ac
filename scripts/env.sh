# Enter the Instant-Fold workspace:  source scripts/env.sh
# Activates .venv, points ament/CMake at it (ROS from wheels) and sources the colcon install.
# With --no-workspace only the environment is set (used by bootstrap before the first build).
_if_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ ! -x "$_if_root/.venv/bin/python" ]]; then
  echo "Instant-Fold: no environment yet, run scripts/bootstrap.sh first" >&2
  return 1 2>/dev/null || exit 1
fi
# shellcheck disable=SC1091
source "$_if_root/.venv/bin/activate"
if [[ -z "${ROS_DISTRO:-}" ]]; then
  case ":${AMENT_PREFIX_PATH:-}:" in *":$_if_root/.venv:"*) ;; *)
    export AMENT_PREFIX_PATH="$_if_root/.venv${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}" ;; esac
  case ":${CMAKE_PREFIX_PATH:-}:" in *":$_if_root/.venv:"*) ;; *)
    export CMAKE_PREFIX_PATH="$_if_root/.venv${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}" ;; esac
fi
export RMW_IMPLEMENTATION="${RMW_IMPLEMENTATION:-rmw_fastrtps_cpp}"
mkdir -p "$_if_root/log"
if [[ "${1:-}" != "--no-workspace" && -f "$_if_root/install/setup.bash" ]]; then
  # shellcheck disable=SC1091
  source "$_if_root/install/setup.bash"
  # The user-facing command the docs call by name (`ros2 run` finds it here too).
  case ":$PATH:" in *":$_if_root/install/instant_fold_demo/lib/instant_fold_demo:"*) ;; *)
    export PATH="$_if_root/install/instant_fold_demo/lib/instant_fold_demo:$PATH" ;; esac
fi
unset _if_root
