"""Record a demonstration without a camera: `python -m instant_fold_demo.sim_recording OUTPUT`.

Starts three processes over DDS, as a recording with a camera would run: the sim node (camera and
robot: `camera/*`, the exact `cloth/mask`, `arms/home`), the `sim_demonstrator` (the person:
it moves the simulated grippers through a demonstration's keyposes and publishes `arms/state`)
and the recorder (`record_demo`'s node) writing every one of those topics to the bag OUTPUT. The
simulator starts from the demonstration's own start state (its garment and seed), so the
replayed grasps land on the cloth. When the demonstrator is done the graph stops and the bag is
closed; Ctrl-C stops it earlier, the bag closed all the same. Then:

    python -m instant_fold_demo.extract OUTPUT --out demos/sim.safetensors --events arm-state --mask recorded

Without ROS_DOMAIN_ID set, the graph runs on a ROS domain reserved for it (no other graph on the
machine can answer for its nodes).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import tempfile
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

from instant_fold_core.demonstration import DemonstrationError, load_demonstration
from instant_fold_demo.bag import BagError, check_writable_target
from instant_fold_demo.rgbd_bag import CameraTopics
from instant_fold_demo.sim_demonstrator import BUNDLED_DEMO
from instant_fold_ros.bringup_share import models_dir
from instant_fold_ros.graph_spec import GraphSpec, NodeSpec
from instant_fold_ros.standins.process_runner import STOP_SIGNALS, ProcessRunner, RunnerError

#: Everything a demonstration recorded from the simulator needs (extract --events arm-state --mask recorded).
SIM_TOPICS = (*CameraTopics().as_dict().values(), "/cloth/mask", "/arms/state", "/arms/home")


def simulated_start(meta: dict) -> tuple[str, int]:
    """(garment spec, seed) of a simulated demonstration's start, from its metadata."""
    garment, seed = meta.get("garment_id"), meta.get("seed")
    if not isinstance(garment, str) or not isinstance(seed, int):
        raise DemonstrationError(
            "the demonstration does not name its simulated start (metadata garment_id and seed): pass --garment and --seed"
        )
    procedural = re.fullmatch(r"proc_(\d+)", garment)
    return (f"proc:{int(procedural[1])}" if procedural else garment), seed


def _quoted(value: str) -> str:
    """A YAML single-quoted string (any path or name stays a string)."""
    return "'" + value.replace("'", "''") + "'"


def parameters_yaml(output: Path, demo: Path, keyframes: int, garment: str, seed: int, preset: str) -> str:
    """The three nodes' parameters."""
    topics = ", ".join(_quoted(t) for t in SIM_TOPICS)
    return (
        f"sim:\n  ros__parameters:\n    garment: {_quoted(garment)}\n    seed: {seed}\n    preset: {_quoted(preset)}\n"
        "    publish_mask: true\n"
        f"sim_demonstrator:\n  ros__parameters:\n    demonstration: {_quoted(str(demo))}\n    keyframes: {keyframes}\n"
        f"recorder:\n  ros__parameters:\n    output: {_quoted(str(output))}\n    topics: [{topics}]\n"
        "    progress_period_s: 5.0\n"
    )


def graph_environment() -> AbstractContextManager[dict[str, str]]:
    """The user's ROS_DOMAIN_ID when set, else a domain reserved for this recording."""
    from instant_fold_ros.domains import isolated_ros_env

    return nullcontext(dict(os.environ)) if os.environ.get("ROS_DOMAIN_ID") else isolated_ros_env()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m instant_fold_demo.sim_recording", description=__doc__.splitlines()[0])
    p.add_argument("output", type=Path, help="bag folder to create (never overwritten)")
    p.add_argument("--demo", type=Path, default=None, help="demonstration to replay (default: the bundled one)")
    p.add_argument("--keyframes", type=int, default=0, help="replay only its first N keyframes (0: all)")
    p.add_argument("--garment", default=None, help="simulated garment (default: the demonstration's)")
    p.add_argument("--seed", type=int, default=None, help="episode seed of the start (default: the demonstration's)")
    p.add_argument("--preset", default="cpu-small", help="simulation preset (the bundled demonstration's: cpu-small)")
    args = p.parse_args(argv)
    demo_path = (args.demo or models_dir() / BUNDLED_DEMO).resolve()
    output = args.output.resolve()
    try:
        check_writable_target(output)
        garment, seed = simulated_start(load_demonstration(demo_path).meta)
    except (BagError, DemonstrationError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    garment, seed = args.garment or garment, seed if args.seed is None else args.seed
    graph = GraphSpec(
        "sim_recording",
        (
            NodeSpec("sim", "instant_fold_sim", "sim_node"),
            NodeSpec("sim_demonstrator", "instant_fold_demo", "sim_demonstrator", required=True),
            NodeSpec("recorder", "instant_fold_demo", "recorder_node", required=True),
        ),
    )
    with tempfile.TemporaryDirectory(prefix="instant_fold_sim_recording_") as tmp, graph_environment() as env:
        params = Path(tmp) / "params.yaml"
        params.write_text(parameters_yaml(output, demo_path, args.keyframes, garment, seed, args.preset))
        runner = ProcessRunner(graph, extra_parameters=[params], env=env)
        try:
            runner.start()
        except (RunnerError, OSError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        for sig in STOP_SIGNALS:
            signal.signal(sig, lambda *_: runner.request_stop())
        code = runner.wait()
    if code == 0 and (output / "metadata.yaml").is_file():
        print(
            f"recorded {output}; next: python -m instant_fold_demo.extract {args.output} "
            "--out demos/sim_demo.safetensors --events arm-state --mask recorded"
        )
    return code


if __name__ == "__main__":
    sys.exit(main())
