"""Robot asset for the Isaac Lab scene, made once and locally: the Franka Panda of the
`example-robot-data` package (URDF + meshes), converted to USD with UsdPhysics joints by
`urdf-usd-converter` (Newton's kit-less URDF converter).

Why: Isaac Lab's own Franka (`franka_panda.usda`) lives on NVIDIA's asset server, which is not
reachable from every machine, and Isaac Lab's kit-less URDF importer extra
(`isaaclab[importers]`) cannot be installed next to isaaclab 3.0.0 (its `isaacsim-asset-isolated`
pins usd-exchange 2.3 against isaaclab's 3.0.1). The bootstrap runs this module once
(`python assets.py --out .venv-isaaclab/assets`); the bridge then points `ISAACSIM_ASSET_ROOT`
at that folder, so nothing is fetched at run time. A manifest records the source and converter
versions; a second run with the same inputs does nothing.

Runs in the Isaac Lab environment (needs `example-robot-data` and `urdf-usd-converter`); the
path helpers below are plain Python so the main environment can test them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from importlib import metadata
from pathlib import Path

#: Where the converted Panda lands under the asset root, and the manifest beside it.
PANDA_DIR = Path("InstantFold") / "Robots" / "FrankaPanda"
MANIFEST = "manifest.json"
ROS_PACKAGE = "example-robot-data"


class AssetError(RuntimeError):
    """The robot description is missing or could not be converted; the message says what to do."""


def example_robot_data_share() -> Path:
    """`share/example-robot-data` of the installed `example-robot-data` wheel (a cmeel prefix)."""
    try:
        dist = metadata.distribution("example-robot-data")
    except metadata.PackageNotFoundError as exc:
        raise AssetError("example-robot-data is not installed (run scripts/bootstrap_isaaclab.sh)") from exc
    for f in dist.files or []:
        if f.name == "panda.urdf" and "panda_description" in f.parts:
            urdf = Path(str(dist.locate_file(f))).resolve()
            return urdf.parents[3]  # .../share/example-robot-data/robots/panda_description/urdf/panda.urdf
    raise AssetError("example-robot-data ships no panda_description/urdf/panda.urdf")


def panda_urdf(share: Path) -> Path:
    return share / "robots" / "panda_description" / "urdf" / "panda.urdf"


def panda_usd(asset_root: Path) -> Path:
    """The converted Panda's USD file under an asset root (see `convert_panda`)."""
    manifest = asset_root / PANDA_DIR / MANIFEST
    if not manifest.is_file():
        raise AssetError(
            f"no converted Franka under {asset_root / PANDA_DIR} (run scripts/bootstrap_isaaclab.sh, "
            "which converts example-robot-data's Panda once)"
        )
    return asset_root / PANDA_DIR / json.loads(manifest.read_text())["usd"]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def convert_panda(out: Path, force: bool = False) -> Path:
    """Convert the Panda URDF into `out/InstantFold/Robots/FrankaPanda` (idempotent); returns the USD."""
    share = example_robot_data_share()
    urdf = panda_urdf(share)
    target = out / PANDA_DIR
    want = {
        "source": str(urdf),
        "source_sha256": _digest(urdf),
        "example_robot_data": metadata.version("example-robot-data"),
        "urdf_usd_converter": metadata.version("urdf-usd-converter"),
    }
    manifest = target / MANIFEST
    if not force and manifest.is_file():
        have = json.loads(manifest.read_text())
        if all(have.get(k) == v for k, v in want.items()) and (target / have["usd"]).is_file():
            return target / have["usd"]
    import usdex.core
    from urdf_usd_converter import Converter

    # USD's status lines (~30 per conversion: every ROS package path resolved, every layer saved)
    # off, warnings and errors kept: what the converter's own command line shows by default.
    usdex.core.activateDiagnosticsDelegate()
    usdex.core.setDiagnosticsLevel(usdex.core.DiagnosticsLevel.eWarning)
    target.mkdir(parents=True, exist_ok=True)
    asset = Converter(ros_packages=[{"name": ROS_PACKAGE, "path": str(share)}]).convert(str(urdf), str(target))
    usd = Path(asset.path).resolve()
    if not usd.is_file():
        raise AssetError(f"urdf-usd-converter wrote no USD for {urdf} (expected {usd})")
    manifest.write_text(json.dumps({**want, "usd": str(usd.relative_to(target.resolve()))}, indent=2))
    return usd


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="asset root (ISAACSIM_ASSET_ROOT of the bridge)")
    parser.add_argument("--force", action="store_true", help="convert again even if the manifest matches")
    args = parser.parse_args(argv)
    try:
        usd = convert_panda(args.out, args.force)
    except (AssetError, ValueError) as exc:
        print(f"assets: {exc}", file=sys.stderr)
        return 1
    print(f"assets: Franka Panda -> {usd}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
