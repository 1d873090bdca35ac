"""The training pipeline: its recipes, its settings, and one small run of every stage for real."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from instant_fold.pipeline import STAGES, GenerateStage, Pipeline, load_recipe, main, policy_config, recipe_path
from instant_fold_core.compute_threads import THREAD_VARIABLES
from instant_fold_core.dataset.zarr_store import EpisodeStore
from instant_fold_core.errors import ConfigError
from instant_fold_ros.bringup_share import config_dir

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("name", ["cpu-small", "paper"])
def test_the_shipped_recipes_load_and_name_their_presets(name: str) -> None:
    recipe = load_recipe(recipe_path(name, config_dir()))
    assert recipe.generate.preset == recipe.pretrain.config == recipe.keypoints.config == recipe.train.config == name
    assert recipe.device == ("cuda" if name == "paper" else "cpu")


def test_a_recipe_on_a_base_names_only_what_it_changes(tmp_path: Path) -> None:
    """`base:` reads the named recipe of the same folder first: cpu-folds is cpu-small on the fold
    split (its policy model cpu-small's with progress through the fold and the progress bias, its
    training settings cpu-small's); cycles and missing bases are refused."""
    small, folds = (load_recipe(recipe_path(name, config_dir())) for name in ("cpu-small", "cpu-folds"))
    assert (folds.generate.modes, folds.generate.episodes_per, folds.train.steps) == ("training-folds", 2, 10000)
    assert folds.generate.extra_starts == "proc:0:3@3" and folds.tokenize.heldout_starts == "*__e003"
    assert (folds.train.model, folds.train.train, folds.keypoints) == (
        {**small.train.model, "event_progress": True, "progress_bias": True},
        small.train.train,
        small.keypoints,
    )
    assert not folds.install and small.install
    (tmp_path / "a.yaml").write_text("base: b\ntrain: {steps: 5}\n")
    (tmp_path / "b.yaml").write_text("base: a.yaml\n")
    with pytest.raises(ConfigError, match="cycle"):
        load_recipe(tmp_path / "a.yaml")
    (tmp_path / "c.yaml").write_text("base: nowhere\n")
    with pytest.raises(ConfigError, match="no recipe"):
        load_recipe(tmp_path / "c.yaml")
    (tmp_path / "b.yaml").write_text("generate: {episodes_per: 2}\n")
    recipe = load_recipe(tmp_path / "a.yaml", ["train.steps=9"])
    assert (recipe.generate.episodes_per, recipe.train.steps) == (2, 9)


def test_settings_override_keys_by_path_and_bad_ones_are_refused() -> None:
    path = recipe_path("cpu-small", config_dir())
    recipe = load_recipe(
        path,
        [
            "generate.episodes_per=3",
            "train.processes=1",
            "pretrain.encoder=models/encoder",
            "tokenize.heldout_starts=*__e002",
        ],
    )
    assert (recipe.generate.episodes_per, recipe.train.processes, recipe.pretrain.encoder) == (3, 1, "models/encoder")
    assert recipe.tokenize.heldout_starts == "*__e002"  # not YAML (an alias): the text itself
    assert recipe.generate.modes == load_recipe(path).generate.modes  # the rest of the section is kept
    policy = policy_config(load_recipe(path, ["train.steps=7"]))
    assert policy["train"]["steps"] == 7 and policy["train"]["batch_size"] == 32
    assert load_recipe(path, ["pretrain.steps=0"]).pretrain.steps == 0  # the untrained-encoder row
    layered = policy_config(load_recipe(path, ["train.model.event_progress=true", "train.train.ema_decay=0.99"]))
    assert layered["model"] == {**policy["model"], "event_progress": True}  # the recipe's other model keys kept
    assert layered["train"] == {**policy["train"], "steps": 10000, "ema_decay": 0.99}
    for bad, message in [
        ("generate.episodes=3", "episodes"),  # unknown key, named
        ("generate.episodes_per=three", "episodes_per"),
        ("train.processes=0", "processes"),
        ("pretrain.steps=-1", "pretrain.steps"),  # 0 is the untrained encoder; fewer is nothing
        ("threads", "KEY=VALUE"),
    ]:
        with pytest.raises(ConfigError, match=message):
            load_recipe(path, [bad])
    with pytest.raises(ConfigError, match="recipes: cpu-folds, cpu-small, paper"):
        recipe_path("cpu_small", config_dir())


def test_the_cli_refuses_a_bad_recipe_or_models_folder_before_any_stage(tmp_path: Path, capsys) -> None:
    assert main([str(tmp_path / "work"), "--set", "train.steps=-1"]) == 2
    assert "train.steps" in capsys.readouterr().err
    assert main([str(tmp_path / "work"), "--models", str(tmp_path / "nowhere")]) == 2
    assert "models folder" in capsys.readouterr().err
    assert not (tmp_path / "work").exists()


def test_odd_starts_of_another_preset_split_the_start_states_by_parity() -> None:
    """One store of two start sets: the generator runs once per preset, the even start states k
    from `preset`, the odd ones from `odd_starts_preset`, every k exactly once."""
    assert GenerateStage(episodes_per=16).parts() == [("cpu-small", "proc:0:8", 16, None)]
    parts = GenerateStage(episodes_per=5, odd_starts_preset="cpu-small-sleeve").parts()
    assert parts == [("cpu-small", "proc:0:8", 5, "0,2,4"), ("cpu-small-sleeve", "proc:0:8", 5, "1,3")]
    with pytest.raises(ConfigError, match="episodes_per >= 2"):
        GenerateStage(episodes_per=1, odd_starts_preset="cpu-small-sleeve")
    recipe = load_recipe(recipe_path("cpu-small", config_dir()), ["generate.odd_starts_preset=cpu-small-sleeve"])
    assert recipe.generate.parts()[1] == ("cpu-small-sleeve", "proc:0:8", 16, "1,3,5,7,9,11,13,15")
    with pytest.raises(ConfigError, match="episodes_per >= 2"):
        load_recipe(recipe_path("cpu-small", config_dir()), ["generate.odd_starts_preset=x", "generate.episodes_per=1"])


def test_extra_starts_generate_some_garments_further_start_states_after_the_main_run() -> None:
    """`extra_starts`: the held-out start k = 3 of three garments beside 3 starts of every garment,
    each k from the preset its parity says, with the seeds and names of a run of k + 1 starts."""
    stage = GenerateStage(episodes_per=3, extra_starts="proc:0:3@3")
    assert stage.parts() == [("cpu-small", "proc:0:8", 3, None), ("cpu-small", "proc:0:3", 4, "3")]
    mixed = GenerateStage(episodes_per=2, odd_starts_preset="sleeve", extra_starts="proc:0:1@4,3").parts()
    assert mixed == [
        ("cpu-small", "proc:0:8", 2, "0"), ("sleeve", "proc:0:8", 2, "1"),
        ("sleeve", "proc:0:1", 5, "3"), ("cpu-small", "proc:0:1", 5, "4"),
    ]  # fmt: skip
    for bad in ("proc:0:3", "@3", "proc:0:3@", "proc:0:3@x", "proc:0:3@-1"):
        with pytest.raises(ConfigError, match="extra_starts"):
            GenerateStage(extra_starts=bad)
    recipe = load_recipe(recipe_path("cpu-small", config_dir()), ["generate.extra_starts=proc:0:3@3"])
    assert recipe.generate.parts()[-1] == ("cpu-small", "proc:0:3", 4, "3")


@pytest.mark.slow
def test_a_small_run_of_every_stage_trains_installs_and_resumes(tmp_path: Path) -> None:
    """generate -> pretrain -> tokenize -> keypoints -> train (torchrun, 2 processes) -> evaluate ->
    install, each stage its real CLI in a subprocess, at a size of minutes; then the same command
    again resumes (nothing is redone) and the models folder holds the run's encoder, keypoint
    detector and policy beside their cards."""
    models = tmp_path / "models"
    for name in ("encoder", "keypoints", "policy"):
        (models / name).mkdir(parents=True)
        (models / name / "README.md").write_text(f"{name} card\n")
        (models / name / "stale.json").write_text("{}")
    (models / "README.md").write_text("models\n")
    work = tmp_path / "work"
    settings = [
        "generate.garments=proc:0:2", "generate.modes=sleeves_down__bottom_up/S", "generate.episodes_per=2",
        "generate.odd_starts_preset=cpu-small-sleeve", "generate.extra_starts=proc:0:2@2",
        "tokenize.heldout_starts=*__e002", "pretrain.steps=2", "keypoints.steps=2", "train.steps=2",
        "evaluate.samples=4",
    ]  # fmt: skip
    command = [sys.executable, "-m", "instant_fold.pipeline", str(work), "--models", str(models)]
    for setting in settings:
        command += ["--set", setting]
    first = subprocess.run(command, capture_output=True, text=True, timeout=1500)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    summary = json.loads((work / "summary.json").read_text())
    assert summary["episodes"] == {"tokens_train": 4, "tokens_heldout": 2}
    assert summary["encoder"]["last"]["step"] == 2
    assert summary["policy_start"]["world_size"] == 2 and summary["policy_end"]["event"] == "end"
    assert summary["offline"]["train"]["episodes"] == 4 and summary["offline"]["heldout"]["episodes"] == 2
    assert summary["keypoints"]["step"] == 2 and summary["keypoints"]["eval"]["frames"] > 0
    assert list(summary["stage_minutes"]) == ["1/6", "2/6", "3/6", "4/6", "5/6", "6/6"]
    timeline = summary["timeline"]
    assert [row["stage"].split(" ")[0] for row in timeline] == ["1/6", "2/6", "3/6", "4/6", "5/6", "6/6"]
    assert all(row["minutes_to_next"] >= 0 for row in timeline)
    by_context, generation = summary["generation_by_context"], summary["generation"]
    assert generation["episodes"] == sum(c["episodes"] for c in by_context.values()) == 6 and generation["frames"] > 0
    store = EpisodeStore(work / "store.zarr")
    assert {name: store.meta(name)["preset"] for name in store.names()} == {
        f"proc_0000{g}__m02_S__e00{k}": "cpu-small-sleeve" if k == 1 else "cpu-small" for g in (0, 1) for k in range(3)
    }
    for name, source in (
        ("encoder", work / "pretrain" / "encoder"),
        ("keypoints", work / "keypoints" / "detector"),
        ("policy", work / "policy" / "checkpoint"),
    ):
        assert sorted(p.name for p in (models / name).iterdir()) == sorted(
            ["README.md", *(p.name for p in source.iterdir())]
        )
        assert (models / name / "README.md").read_text() == f"{name} card\n"
    weights = (models / "policy" / "model.safetensors").read_bytes()

    again = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "0 tokenised" in again.stdout and "already finished" in again.stdout + again.stderr
    assert (models / "policy" / "model.safetensors").read_bytes() == weights
    assert [json.loads(line)["stage"].split(" ")[0] for line in (work / "timings.jsonl").read_text().splitlines()] == [
        *("1/6", "2/6", "3/6", "4/6", "5/6", "6/6", "done") * 2
    ]


def test_only_and_skip_choose_stages_and_only_a_whole_run_installs(tmp_path: Path, monkeypatch) -> None:
    """Stage selection through the CLI without running anything: the stages asked for, in pipeline
    order; the models are installed by a whole run only, never by `--only` or `--skip`, even when
    they name all six stages (an experiment once replaced the shipped models that way)."""
    ran: list[str] = []
    for name in THREAD_VARIABLES:  # execute() pins them for its stages: this process gets them back after the test
        monkeypatch.setenv(name, os.environ.get(name, "1"))
    for name in (*STAGES, "install"):
        monkeypatch.setattr(Pipeline, name, lambda self, name=name: ran.append(name))
    monkeypatch.setattr(Pipeline, "summarize", lambda self: {"stage_minutes": {}, "total_minutes": 0})
    models = tmp_path / "models"
    models.mkdir()
    (models / "README.md").write_text("cards\n")
    work = str(tmp_path / "work")

    def stages(*args: str) -> list[str]:
        ran.clear()
        assert main([work, "--models", str(models), *args]) == 0
        return list(ran)

    assert stages("--only", "evaluate", "train") == ["train", "evaluate"]
    assert stages("--only", *reversed(STAGES)) == list(STAGES)
    assert stages("--skip", "generate") == list(STAGES[1:])
    assert stages() == [*STAGES, "install"]
    assert stages("--set", "install=false") == list(STAGES)
    recipe = load_recipe(recipe_path("cpu-small", config_dir()))
    assert {os.environ[name] for name in THREAD_VARIABLES} == {str(recipe.threads)}
    with pytest.raises(ValueError, match="install needs every stage"):
        Pipeline(recipe, tmp_path / "w", models).execute(["train"], True)
