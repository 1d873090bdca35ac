"""The training pipeline: from nothing to the default models, one typed recipe, one command.

    python -m instant_fold.pipeline [WORK] [--recipe cpu-small|paper|FILE] [--set STAGE.KEY=VALUE ...]
        [--only STAGE ...] [--skip STAGE ...]

(`scripts/train_default_models.sh` is this command.) A recipe (`config/pipelines/<name>.yaml`, the
`Recipe` dataclass below, read by the one config loader) has one section per stage:

1. `generate`  simulated folds of the training garments (`instant_fold_sim.generate`, Ray);
2. `pretrain`  temporal contrastive pretraining of the cloth encoder on that store;
3. `tokenize`  every frame through the encoder; the start states the CPU benchmark and the main
               job roll out from (`heldout_starts`) go to a held-out directory, not to training;
4. `keypoints` the keypoint detector on the training tokens, its errors reported on the held-out
               starts (`instant_fold_learning.train_keypoints`);
5. `train`     the demonstration-conditioned policy on the training tokens (torchrun when
               `processes` > 1);
6. `evaluate`  offline action error, first grasps and arm sensitivity on training and held-out
               starts;

then, on a whole run (no `--only`, no `--skip`), the encoder, the keypoint detector and the policy
are copied to `models/`
(`install`; the model cards are kept), and `WORK/summary.json` is written (stage wall times, data, training end, offline results: what the
model cards quote). Every stage runs its project CLI in a subprocess, resumes where it stopped
(generation per episode, training from its run state, tokenising per file), and can be left out
with `--skip` or replaced by existing data: `generate.store` (an episode store made elsewhere) or
`pretrain.encoder` (e.g. `models/encoder`: the policy is trained on that encoder's tokens).
A recipe may start from another (`base: cpu-small`) and name only what it changes
(`config/pipelines/cpu-folds.yaml`, the fold split). `--set` overrides any recipe key (a YAML value: `--set generate.episodes_per=3`,
`--set train.processes=1`). The policy's `train.model` and `train.train` mappings are layered key by
key (`--set train.model.event_progress=true` keeps the other model keys; a layer sets keys, it cannot
remove one of its base's). Compute threads per process are the recipe's `threads`, set here for
every stage, so a run's numbers do not depend on the caller's `OMP_NUM_THREADS`.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from instant_fold_core.compute_threads import pin_compute_threads
from instant_fold_core.config import check_numbers, override, read_yaml
from instant_fold_core.errors import ConfigError, InstantFoldError
from instant_fold_learning.encoder.training import ENCODER_DIR
from instant_fold_learning.keypoints.training import DETECTOR_DIR
from instant_fold_learning.policy.training import CHECKPOINT_DIR

STAGES = ("generate", "pretrain", "tokenize", "keypoints", "train", "evaluate")
#: `WORK/timings.jsonl`: one record per stage start (and the end); a resumed run appends again.
TIMINGS = "timings.jsonl"


class GeneratorRun(NamedTuple):
    """One `instant_fold_sim.generate` run of the generate stage (`--starts`: None for all)."""

    preset: str
    garments: str
    episodes_per: int
    starts: str | None


@dataclass(frozen=True)
class GenerateStage:
    """`instant_fold_sim.generate`: `episodes_per` start states x garments x modes."""

    preset: str = "cpu-small"
    garments: str = "proc:0:8"
    split: str = "train"
    modes: str = "sleeves_down__bottom_up/S,body_bottom_up__sleeves_down/S,body_side_fold_L__sleeves_down/L"
    episodes_per: int = 16
    seed: int = 0
    workers: int = 2
    worlds: int = 1
    #: Another simulator preset for the odd start states k (1, 3, ...), `preset` making the even
    #: ones: one store of both start sets, so that neither is out of the encoder's and the policy's
    #: training distribution (docs/policy.md, "Default models").
    odd_starts_preset: str | None = None
    #: Start states of some garments generated besides the main run, `GARMENTS@K,K...`: e.g.
    #: `proc:0:3@3`, start k = 3 of garments proc 0-2 (the breadth benchmark's), for the offline
    #: evaluation's held-out starts (`tokenize.heldout_starts`) without generating start 3 of every
    #: garment. A k may be >= `episodes_per`; seeds and names are those of a run with k + 1 starts.
    extra_starts: str | None = None
    #: An existing episode store (e.g. generated on another machine): not generated, read in place.
    store: str | None = None

    def __post_init__(self) -> None:
        check_numbers("generate", self, positive=("episodes_per", "workers", "worlds"), non_negative=("seed",))
        if self.odd_starts_preset and self.episodes_per < 2:
            raise ConfigError("generate.odd_starts_preset needs episodes_per >= 2 (start states of both presets)")
        self.extra()  # validates

    def extra(self) -> tuple[str, list[int]] | None:
        """`extra_starts` as (garments, sorted start states), or None."""
        if self.extra_starts is None:
            return None
        garments, sep, text = str(self.extra_starts).partition("@")
        try:
            ks = sorted({int(k) for k in text.split(",")})
        except ValueError:
            ks = []
        if not sep or not garments or not ks or ks[0] < 0:
            raise ConfigError(
                f"generate.extra_starts: expected GARMENTS@K[,K...] (e.g. proc:0:3@3), got {self.extra_starts!r}"
            )
        return garments, ks

    def preset_of(self, k: int) -> str:
        """The simulator preset of start state k."""
        return self.odd_starts_preset if self.odd_starts_preset and k % 2 == 1 else self.preset

    def parts(self) -> list[GeneratorRun]:
        """The generator runs, one after the other: one per preset of the main run's start states,
        then one per preset of `extra_starts`."""
        runs = self._runs(self.garments, list(range(self.episodes_per)), all_starts=True)
        if extra := self.extra():
            runs += self._runs(extra[0], extra[1], all_starts=False)
        return runs

    def _runs(self, garments: str, ks: list[int], all_starts: bool) -> list[GeneratorRun]:
        presets = dict.fromkeys(self.preset_of(k) for k in ks)
        if all_starts and len(presets) == 1:
            return [GeneratorRun(self.preset, garments, self.episodes_per, None)]
        return [
            GeneratorRun(p, garments, ks[-1] + 1, ",".join(str(k) for k in ks if self.preset_of(k) == p))
            for p in presets
        ]


@dataclass(frozen=True)
class PretrainStage:
    """`instant_fold_learning.pretrain_encoder` on the store's training split."""

    config: str = "cpu-small"
    #: 0: the weights pretraining starts from, saved untrained (the untrained-encoder row).
    steps: int = 600
    #: An existing encoder directory (e.g. models/encoder): not pretrained, its tokens are used.
    encoder: str | None = None

    def __post_init__(self) -> None:
        check_numbers("pretrain", self, non_negative=("steps",))


@dataclass(frozen=True)
class TokenizeStage:
    """`instant_fold_learning.tokenize_episodes`, one shard per worker."""

    #: Episode-name glob of the start states kept out of training (config/benchmarks/cpu.yaml start_ks).
    heldout_starts: str = "*__e00[345]"
    max_oracle_error: float = 0.15
    workers: int = 2

    def __post_init__(self) -> None:
        check_numbers("tokenize", self, positive=("max_oracle_error", "workers"))


@dataclass(frozen=True)
class KeypointsStage:
    """`instant_fold_learning.train_keypoints`: a keypoint detector preset (or YAML file)."""

    config: str = "cpu-small"
    steps: int = 4000

    def __post_init__(self) -> None:
        check_numbers("keypoints", self, positive=("steps",))


@dataclass(frozen=True)
class TrainStage:
    """`instant_fold_learning.train_policy`: a policy preset and overrides of its two sections."""

    config: str = "cpu-small"
    steps: int = 10000
    #: Training processes (DDP under torchrun, gloo on CPU); `train.batch_size` is global.
    processes: int = 2
    model: dict[str, Any] = field(default_factory=dict)
    train: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_numbers("train", self, positive=("steps", "processes"))


@dataclass(frozen=True)
class EvaluateStage:
    """`instant_fold_evaluation.evaluate_policy` on the training and the held-out starts."""

    samples: int = 256

    def __post_init__(self) -> None:
        check_numbers("evaluate", self, positive=("samples",))


@dataclass(frozen=True)
class Recipe:
    """Every setting of a pipeline run; `config/pipelines/*.yaml` override these defaults."""

    device: str = "cpu"
    #: Compute threads of every stage's processes (OMP, MKL, OpenBLAS): 1 is much faster than 2 on
    #: a shared 2-core machine, and fixes the numbers whatever the caller's environment says.
    threads: int = 1
    #: Copy the encoder and the policy into models/ at the end (their README model cards stay).
    install: bool = True
    generate: GenerateStage = field(default_factory=GenerateStage)
    pretrain: PretrainStage = field(default_factory=PretrainStage)
    tokenize: TokenizeStage = field(default_factory=TokenizeStage)
    keypoints: KeypointsStage = field(default_factory=KeypointsStage)
    train: TrainStage = field(default_factory=TrainStage)
    evaluate: EvaluateStage = field(default_factory=EvaluateStage)

    def __post_init__(self) -> None:
        check_numbers("", self, positive=("threads",))


class PipelineError(InstantFoldError):
    """A stage failed, or the recipe or the work directory cannot be used; the message says which."""


def recipe_path(name: str, config_root: Path) -> Path:
    """A recipe file: a path, or the name of one in `config_root/pipelines/`."""
    path = Path(name)
    if path.suffix in (".yaml", ".yml"):
        return path
    found = config_root / "pipelines" / f"{name}.yaml"
    if not found.is_file():
        names = sorted(p.stem for p in (config_root / "pipelines").glob("*.yaml"))
        raise ConfigError(f"recipe {name!r}: no {found} (recipes: {', '.join(names)})")
    return found


def read_recipe(path: Path, chain: tuple[Path, ...] = ()) -> Recipe:
    """The recipe of a YAML file. With a top-level `base: NAME` (a recipe of the same folder, or a
    YAML path relative to it) the file's keys override that recipe's, so a variant names only what
    it changes (in a mapping such as `train.model` too: its keys are taken over the base's)."""
    data = read_yaml(path, "pipeline recipe")
    if not isinstance(data, dict) or "base" not in data:
        return override(Recipe(), data, str(path))
    data = dict(data)
    name = data.pop("base")
    if not isinstance(name, str):
        raise ConfigError(f"{path}: base: expected a recipe name, got {name!r}")
    parent = path.parent / (name if Path(name).suffix in (".yaml", ".yml") else f"{name}.yaml")
    if parent.resolve() in chain or parent.resolve() == path.resolve():
        raise ConfigError(f"{path}: base: {name!r} is a cycle ({' -> '.join(str(c) for c in (*chain, path))})")
    if not parent.is_file():
        raise ConfigError(f"{path}: base: no recipe {parent}")
    return override(read_recipe(parent, (*chain, path.resolve())), data, str(path), merge_mappings=True)


def load_recipe(path: Path, settings: Sequence[str] = ()) -> Recipe:
    """The recipe of a YAML file (`read_recipe`), then the `STAGE.KEY=VALUE` settings applied in order."""
    recipe = read_recipe(path)
    for setting in settings:
        key, sep, text = setting.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set {setting!r}: expected KEY=VALUE, e.g. generate.episodes_per=3")
        try:
            value: Any = yaml.safe_load(text)
        except yaml.YAMLError:  # not YAML (a glob such as `*__e002`): the text itself
            value = text
        for part in reversed(key.split(".")):
            value = {part: value}
        recipe = override(recipe, value, "--set", merge_mappings=True)
    return recipe


def policy_config(recipe: Recipe) -> dict[str, Any]:
    """The policy YAML of the train stage: the preset, its model overrides, its train overrides."""
    stage = recipe.train
    return {"preset": stage.config, "model": dict(stage.model), "train": {"steps": stage.steps, **stage.train}}


class Pipeline:
    """One run of a recipe into a work directory (the stages' commands and their bookkeeping)."""

    def __init__(self, recipe: Recipe, work: Path, models: Path, python: str = sys.executable) -> None:
        self.recipe, self.work, self.models, self.python = recipe, work, models, python
        self.store = Path(recipe.generate.store) if recipe.generate.store else work / "store.zarr"
        #: The training runs' directories (`summarize` reads their logs) and their deployable outputs.
        self.pretrain_run, self.policy_run, self.keypoints_run = work / "pretrain", work / "policy", work / "keypoints"
        #: The token directories of the training and held-out starts, and the offline evaluation.
        self.tokens_train, self.tokens_heldout = work / "tokens_train", work / "tokens_heldout"
        self.offline = work / "policy_eval.json"
        self.encoder = Path(recipe.pretrain.encoder) if recipe.pretrain.encoder else self.pretrain_run / ENCODER_DIR
        self.policy = self.policy_run / CHECKPOINT_DIR
        self.detector = self.keypoints_run / DETECTOR_DIR

    # ------------------------------------------------------------------ running

    def stage(self, label: str) -> None:
        """Announce a stage and record its start (the model cards' wall times come from these)."""
        now = datetime.now(timezone.utc)
        print(f"[{now:%H:%M:%S}] {label}", flush=True)
        with open(self.work / TIMINGS, "a") as f:
            f.write(json.dumps({"stage": label, "utc": now.strftime("%Y-%m-%dT%H:%M:%SZ")}) + "\n")

    def run(self, *commands: list[str]) -> None:
        """Run the commands side by side (one per shard); any failure fails the stage."""
        procs = [subprocess.Popen(c) for c in commands]
        codes = [p.wait() for p in procs]
        for command, code in zip(commands, codes, strict=True):
            if code != 0:
                raise PipelineError(f"stage command failed (exit {code}): {' '.join(command)}")

    def module(self, name: str, *args: object) -> list[str]:
        return [self.python, "-m", name, *map(str, args)]

    # ------------------------------------------------------------------ stages

    def generate(self) -> None:
        g = self.recipe.generate
        if g.store:
            self.stage(f"1/6 episodes: using {self.store} (generate.store), not generated here")
            return
        parts = g.parts()
        runs = " / ".join(
            f"{r.preset}: {'' if r.garments == g.garments else r.garments + ' '}{'all' if r.starts is None else 'k = ' + r.starts}"
            for r in parts
        )
        self.stage(
            f"1/6 generating {g.episodes_per} start states x garments {g.garments} x modes {g.modes} "
            f"({runs}) into {self.store}"
        )
        for run in parts:  # one after the other: one generator per store
            self.run(
                self.module(
                    "instant_fold_sim.generate", "--out", self.store, "--preset", run.preset, "--garments", run.garments,
                    "--split", g.split, "--modes", g.modes, "--episodes-per", run.episodes_per, "--seed", g.seed,
                    "--workers", g.workers, "--worlds", g.worlds, *(() if run.starts is None else ("--starts", run.starts)),
                )
            )  # fmt: skip

    def pretrain(self) -> None:
        p = self.recipe.pretrain
        if p.encoder:
            self.stage(f"2/6 encoder: using {self.encoder} (pretrain.encoder), not pretrained here")
            return
        self.stage(
            f"2/6 encoder pretraining ({p.steps} steps{': the initial weights, untrained' if not p.steps else ''})"
        )
        self.run(
            self.module(
                "instant_fold_learning.pretrain_encoder", "--config", p.config, "--data", self.store,
                "--split", self.recipe.generate.split, "--steps", p.steps, "--device", self.recipe.device,
                "--out", self.pretrain_run, "--resume",
            )
        )  # fmt: skip

    def tokenize(self) -> None:
        t = self.recipe.tokenize
        self.stage("3/6 tokenising")
        common = (
            "--store", self.store, "--encoder", self.encoder, "--max-oracle-error", t.max_oracle_error,
            "--policy-config", self.recipe.train.config, "--device", self.recipe.device, "--no-progress",
        )  # fmt: skip
        tokenize = "instant_fold_learning.tokenize_episodes"
        # One shard per worker (the encoder runs on one thread): the training episodes on every core.
        self.run(
            *(
                self.module(tokenize, *common, "--out", self.tokens_train, "--exclude", t.heldout_starts,
                            "--shard", f"{k}/{t.workers}")
                for k in range(t.workers)
            )
        )  # fmt: skip
        self.run(self.module(tokenize, *common, "--out", self.tokens_heldout, "--match", t.heldout_starts))

    def keypoints(self) -> None:
        k = self.recipe.keypoints
        self.stage(f"4/6 keypoint detector ({k.steps} steps)")
        self.run(
            self.module(
                "instant_fold_learning.train_keypoints", "--config", k.config, "--steps", k.steps,
                "--tokens", self.tokens_train, "--eval-tokens", self.tokens_heldout, "--out", self.keypoints_run,
                "--device", self.recipe.device, "--resume", "--threads", self.recipe.threads,
            )
        )  # fmt: skip

    def train(self) -> None:
        s = self.recipe.train
        self.stage(f"5/6 policy training ({s.steps} steps)")
        config = self.work / "policy.yaml"
        config.write_text(yaml.safe_dump(policy_config(self.recipe), sort_keys=False))
        launcher = [self.python, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(s.processes)]
        command = self.module(
            "instant_fold_learning.train_policy", "--config", config, "--data", self.tokens_train,
            "--out", self.policy_run, "--device", self.recipe.device, "--resume",
            "--plot", self.work / "policy_training_curves.png",
        )  # fmt: skip
        self.run([*launcher, *command[1:]] if s.processes > 1 else command)

    def evaluate(self) -> None:
        self.stage("6/6 offline evaluation")
        self.run(
            self.module(
                "instant_fold_evaluation.evaluate_policy", "--checkpoint", self.policy,
                "--data", self.tokens_train, "--heldout", self.tokens_heldout,
                "--samples", self.recipe.evaluate.samples, "--out", self.offline,
            )
        )  # fmt: skip

    def install(self) -> None:
        """Replace the checkpoint files in models/, keep the model cards (README.md)."""
        for source, name in ((self.encoder, "encoder"), (self.detector, "keypoints"), (self.policy, "policy")):
            target = self.models / name
            if target.exists() and source.resolve() == target.resolve():
                continue  # pretrain.encoder: models/encoder
            target.mkdir(parents=True, exist_ok=True)
            for old in target.iterdir():
                if old.is_file() and old.name != "README.md":
                    old.unlink()
            for new in source.iterdir():
                shutil.copy2(new, target / new.name)

    def execute(self, stages: Sequence[str], install: bool = False) -> dict[str, Any]:
        """Run `stages` in pipeline order; with `install` (a whole run, all six) copy the models."""
        if install and set(stages) != set(STAGES):
            raise ValueError(f"install needs every stage, not {list(stages)}")
        pin_compute_threads(self.recipe.threads)  # every stage's processes inherit it
        self.work.mkdir(parents=True, exist_ok=True)
        for name in STAGES:
            if name in stages:
                getattr(self, name)()
        if install:
            self.install()
        self.stage("done")
        summary = self.summarize()
        (self.work / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
        return summary

    def _untrained_or_given(self) -> str:
        """The summary's encoder entry when the run trained none."""
        if self.recipe.pretrain.encoder:
            return "not pretrained here"
        if self.recipe.pretrain.steps == 0 and (self.pretrain_run / ENCODER_DIR).is_dir():
            return "untrained: the initial weights (pretrain.steps 0)"
        return "not pretrained yet"

    def summarize(self) -> dict[str, Any]:
        """What the model cards quote: stage wall times, data, encoder and policy training ends, offline results."""
        from instant_fold_learning.trainer import LOG_FILE, read_log
        from instant_fold_sim.generate import cost_by_context, generation_cost  # simulator: only here

        def log(run: Path) -> list[dict[str, Any]]:
            return read_log(run / LOG_FILE) if (run / LOG_FILE).is_file() else []

        first = _stage_starts(self.work)
        keys = list(first)
        minutes = {k: round((first[b] - first[k]).total_seconds() / 60, 1) for k, b in itertools.pairwise(keys)}
        encoder = [r for r in log(self.pretrain_run) if r.get("event", "train") == "train"]
        policy = log(self.policy_run)
        keypoints = next((r for r in reversed(log(self.keypoints_run)) if r["event"] == "end"), None)
        evaluation = json.loads(self.offline.read_text()) if self.offline.is_file() else {}
        return {
            "stage_minutes": minutes,
            "total_minutes": round((first[keys[-1]] - first[keys[0]]).total_seconds() / 60, 1),
            "timeline": _timeline(self.work),
            "episodes": {d.name: len(list(d.glob("*.npz"))) for d in (self.tokens_train, self.tokens_heldout)},
            "generation": generation_cost(self.store) if self.store.is_dir() else None,
            "generation_by_context": cost_by_context(self.store) if self.store.is_dir() else None,
            "encoder": {"first_loss": encoder[0]["loss"], "last": encoder[-1]}
            if encoder
            else self._untrained_or_given(),
            "keypoints": keypoints,
            "policy_start": next((r for r in policy if r["event"] == "start"), None),
            "policy_end": next((r for r in reversed(policy) if r["event"] == "end"), None),
            "offline": {
                split: {k: v for k, v in evaluation[split].items() if k != "first_grasp_episodes"}
                for split in ("train", "heldout")
                if split in evaluation
            },
        }


def _stage_records(work: Path) -> list[tuple[dict[str, str], datetime]]:
    """Every line of the timings log (stage label, UTC start) with its start parsed, in order."""
    records = [json.loads(line) for line in (work / TIMINGS).read_text().splitlines()]
    return [(r, datetime.fromisoformat(r["utc"].replace("Z", "+00:00"))) for r in records]


def _stage_starts(work: Path) -> dict[str, datetime]:
    """The first start of every stage (a resumed run appends again; the first counts), by stage number."""
    first: dict[str, datetime] = {}
    for record, start in _stage_records(work):
        first.setdefault(record["stage"].split(" ")[0], start)
    return first


def _timeline(work: Path) -> list[dict[str, Any]]:
    """Every stage start in order, with the minutes to the next: a run that was cut and resumed
    (across sessions, or restarted with other settings) shows which start did a stage's work,
    which `stage_minutes` (first start to first start) cannot."""
    records = _stage_records(work)
    return [
        {"stage": r["stage"], "utc": r["utc"], "minutes_to_next": round((b - a).total_seconds() / 60, 1)}
        for (r, a), (_, b) in itertools.pairwise(records)
    ]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pipeline", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("work", nargs="?", default="runs/default_models", help="work directory (resumed if it exists)")
    parser.add_argument(
        "--recipe",
        default="cpu-small",
        help="a recipe of config/pipelines/ (cpu-small, cpu-folds, paper) or a YAML file",
    )
    parser.add_argument("--set", dest="settings", action="append", default=[], metavar="STAGE.KEY=VALUE")
    parser.add_argument("--only", nargs="+", choices=STAGES, help="run these stages only (no install)")
    parser.add_argument("--skip", nargs="+", choices=STAGES, default=[], help="leave these stages out (no install)")
    parser.add_argument(
        "--models",
        default="models",
        help="the models folder `install` updates (default: models/ of the working directory)",
    )
    parser.add_argument("--print-recipe", action="store_true", help="print the resolved recipe as JSON and exit")
    return parser


def main(argv: list[str] | None = None) -> int:
    """The pipeline CLI: 0 when every stage ran, 2 for a bad recipe or setting, 1 when a stage failed."""
    from instant_fold_ros.bringup_share import config_dir

    args = build_parser().parse_args(argv)
    try:
        recipe = load_recipe(recipe_path(args.recipe, config_dir()), args.settings)
    except ConfigError as exc:
        print(f"pipeline: {exc}", file=sys.stderr)
        return 2
    if args.print_recipe:
        print(json.dumps(dataclasses.asdict(recipe), indent=1))
        return 0
    stages = [s for s in (args.only or STAGES) if s not in args.skip]
    # A run told which stages to run is an experiment, even when it names all six: it never
    # replaces the shipped models.
    install = recipe.install and args.only is None and not args.skip
    models = Path(args.models)
    if install and not (models / "README.md").is_file():  # told now, not after hours of training
        print(
            f"pipeline: {models.resolve()} is not the workspace's models folder (run from the workspace root, "
            "or pass --models, or --set install=false)",
            file=sys.stderr,
        )
        return 2
    try:
        summary = Pipeline(recipe, Path(args.work), models).execute(stages, install)
    except PipelineError as exc:
        print(f"pipeline: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(summary["stage_minutes"]), summary["total_minutes"], "min")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
