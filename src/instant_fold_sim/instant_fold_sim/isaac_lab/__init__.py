"""Isaac Lab 3 as an optional simulator behind the sim node (docs/isaac_lab.md).

The Isaac Lab process (its own Python 3.12 environment, .venv-isaaclab) runs `server.py` with
the `isaac_env` backend; the sim node reaches it over a loopback socket (`protocol`, `spec`) with
`client.BridgeClient` and steps it as `client.RemoteScene` under `SimWorld`. `standin` is the
same server with the project's Newton scene behind it, for machines without Isaac Lab.

Nothing is imported here: `protocol`, `spec` and `layout` must load in the Isaac Lab process,
which has numpy but none of the workspace's packages.
"""
