"""DDS hops of the fold graph between separate processes (real rclpy over Fast DDS).

Two measurements per case, each over `--calls` exchanges:

- `step_answer`: the controller's `sim/step` call to a simulator-like server that, like the sim
  node, publishes a 256 x 256 RGB-D frame with its mask (colour, depth, mask; the graph's
  observation QoS) to two image consumers (the tokenizer, the main job's observer) and then
  answers: request -> answer. The arm state the policy waits for leaves the controller only after
  this answer.
- one hop of each small message of the loop (cloth tokens of the configuration's size, the dual-arm
  state, an action chunk): half the round trip through an echo process.

Cases: Fast DDS's defaults (an empty profile file) or the project's profile
(`instant_fold_ros/fastdds_profile.xml`), quiet or with `--busy` CPU-bound processes beside it.
Statistics: median/p95/max in ms and how many exchanges took over 1 s.

    python benchmarks/bench_dds.py --calls 300 --out docs/results/bench_dds.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from instant_fold_core.contracts import ActionChunk
from instant_fold_learning.policy.configuration import preset as policy_preset
from instant_fold_ros.dds_profile import PROFILE, PROFILE_VARIABLE
from instant_fold_ros.domains import isolated_ros_env

#: The simulated camera's resolution (instant_fold_sim.rollout, cpu-small preset).
RESOLUTION = 256
#: Fast DDS with nothing configured (a participant profile that is not the default one).
EMPTY_PROFILE = """<?xml version="1.0" encoding="UTF-8" ?>
<dds xmlns="http://www.eprosima.com"><profiles>
<participant profile_name="unused"><rtps/></participant>
</profiles></dds>
"""
SLOW_S = 1.0
ECHOED = ("tokens", "state", "chunk")


def _frame_messages(stamp_ns: int) -> tuple[Any, Any, Any]:
    """Colour, depth and mask messages of one RESOLUTION x RESOLUTION frame (random content)."""
    from rclpy.time import Time

    from instant_fold_ros.conversions import make_header
    from instant_fold_ros.standins.image_bridge import image_to_msg

    rng = np.random.default_rng(stamp_ns % 2**32)
    header = make_header("camera_color_optical_frame", Time(nanoseconds=stamp_ns).to_msg())
    color = rng.integers(0, 255, (RESOLUTION, RESOLUTION, 3), dtype=np.uint8)
    depth = rng.uniform(0.7, 0.9, (RESOLUTION, RESOLUTION)).astype(np.float32)
    mask = (rng.random((RESOLUTION, RESOLUTION)) > 0.5).astype(np.uint8) * 255
    return (
        image_to_msg(color, "rgb8", header),
        image_to_msg(depth, "32FC1", header),
        image_to_msg(mask, "mono8", header),
    )


def _loop_messages(config: str) -> dict[str, Any]:
    """One message of each echoed kind, sized as `config`'s policy uses them."""
    from instant_fold_ros.conversions import action_chunk_to_msg, dual_arm_state_to_msg, tokens_to_msg

    model = policy_preset(config).model
    n, d, h = model.num_cloth_tokens, model.cloth_feature_dim, model.horizon
    rng = np.random.default_rng(0)
    tokens = tokens_to_msg(rng.random((n, 3), np.float32), rng.random((n, d), np.float32), np.ones(n, bool))
    state = rng.random((2, 4)).astype(np.float32)
    chunk = ActionChunk(rng.random((h, 2, 3), np.float32), np.ones((h, 2), np.float32), 2, 0.05)
    return {"tokens": tokens, "state": dual_arm_state_to_msg(state), "chunk": action_chunk_to_msg(chunk)}


def _message_types() -> dict[str, type]:
    from instant_fold_interfaces.msg import ActionChunk as ActionChunkMsg
    from instant_fold_interfaces.msg import ClothTokens, DualArmState

    return {"tokens": ClothTokens, "state": DualArmState, "chunk": ActionChunkMsg}


def serve() -> None:
    """The simulator's side: every step publishes a frame, then answers (as sim_node does)."""
    from rclpy.node import Node
    from sensor_msgs.msg import Image

    from instant_fold_interfaces.srv import SimStep
    from instant_fold_ros.node_main import run_node
    from instant_fold_ros.qos import OBSERVATION_QOS

    class Server(Node):
        def __init__(self) -> None:
            super().__init__("bench_sim")
            self.pubs = [self.create_publisher(Image, t, OBSERVATION_QOS) for t in ("color", "depth", "mask")]
            self.create_service(SimStep, "sim/step", self.on_step)

        def on_step(self, request: SimStep.Request, response: SimStep.Response) -> SimStep.Response:
            for pub, msg in zip(self.pubs, _frame_messages(round(request.until * 1e9)), strict=True):
                pub.publish(msg)
            response.success, response.sim_time = True, request.until
            return response

    run_node(Server)


def consume() -> None:
    """An image consumer (the tokenizer, the main job's observer)."""
    from rclpy.node import Node
    from sensor_msgs.msg import Image

    from instant_fold_ros.node_main import run_node
    from instant_fold_ros.qos import OBSERVATION_QOS

    class Consumer(Node):
        def __init__(self) -> None:
            super().__init__("bench_consumer")
            for topic in ("color", "depth", "mask"):
                self.create_subscription(Image, topic, lambda _m: None, OBSERVATION_QOS)

    run_node(Consumer)


def echo() -> None:
    """Sends every loop message straight back (`ping/<kind>` -> `pong/<kind>`)."""
    from rclpy.node import Node

    from instant_fold_ros.node_main import run_node
    from instant_fold_ros.qos import COMMAND_QOS

    class Echo(Node):
        def __init__(self) -> None:
            super().__init__("bench_echo")
            for kind, msg_type in _message_types().items():
                pub = self.create_publisher(msg_type, f"pong/{kind}", COMMAND_QOS)
                self.create_subscription(msg_type, f"ping/{kind}", pub.publish, COMMAND_QOS)

    run_node(Echo)


def busy() -> None:
    """A CPU-bound process (the 'busy' condition)."""
    x = 0
    while True:
        x = (x * 1103515245 + 12345) % 2**31


ROLES: dict[str, Callable[[], None]] = {"serve": serve, "consume": consume, "echo": echo, "busy": busy}


def _stats(seconds: list[float]) -> dict[str, float | int]:
    a = np.asarray(seconds) * 1000.0
    return {
        "count": int(a.size),
        "median_ms": round(float(np.median(a)), 3),
        "p95_ms": round(float(np.percentile(a, 95)), 3),
        "max_ms": round(float(a.max()), 3),
        "over_1s": int((a > SLOW_S * 1000.0).sum()),
    }


def _exchange(send: Callable[[threading.Event], None], calls: int, period_s: float) -> list[float]:
    """Time `calls` exchanges: `send(done)` starts one, `done` is set when it comes back."""
    times = []
    for k in range(calls):
        done = threading.Event()
        start = time.perf_counter()
        send(done)
        if not done.wait(30.0):
            raise RuntimeError(f"bench_dds: exchange {k} not answered in 30 s")
        times.append(time.perf_counter() - start)
        time.sleep(period_s)
    return times


def run_case(profile: str, busy_processes: int, calls: int, period_s: float, config: str) -> dict[str, Any]:
    """One case (`profile` 'default' or 'project'): step answers and hops, in seconds -> stats."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from instant_fold_interfaces.srv import SimStep
    from instant_fold_ros.node_main import spin_until_shutdown
    from instant_fold_ros.qos import COMMAND_QOS

    with tempfile.TemporaryDirectory() as tmp, isolated_ros_env() as env:
        empty = Path(tmp) / "empty.xml"
        empty.write_text(EMPTY_PROFILE)
        env[PROFILE_VARIABLE] = str(empty if profile == "default" else PROFILE)
        saved = dict(os.environ)
        os.environ.update(env)  # this process's participant: the same profile as its peers
        roles = ["serve", "consume", "consume", "echo"] + ["busy"] * busy_processes
        procs = [
            subprocess.Popen([sys.executable, __file__, "--role", r], env=env, stdout=subprocess.DEVNULL) for r in roles
        ]
        context = rclpy.Context()
        try:
            rclpy.init(context=context, domain_id=int(env["ROS_DOMAIN_ID"]))
            node = rclpy.create_node("bench_controller", context=context)
            executor = SingleThreadedExecutor(context=context)
            executor.add_node(node)
            threading.Thread(target=spin_until_shutdown, args=(executor,), daemon=True).start()
            client = node.create_client(SimStep, "sim/step")
            if not client.wait_for_service(timeout_sec=30.0):
                raise RuntimeError("bench_dds: the server did not come up in 30 s")
            pending: dict[str, threading.Event] = {}
            pings = {}
            for kind, msg_type in _message_types().items():
                pings[kind] = node.create_publisher(msg_type, f"ping/{kind}", COMMAND_QOS)
                node.create_subscription(msg_type, f"pong/{kind}", lambda _m, k=kind: pending[k].set(), COMMAND_QOS)
            while any(p.get_subscription_count() == 0 for p in pings.values()):
                time.sleep(0.1)
            time.sleep(2.0)  # discovery of every endpoint settles
            sim_time = iter(range(1, 10**9))

            def step(done: threading.Event) -> None:
                client.call_async(SimStep.Request(until=next(sim_time) * 0.05)).add_done_callback(lambda _f: done.set())

            result: dict[str, Any] = {"step_answer": _stats(_exchange(step, calls, period_s))}
            for kind, msg in _loop_messages(config).items():

                def ping(done: threading.Event, kind: str = kind, msg: Any = msg) -> None:
                    pending[kind] = done
                    pings[kind].publish(msg)

                round_trips = _exchange(ping, calls, period_s)
                result[f"{kind}_hop"] = _stats([t / 2 for t in round_trips])
            return {"profile": profile, "busy_processes": busy_processes, "config": config, **result}
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:  # a peer starved by the busy processes: no result lost
                    p.kill()
                    p.wait()
            rclpy.try_shutdown(context=context)
            os.environ.clear()
            os.environ.update(saved)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--role", choices=tuple(ROLES), help=argparse.SUPPRESS)
    p.add_argument("--calls", type=int, default=300)
    p.add_argument("--period-ms", type=float, default=20.0, help="pause between exchanges")
    p.add_argument("--busy", type=int, nargs="+", default=[0, 2], help="busy processes, one case each")
    p.add_argument("--profiles", nargs="+", default=["default", "project"], choices=("default", "project"))
    p.add_argument("--configs", nargs="+", default=["cpu-small", "paper"], help="policy sizes of the hop messages")
    p.add_argument("--out", default="outputs/bench_dds.json")
    args = p.parse_args()
    if args.role:
        ROLES[args.role]()
        return
    load = os.getloadavg()
    cases = []
    for n in args.busy:
        for profile in args.profiles:
            for config in args.configs:
                case = run_case(profile, n, args.calls, args.period_ms / 1000.0, config)
                print(json.dumps(case), flush=True)
                cases.append(case)
    result = {
        "benchmark": "bench_dds",
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "load_average_at_start": [round(x, 2) for x in load],
        "frame_per_step": f"{RESOLUTION}x{RESOLUTION} rgb8 + 32FC1 + mono8",
        "calls_per_case": args.calls,
        "period_ms": args.period_ms,
        "cases": cases,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
