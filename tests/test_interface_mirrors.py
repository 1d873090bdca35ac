"""The core's contracts mirror the interface constants: a .msg/.srv/.action change that is not
mirrored in `instant_fold_core.contracts` fails here (the core cannot import the messages)."""

from __future__ import annotations

import re
from enum import IntEnum
from pathlib import Path

import pytest

from instant_fold_core.contracts import ChunkRepresentation, FoldOutcome, FoldPhase, KeyframeEvent

INTERFACES = Path(__file__).resolve().parents[1] / "src" / "instant_fold_interfaces"

#: Interface file -> constant prefix -> the enum that mirrors the constants with that prefix.
MIRRORS: dict[str, dict[str, type[IntEnum]]] = {
    "msg/ActionChunk.msg": {"": ChunkRepresentation},
    "msg/Keyframe.msg": {"EVENT_": KeyframeEvent},
    "action/ExecuteFold.action": {"OUTCOME_": FoldOutcome, "PHASE_": FoldPhase},
}

#: `<type> NAME=value` (a ROS interface constant; comments and fields never contain '=').
CONSTANT = re.compile(r"^\s*\w+\s+([A-Z][A-Z0-9_]*)\s*=\s*(-?\d+)\s*(#.*)?$")


def interface_constants() -> dict[str, dict[str, int]]:
    """Every integer constant of every interface file: file -> name -> value."""
    found: dict[str, dict[str, int]] = {}
    for path in sorted(INTERFACES.glob("*/*")):
        if path.suffix not in (".msg", ".srv", ".action"):
            continue
        for line in path.read_text().splitlines():
            match = CONSTANT.match(line)
            if match:
                found.setdefault(path.relative_to(INTERFACES).as_posix(), {})[match[1]] = int(match[2])
    return found


def test_the_interface_files_are_found_and_parsed() -> None:
    # Guards the test below against passing on an empty parse (moved folder, changed syntax).
    constants = interface_constants()
    assert constants["msg/ActionChunk.msg"] == {"ABSOLUTE": 0, "DELTA": 1}
    assert len(constants["action/ExecuteFold.action"]) == 9


@pytest.mark.parametrize("file", sorted(interface_constants()))
def test_every_interface_constant_is_mirrored_by_name_and_value(file: str) -> None:
    assert file in MIRRORS, f"{file} declares constants that instant_fold_core.contracts does not mirror"
    expected: dict[str, int] = {}
    for prefix, enum in MIRRORS[file].items():
        expected.update({prefix + member.name: int(member.value) for member in enum})
    assert interface_constants()[file] == expected


def test_every_mirror_names_a_file_with_constants() -> None:
    assert set(MIRRORS) <= set(interface_constants())
