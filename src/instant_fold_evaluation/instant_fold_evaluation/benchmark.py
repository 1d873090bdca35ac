"""Benchmark specs: which same-init folds an evaluation runs, and the jobs they expand to.

A spec (YAML, `config/benchmarks/<name>.yaml`) names the garments, the start states (episode
seeds `episode_seed(seed_base, garment id, k)` for k in `start_ks`), the folding contexts split
into *seen* (the policy trained on them) and *held-out* folds, where each rollout's demonstration
comes from (the scripted fold of the same garment and context from the start of `demo_k`, a
different start, as in the paper), the oracle executions per context and the policy's step limit.
A spec may be a cut of another (`part_of`: fewer garments, starts or folds, nothing else changed):
it then scores against that spec's oracle bank and reuses its demonstrations, never a copy.

A rollout depends on its start and its demonstration only, so rollouts are keyed by
(garment, k, demonstrated context); the rows of the table decide what each rollout is scored
against (its demonstration's context, or for the wrong-demonstration control another one).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from instant_fold_core.config import check_keys, read_yaml
from instant_fold_core.errors import ConfigError
from instant_fold_evaluation.oracle_bank import BankKey, Context, OracleBankError
from instant_fold_ros.bringup_share import config_dir
from instant_fold_sim.garments import expand_proc_range, garment_id_of
from instant_fold_sim.generate import episode_seed
from instant_fold_sim.rollout import PRESETS

FIELDS = (
    "name",
    "preset",
    "garments",
    "seed_base",
    "start_ks",
    "demo_k",
    "seen",
    "heldout",
    "oracle_runs",
    "max_steps",
)
#: Keys a spec may leave out.
OPTIONAL_FIELDS = ("part_of",)


@dataclass(frozen=True)
class Init:
    """A start state: garment spec, its index k among the spec's starts, and the episode seed."""

    garment: str
    k: int
    seed: int

    @property
    def garment_id(self) -> str:
        return garment_id_of(self.garment)


@dataclass(frozen=True)
class RolloutJob:
    """One closed-loop rollout: a start state and the context its demonstration shows."""

    init: Init
    context: Context
    demo_seed: int

    @property
    def id(self) -> str:
        return f"{self.init.garment_id}__k{self.init.k:03d}__demo_{self.context.stem}"


@dataclass(frozen=True)
class BenchmarkSpec:
    name: str
    preset: str
    garments: tuple[str, ...]
    seed_base: int
    start_ks: tuple[int, ...]
    demo_k: int
    seen: tuple[Context, ...]
    heldout: tuple[Context, ...]
    oracle_runs: int
    max_steps: int
    #: The spec this one is a cut of (its bank and demonstrations are that spec's), or None.
    part_of: str | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BenchmarkSpec:
        try:
            check_keys("", data, FIELDS, OPTIONAL_FIELDS)
        except ConfigError as exc:
            raise ConfigError(f"benchmark spec: {exc}") from None
        try:
            seen = tuple(Context.parse(c) for c in data["seen"])
            heldout = tuple(Context.parse(c) for c in data["heldout"] or [])
        except OracleBankError as exc:
            raise ConfigError(f"benchmark spec: {exc}") from None
        spec = cls(
            str(data["name"]),
            str(data["preset"]),
            tuple(one for g in data["garments"] for one in expand_proc_range(str(g))),
            int(data["seed_base"]),
            tuple(int(k) for k in data["start_ks"]),
            int(data["demo_k"]),
            seen,
            heldout,
            int(data["oracle_runs"]),
            int(data["max_steps"]),
            str(data["part_of"]) if data.get("part_of") else None,
        )
        spec.validate()
        return spec

    def validate(self) -> None:
        if self.preset not in PRESETS:
            raise ConfigError(f"benchmark spec: preset {self.preset!r} unknown; choose from {sorted(PRESETS)}")
        if not self.garments or not self.start_ks or not self.seen:
            raise ConfigError("benchmark spec: needs at least one garment, one start (start_ks) and one seen context")
        if self.demo_k in self.start_ks:
            raise ConfigError(
                f"benchmark spec: demo_k {self.demo_k} is also a start: the demonstration must "
                "come from another start state"
            )
        labels = [c.label for c in self.contexts]
        if len(set(labels)) != len(labels):
            raise ConfigError(f"benchmark spec: a context is listed twice in {labels}")
        if self.oracle_runs < 2 or self.max_steps < 1:
            raise ConfigError("benchmark spec: oracle_runs must be >= 2 and max_steps >= 1")

    @property
    def store(self) -> str:
        """The name the oracle bank and the demonstrations are kept under: the whole spec's for a cut."""
        return self.part_of or self.name

    def check_cut_of(self, whole: BenchmarkSpec) -> None:
        """ConfigError unless this spec only leaves out garments, starts or folds of `whole`: then
        every oracle execution and demonstration it needs is one of `whole`'s."""
        same = ("preset", "seed_base", "demo_k", "oracle_runs")
        differ = [f for f in same if getattr(self, f) != getattr(whole, f)]
        if whole.part_of or differ:
            why = f"its {differ} differ" if differ else f"that is itself part of {whole.part_of!r}"
            raise ConfigError(f"benchmark spec {self.name!r}: part_of {whole.name!r}, but {why}")
        for part, mine, theirs in (
            ("garments", self.garments, whole.garments),
            ("start_ks", self.start_ks, whole.start_ks),
            ("folds", [c.label for c in self.contexts], [c.label for c in whole.contexts]),
        ):
            extra = sorted(map(str, set(mine) - set(theirs)))
            if extra:
                raise ConfigError(f"benchmark spec {self.name!r}: {part} {extra} are not in {whole.name!r}")

    @classmethod
    def load(cls, name_or_path: str) -> BenchmarkSpec:
        """A spec file, or a name under config/benchmarks/; a cut (`part_of`) is checked against its whole."""
        path = Path(name_or_path)
        if not path.is_file():
            path = config_dir() / "benchmarks" / f"{name_or_path}.yaml"
            if not path.is_file():
                raise ConfigError(f"benchmark {name_or_path!r}: no such file (nor {path})")
        spec = cls.from_dict(read_yaml(path, "the benchmark spec"))
        if spec.part_of:
            spec.check_cut_of(cls.load(spec.part_of))
        return spec

    @property
    def contexts(self) -> tuple[Context, ...]:
        return self.seen + self.heldout

    def split_of(self, context: Context) -> str:
        return "seen" if context in self.seen else "heldout"

    def inits(self) -> list[Init]:
        return [
            Init(g, k, episode_seed(self.seed_base, garment_id_of(g), k)) for g in self.garments for k in self.start_ks
        ]

    def bank_keys(self) -> list[BankKey]:
        """Every (start, context): the oracle executions the metrics are calibrated on."""
        return [BankKey(i.garment, i.seed, c) for i in self.inits() for c in self.contexts]

    def demo_seed(self, garment: str) -> int:
        return episode_seed(self.seed_base, garment_id_of(garment), self.demo_k)

    def jobs(self) -> list[RolloutJob]:
        return [RolloutJob(i, c, self.demo_seed(i.garment)) for i in self.inits() for c in self.contexts]

    def wrong_context(self, context: Context) -> Context:
        """The context whose demonstration the wrong-demonstration control shows instead of `context`:
        the next one in the spec's list (itself for a single context, when the control is not scored)."""
        contexts = self.contexts
        return contexts[(contexts.index(context) + 1) % len(contexts)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "preset": self.preset,
            "garments": list(self.garments),
            "seed_base": self.seed_base,
            "start_ks": list(self.start_ks),
            "demo_k": self.demo_k,
            "seen": [c.label for c in self.seen],
            "heldout": [c.label for c in self.heldout],
            "oracle_runs": self.oracle_runs,
            "max_steps": self.max_steps,
            **({"part_of": self.part_of} if self.part_of else {}),
        }
