"""Tokenising an episode store for policy training: same tokens as deployment, resumable, clear errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("zarr", reason="episode stores need zarr 3 (Python >= 3.11)")

from instant_fold_core.dataset.zarr_store import EpisodeStore
from instant_fold_core.rgbd import RGBDFrame
from instant_fold_core.validation import ValidationError
from instant_fold_learning.encoder.configuration import preset as encoder_preset
from instant_fold_learning.encoder.modeling import ClothEncoder
from instant_fold_learning.encoder.preprocess import rgbd_tensors
from instant_fold_learning.encoder.synthetic import synthetic_dataset
from instant_fold_learning.encoder.tokenize import tokenize_frame
from instant_fold_learning.policy.data import TokenizedEpisode
from instant_fold_learning.policy.tokenize_episodes import LEGACY_MANIFEST, MANIFEST, tokenize_episode
from instant_fold_learning.tokenize_episodes import main

ORACLE = {"good_a": 0.05, "good_b": 0.1, "bad": 0.3}


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """Three 3-frame synthetic episodes of one garment; 'bad' has a failed oracle, all split train."""
    path = tmp_path_factory.mktemp("store") / "eps.zarr"
    store = EpisodeStore(path, mode="a")
    for (name, err), episode in zip(ORACLE.items(), synthetic_dataset(1, 3, 3, 64), strict=True):
        episode.meta.update(split="train", mode="m", oracle={"max_error": err})
        store.write(name, episode)
    return path


@pytest.fixture(scope="module")
def encoder_dir(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    return ClothEncoder(encoder_preset("cpu-small")).save_pretrained(tmp_path_factory.mktemp("tok") / "encoder")


def test_batched_tokens_equal_deployment_tokens(store, encoder_dir):
    encoder = ClothEncoder.from_pretrained(encoder_dir)
    episode = EpisodeStore(store).read("good_a")
    tokenized = tokenize_episode(encoder, episode, batch_size=2)  # batches of 2 + 1 frames
    for t in range(episode.num_frames):
        ref = tokenize_frame(encoder, RGBDFrame(episode.rgb[t], episode.depth[t], episode.intrinsics), episode.mask[t])
        np.testing.assert_allclose(tokenized.cloth_positions[t], ref.positions, atol=1e-6)
        np.testing.assert_allclose(tokenized.cloth_features[t], ref.features, atol=1e-5)
        np.testing.assert_array_equal(tokenized.cloth_valid[t], ref.valid)
    np.testing.assert_array_equal(tokenized.arm_state, episode.arm_state)
    np.testing.assert_array_equal(tokenized.keyframes, episode.keyframes)
    # One frame per batch: training data and deployment take the same path, so bit-identical tokens.
    single = tokenize_episode(encoder, episode, batch_size=1)
    for t in range(episode.num_frames):
        ref = tokenize_frame(encoder, RGBDFrame(episode.rgb[t], episode.depth[t], episode.intrinsics), episode.mask[t])
        np.testing.assert_array_equal(single.cloth_positions[t], ref.positions)
        np.testing.assert_array_equal(single.cloth_features[t], ref.features)
        np.testing.assert_array_equal(single.cloth_valid[t], ref.valid)


def test_preprocessing_scales_colour_and_refuses_non_uint8_images():
    color = np.zeros((2, 4, 5, 3), np.uint8)
    color[0, 1, 2] = (255, 51, 0)
    depth, mask = np.ones((2, 4, 5), np.float32), np.ones((2, 4, 5), bool)
    k = np.eye(3)
    out = rgbd_tensors(color, depth, mask, k)
    assert out.rgb.shape == (2, 3, 4, 5) and out.rgb.dtype == torch.float32
    assert out.rgb[0, :, 1, 2].tolist() == pytest.approx([1.0, 0.2, 0.0])
    assert out.intrinsics.shape == (2, 3, 3) and out.mask.dtype == torch.bool
    with pytest.raises(ValidationError, match=r"color: expected uint8 \[B, H, W, 3\], got float32"):
        rgbd_tensors(color.astype(np.float32) / 255, depth, mask, k)


def test_cli_filters_by_oracle_and_resumes(store, encoder_dir, tmp_path, capsys):
    out = tmp_path / "tokens"
    args = ["--store", str(store), "--encoder", str(encoder_dir), "--out", str(out), "--no-progress"]
    assert main([*args, "--max-oracle-error", "0.15", "--policy-config", "cpu-small"]) == 0
    assert sorted(p.stem for p in out.glob("*.npz")) == ["good_a", "good_b"]
    assert "skipped bad (oracle error 0.300 > 0.15)" in capsys.readouterr().out
    episode = TokenizedEpisode.load(out / "good_a.npz")
    assert episode.meta["oracle"]["max_error"] == ORACLE["good_a"] and episode.cloth_features.shape == (3, 64, 64)
    # Resume: an existing file is kept as is, a missing one is written again.
    stamp = (out / "good_a.npz").stat().st_mtime_ns
    (out / "good_b.npz").unlink()
    assert main(args) == 0  # without the oracle filter 'bad' is tokenised too
    assert "2 tokenised, 1 already present, 0 skipped" in capsys.readouterr().out
    assert (out / "good_a.npz").stat().st_mtime_ns == stamp
    assert not list(out.glob("*.partial"))


def test_cli_errors_name_the_problem(store, encoder_dir, tmp_path, capsys):
    out = str(tmp_path / "tokens")
    base = ["--encoder", str(encoder_dir), "--out", out, "--no-progress"]
    assert main(["--store", str(tmp_path / "missing.zarr"), *base]) == 2
    assert "no such episode store" in capsys.readouterr().err
    assert main(["--store", str(tmp_path), *base]) == 2
    assert "not a zarr store" in capsys.readouterr().err
    assert main(["--store", str(store), "--encoder", str(tmp_path), "--out", out]) == 2
    assert "no model.safetensors" in capsys.readouterr().err
    assert main(["--store", str(store), *base, "--policy-config", "paper"]) == 2
    assert "expects model.num_cloth_tokens=64, model.cloth_feature_dim=256" in capsys.readouterr().err
    assert main(["--store", str(store), *base, "--split", "heldout"]) == 2
    assert "no episode left to tokenise" in capsys.readouterr().err
    # Tokens of another encoder in the output directory are never mixed in.
    assert main(["--store", str(store), *base, "--max-oracle-error", "0.07"]) == 0
    torch.manual_seed(1)
    other = ClothEncoder(encoder_preset("cpu-small")).save_pretrained(tmp_path / "other")
    assert main(["--store", str(store), "--encoder", str(other), "--out", out, "--no-progress"]) == 2
    assert "holds tokens of another encoder" in capsys.readouterr().err
    assert (Path(out) / MANIFEST).is_file()
    # A token directory written before the rename names its encoder in `tokenizer.json`: still checked.
    (Path(out) / MANIFEST).rename(Path(out) / LEGACY_MANIFEST)
    assert main(["--store", str(store), "--encoder", str(other), "--out", out, "--no-progress"]) == 2
    assert "holds tokens of another encoder" in capsys.readouterr().err
    assert main(["--store", str(store), *base, "--max-oracle-error", "0.07"]) == 0
    assert not (Path(out) / MANIFEST).exists()


def test_shards_tokenise_a_store_together(store, encoder_dir, tmp_path, capsys):
    """Two processes' shards into one directory give exactly the files of one run, bit for bit."""
    args = ["--store", str(store), "--encoder", str(encoder_dir), "--no-progress"]
    assert main([*args, "--out", str(tmp_path / "one")]) == 0
    shards = [f"{k}/2" for k in range(2)]
    for shard in shards:
        assert main([*args, "--out", str(tmp_path / "two"), "--shard", shard]) == 0
    out = capsys.readouterr().out
    assert "2 tokenised" in out and "1 tokenised" in out  # 3 episodes: 0, 2 and 1
    one, two = (sorted((tmp_path / d).iterdir()) for d in ("one", "two"))
    assert [p.name for p in one] == [p.name for p in two] == ["bad.npz", "encoder.json", "good_a.npz", "good_b.npz"]
    for a, b in zip(one, two, strict=True):
        assert a.read_bytes() == b.read_bytes(), a.name
    for bad in ("1", "a/2"):
        with pytest.raises(SystemExit):
            main([*args, "--out", str(tmp_path / "bad"), "--shard", bad])
    assert main([*args, "--out", str(tmp_path / "bad"), "--shard", "2/2"]) == 2
    assert "--shard: expected K/N with 0 <= K < N, got 2/2" in capsys.readouterr().err
