"""The oracle bank: K noisy scripted executions per (garment, start seed, mode, variant).

The paper's metrics are calibrated per initialisation and folding context on 20 oracle
executions from the same start (appendix, "Training and Evaluation Details"): they give the
target geometry, its typical spread, the 95th-percentile success envelope and the descriptors
the context classifier votes with. Here each execution is the mode's scripted program run from
the start state of the seed with seeded `ExecutionNoise` (run k uses noise seed k), and the bank
keeps only its `FoldRecord` (events, final keypoints, fold rate) and the start's `InitInfo`:
a few KB per context, so a benchmark's bank is cached, resumed run by run, and shipped.

Layout: `<root>/bank.json` (preset, runs per context, noise model, version: a bank is never
mixed with executions of another configuration) and one JSON file per context,
`<root>/<garment id>/<seed>/m<mode id>_<variant>.json`.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from instant_fold_core.dataset.schema import KEYPOINT_NAMES
from instant_fold_core.errors import InvalidInputError
from instant_fold_core.fold_record import FoldRecord, InitInfo
from instant_fold_evaluation.events import GarmentFrame, descriptor_from_episodes
from instant_fold_evaluation.grasps import (
    EventError,
    EventReference,
    FirstGraspError,
    arm_events,
    first_grasps,
)
from instant_fold_evaluation.metrics import ContextClassifier, OracleReference, RolloutScore, score_rollout
from instant_fold_sim.coverage import Coverage
from instant_fold_sim.garments import GarmentMesh, resolve_garment
from instant_fold_sim.keypoints import detect_keypoints
from instant_fold_sim.outcome import init_info, record_fold
from instant_fold_sim.programs import FoldingMode, mode_by_id, resolve_mode
from instant_fold_sim.rollout import ExecutionNoise, preset, run_program, start_state

BANK_VERSION = 1
DEFAULT_RUNS = 5


class OracleBankError(InvalidInputError):
    """A bank that cannot be used as asked (other configuration, bad context); the message says why."""


@dataclass(frozen=True)
class Context:
    """A folding context: a mode and its execution variant, written `mode/variant`."""

    mode: str
    variant: str

    @classmethod
    def parse(cls, text: str) -> Context:
        name, sep, variant = text.partition("/")
        try:
            mode = resolve_mode(name)
        except KeyError as exc:
            raise OracleBankError(f"context {text!r}: {exc.args[0]}") from None
        if not sep or variant not in mode.variants:
            raise OracleBankError(f"context {text!r}: expected mode/variant with a variant in {mode.variants}")
        if mode.family == "random":
            raise OracleBankError(f"context {text!r}: random deformations are not folding contexts")
        return cls(mode.name, variant)

    @property
    def label(self) -> str:
        return f"{self.mode}/{self.variant}"

    @property
    def stem(self) -> str:
        """`m<mode id>_<variant>`: how file names and job ids spell the context."""
        return f"m{self.folding_mode.mode_id:02d}_{self.variant}"

    @property
    def folding_mode(self) -> FoldingMode:
        return resolve_mode(self.mode)

    def keypoints(self) -> list[int]:
        """Indices of the semantic keypoints the context's program moves (its target keypoints)."""
        names = {mv.pick for sub in self.folding_mode.program(self.variant) for mv in sub.moves}
        return sorted(KEYPOINT_NAMES.index(n) for n in names)


@dataclass(frozen=True)
class BankKey:
    """One same-init context of a benchmark: garment spec, episode seed of the start, context."""

    garment: str
    seed: int
    context: Context


@dataclass
class BankEntry:
    init: InitInfo
    context_keypoints: list[int]
    runs: list[FoldRecord] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "init": self.init.to_json(),
            "context_keypoints": self.context_keypoints,
            "runs": [r.to_json() for r in self.runs],
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> BankEntry:
        return cls(
            InitInfo.from_json(d["init"]), list(d["context_keypoints"]), [FoldRecord.from_json(r) for r in d["runs"]]
        )


def _write_json(path: Path, data: Any) -> None:
    """Write atomically: a bank interrupted mid-write keeps its previous file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


class OracleBank:
    """A directory of oracle executions for one generation preset and noise model."""

    def __init__(
        self,
        root: str | Path,
        preset_name: str = "cpu-small",
        runs: int = DEFAULT_RUNS,
        noise: ExecutionNoise | None = None,
        grow: bool = False,
    ) -> None:
        """`grow`: an existing bank of this configuration with fewer executions per context is
        raised to `runs` (its executions are kept: run k uses noise seed k, so they are the first
        ones of the larger bank, bit for bit; `build` adds the rest)."""
        if runs < 2:
            raise OracleBankError(f"runs: the envelope needs at least 2 oracle executions per context, got {runs}")
        self.root = Path(root)
        self.preset_name = preset_name
        self.config = preset(preset_name)
        self.runs = runs
        self.noise = noise or ExecutionNoise()
        self._garments: dict[str, tuple[GarmentMesh, np.ndarray]] = {}
        meta = {"version": BANK_VERSION, "preset": preset_name, "runs": runs, "noise": self.noise.to_dict()}
        meta_path = self.root / "bank.json"
        if meta_path.is_file():
            found = json.loads(meta_path.read_text())
            fewer = found | {"runs": runs} == meta and int(found.get("runs", 0)) < runs
            if fewer and grow:
                _write_json(meta_path, meta)
            elif fewer:
                raise OracleBankError(
                    f"{self.root}: bank of {found['runs']} executions per context; asked for {runs}. "
                    "Grow it (its executions are kept: evaluate --grow-bank) or use another directory."
                )
            elif found != meta:
                raise OracleBankError(
                    f"{self.root}: bank of another configuration ({found}); asked for {meta}. "
                    "Use another directory or delete this one."
                )
        else:
            _write_json(meta_path, meta)

    @classmethod
    def open(cls, root: str | Path) -> OracleBank:
        """An existing bank, with the configuration it was built with."""
        meta_path = Path(root) / "bank.json"
        if not meta_path.is_file():
            raise OracleBankError(f"{root}: not an oracle bank (no bank.json)")
        meta = json.loads(meta_path.read_text())
        if meta.get("version") != BANK_VERSION:
            raise OracleBankError(f"{root}: bank version {meta.get('version')}, this code reads {BANK_VERSION}")
        return cls(root, meta["preset"], int(meta["runs"]), ExecutionNoise(**meta["noise"]))

    def garment(self, spec: str) -> tuple[GarmentMesh, np.ndarray]:
        """The garment of a spec and its semantic keypoint particle ids (cached)."""
        if spec not in self._garments:
            g = resolve_garment(spec, spacing=self.config.garment_spacing, max_particles=self.config.max_particles)
            self._garments[spec] = (g, detect_keypoints(g.vertices))
        return self._garments[spec]

    def path(self, key: BankKey) -> Path:
        garment, _ = self.garment(key.garment)
        return self.root / garment.garment_id / str(key.seed) / f"{key.context.stem}.json"

    def _read(self, key: BankKey) -> BankEntry | None:
        path = self.path(key)
        return BankEntry.from_json(json.loads(path.read_text())) if path.is_file() else None

    def load(self, key: BankKey) -> BankEntry | None:
        """The entry of `key` if all its executions are done, else None."""
        entry = self._read(key)
        return entry if entry is not None and len(entry.runs) >= self.runs else None

    def build(self, key: BankKey) -> BankEntry:
        """Run the missing executions of `key` (saved one by one, so an interrupted build resumes)."""
        entry = self._read(key)
        garment, kp_ids = self.garment(key.garment)
        mode = key.context.folding_mode
        scene = None
        while entry is None or len(entry.runs) < self.runs:
            k = 0 if entry is None else len(entry.runs)
            start = start_state(garment, key.seed, self.config, kp_ids, scene=scene)
            scene = start.scene
            if entry is None:
                entry = BankEntry(init_info(scene, kp_ids), key.context.keypoints())
            coverage = Coverage(scene.positions(), garment.faces)
            rollout = run_program(
                start, mode, key.context.variant, key.seed, self.config, record=False, noise=self.noise, noise_seed=k
            )
            entry.runs.append(record_fold(rollout.trace, scene, kp_ids, coverage))
            _write_json(self.path(key), entry.to_json())
        return entry

    def family(self, garment: str, seed: int) -> Family:
        """Every complete context the bank holds for this start, as one family."""
        g, _ = self.garment(garment)
        entries = {}
        for path in sorted((self.root / g.garment_id / str(seed)).glob("m*_*.json")):
            mode_id, _, variant = path.stem[1:].partition("_")
            key = BankKey(garment, seed, Context(mode_by_id(int(mode_id)).name, variant))
            if (entry := self.load(key)) is not None:
                entries[key.context.label] = entry
        if not entries:
            raise OracleBankError(f"{self.root}: no oracle executions of {g.garment_id} from seed {seed}")
        return Family.build(entries)


@dataclass
class Family:
    """The oracle calibration of one start state (a same-init family) over its contexts.

    The executions' event descriptors train the start's 3-NN context classifier, and each
    context's executions calibrate its `OracleReference` (target geometry, median errors,
    95th-percentile envelope) and its `EventReference` (every grasp and release of each arm, the
    first grasps among them); a fold from this start is scored against them (`score`,
    `first_grasp_error`, `event_error`). Everything is derived from `entries` in `build`, so
    `leave_out` can recalibrate without one execution.
    """

    init: InitInfo
    frame: GarmentFrame
    classifier: ContextClassifier
    references: dict[str, OracleReference]
    events: dict[str, EventReference]
    entries: dict[str, BankEntry]

    @classmethod
    def build(cls, entries: dict[str, BankEntry]) -> Family:
        init = next(iter(entries.values())).init
        frame = GarmentFrame.from_keypoints(init.start_keypoints, init.garment_size)
        descriptors, labels = [], []
        references, events = {}, {}
        for label, entry in entries.items():
            events[label] = EventReference.from_runs([arm_events(r.episodes) for r in entry.runs])
            for run in entry.runs:
                d = descriptor_from_episodes(run.episodes, frame, init.fps)
                if d is not None:
                    descriptors.append(d)
                    labels.append(label)
            references[label] = OracleReference.from_runs(
                np.stack([frame.to_garment(r.final_keypoints) for r in entry.runs]),
                np.array([r.fold_rate for r in entry.runs]),
                entry.context_keypoints,
            )
        if not descriptors:
            raise OracleBankError(f"no oracle execution from this start grasped anything ({sorted(entries)})")
        return cls(init, frame, ContextClassifier(np.stack(descriptors), labels), references, events, entries)

    def leave_out(self, context: str, index: int) -> Family:
        """This family calibrated without execution `index` of `context`: classifier voters,
        reference and events rebuilt from the other executions, so that execution can be
        scored out of sample (the oracle (out-of-sample) row). Needs K >= 3 executions of
        `context` (a reference is calibrated on at least 2)."""
        entry = self.entries[context]
        if not 0 <= index < len(entry.runs):
            raise OracleBankError(f"{context}: no execution {index} of {len(entry.runs)}")
        runs = entry.runs[:index] + entry.runs[index + 1 :]
        if len(runs) < 2:
            raise OracleBankError(f"{context}: {len(entry.runs)} executions; leaving one out needs at least 3")
        return Family.build({**self.entries, context: dataclasses.replace(entry, runs=runs)})

    def score(self, garment: str, context: str, record: FoldRecord) -> RolloutScore:
        return score_rollout(
            garment,
            context,
            descriptor_from_episodes(record.episodes, self.frame, self.init.fps),
            self.frame.to_garment(record.final_keypoints),
            record.fold_rate,
            self.classifier,
            self.references[context],
        )

    def first_grasp_error(self, context: str, record: FoldRecord, scale: float) -> FirstGraspError:
        """How far the fold's first grasps are from the oracle's of `context` (positions are sim
        metres; `scale` turns them into metres, the preset's `obs_scale`)."""
        return self.events[context].first_grasps().error(first_grasps(record.episodes), scale)

    def event_error(self, context: str, record: FoldRecord, scale: float) -> EventError:
        """How far each of the fold's grasps and releases is from the oracle's of `context` (the
        same units and `scale` as `first_grasp_error`)."""
        return self.events[context].error(arm_events(record.episodes), scale)

    def do_nothing(self) -> FoldRecord:
        return FoldRecord((), self.init.start_keypoints, 0.0, 0)
