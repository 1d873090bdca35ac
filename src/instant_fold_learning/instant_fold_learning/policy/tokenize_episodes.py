"""Tokenise an episode store with the frozen cloth encoder into the `.npz` directory the policy trains on.

    python -m instant_fold_learning.tokenize_episodes --store data/sim.zarr --encoder models/encoder \
        --out data/tokens --max-oracle-error 0.15 --policy-config cpu-small

Every frame of every selected episode goes through the encoder in batches (deterministic FPS, as
at deployment, so training and deployment see the same tokens for the same observation). One
`<episode name>.npz` (`TokenizedEpisode.save`) per episode; it is written under a temporary name
and renamed when complete, so an interrupted run is resumed by running the same command again
(existing files are skipped). `encoder.json` in the output directory records which encoder
produced the tokens: resuming with another encoder is an error rather than a silently mixed set.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from instant_fold_core.checkpoint import WEIGHTS_FILE, CheckpointError
from instant_fold_core.dataset.schema import Episode
from instant_fold_core.device import resolve_device
from instant_fold_core.errors import ArtifactError
from instant_fold_core.geometry import GeometryError
from instant_fold_learning.encoder.modeling import ClothEncoder
from instant_fold_learning.encoder.tokenize import tokenize_batch
from instant_fold_learning.policy.configuration import load_config
from instant_fold_learning.policy.data import PolicyDataError, TokenizedEpisode

MANIFEST = "encoder.json"
#: What token directories written before the encoder had one name call the manifest.
LEGACY_MANIFEST = "tokenizer.json"


class TokenizeError(ArtifactError):
    """The store, the encoder or the output directory cannot be used; the message says which."""


def tokenize_episode(encoder: ClothEncoder, episode: Episode, batch_size: int = 32) -> TokenizedEpisode:
    """Cloth tokens of every frame of `episode` (batches of `batch_size` frames, deterministic FPS),
    through the same `tokenize_batch` as deployment."""
    if batch_size < 1:
        raise ValueError(f"batch_size: must be >= 1, got {batch_size}")
    episode.validate()
    parts = [
        tokenize_batch(encoder, episode.rgb[sl], episode.depth[sl], episode.mask[sl], episode.intrinsics)
        for sl in (slice(start, start + batch_size) for start in range(0, episode.num_frames, batch_size))
    ]
    positions, features, valid = (np.concatenate(p) for p in zip(*parts, strict=True))
    return TokenizedEpisode.from_episode(episode, positions, features, valid)


def oracle_error(meta: dict[str, Any]) -> float | None:
    """The episode's worst per-move oracle error (None when the generator recorded none)."""
    oracle = meta.get("oracle")
    if isinstance(oracle, dict) and "max_error" in oracle:
        return float(oracle["max_error"])
    return None


def select_episodes(
    store: Any,
    split: str = "train",
    modes: Iterable[str] | None = None,
    max_oracle_error: float | None = None,
    match: Iterable[str] | None = None,
    exclude: Iterable[str] | None = None,
) -> tuple[list[str], dict[str, str]]:
    """Names of the store's episodes to tokenise, and the skipped ones with the reason. `match` /
    `exclude`: shell patterns on episode names (e.g. `*__e002` = start state k = 2 of every garment)."""
    wanted_modes = set(modes) if modes else None
    keep, skipped = [], {}
    for name in store.names():
        if match and not any(fnmatch.fnmatchcase(name, p) for p in match):
            continue
        if exclude and any(fnmatch.fnmatchcase(name, p) for p in exclude):
            continue
        meta = store.meta(name)
        if split != "all" and meta.get("split") != split:
            skipped[name] = f"split {meta.get('split')!r}"
        elif wanted_modes is not None and meta.get("mode") not in wanted_modes:
            skipped[name] = f"mode {meta.get('mode')!r}"
        elif max_oracle_error is not None and (err := oracle_error(meta)) is not None and err > max_oracle_error:
            skipped[name] = f"oracle error {err:.3f} > {max_oracle_error}"
        else:
            keep.append(name)
    return keep, skipped


def encoder_identity(directory: str | Path) -> dict[str, str]:
    """Path and weight hash of an encoder checkpoint: what tokens in an output directory came from."""
    weights = Path(directory) / WEIGHTS_FILE
    if not weights.is_file():
        raise TokenizeError(f"--encoder {directory}: no {WEIGHTS_FILE} (not a ClothEncoder.save_pretrained dir)")
    return {
        "encoder": str(Path(directory).resolve()),
        "weights_sha256": hashlib.sha256(weights.read_bytes()).hexdigest(),
    }


def check_manifest(out: Path, identity: dict[str, str]) -> None:
    """Create `encoder.json`, or make sure an existing one (or a legacy `tokenizer.json`) names the
    same encoder weights."""
    path = out / MANIFEST
    legacy = out / LEGACY_MANIFEST
    if not path.is_file() and legacy.is_file():
        path = legacy
    if path.is_file():
        old = json.loads(path.read_text())
        if old.get("weights_sha256") != identity["weights_sha256"]:
            raise TokenizeError(
                f"--out {out}: holds tokens of another encoder ({old.get('encoder', old.get('tokenizer'))}); "
                "use a new output directory or delete it"
            )
        return
    # Atomically: the shards of one run (`--shard`) create it at the same time.
    tmp = path.with_name(f"{path.name}.{os.getpid()}.partial")
    tmp.write_text(json.dumps(identity, indent=2) + "\n")
    os.replace(tmp, path)


def check_dims(encoder: ClothEncoder, policy_config: str) -> None:
    """The tokens must plug into the policy: same N and D as `policy_config`'s model."""
    model = load_config(policy_config).model
    if (encoder.num_tokens, encoder.feature_dim) != (model.num_cloth_tokens, model.cloth_feature_dim):
        raise TokenizeError(
            f"encoder gives N={encoder.num_tokens} tokens of D={encoder.feature_dim}, but policy config "
            f"{policy_config!r} expects model.num_cloth_tokens={model.num_cloth_tokens}, "
            f"model.cloth_feature_dim={model.cloth_feature_dim}"
        )


def save_atomic(episode: TokenizedEpisode, path: Path) -> None:
    """Write `path` via a temporary name that `train_policy --data` (which globs *.npz) never reads."""
    tmp = path.with_name(path.name + ".partial")
    with tmp.open("wb") as f:
        episode.save(f)
    os.replace(tmp, path)


def tokenize_store(
    store_path: str | Path,
    encoder_dir: str | Path,
    out: str | Path,
    split: str = "train",
    modes: Iterable[str] | None = None,
    max_oracle_error: float | None = None,
    policy_config: str | None = None,
    batch_size: int = 32,
    device: str = "auto",
    progress: bool = True,
    match: Iterable[str] | None = None,
    exclude: Iterable[str] | None = None,
    shard: tuple[int, int] = (0, 1),
) -> dict[str, Any]:
    """Tokenise the selected episodes of a store into `out/<name>.npz`; returns what was done/skipped.
    `shard` (k, n): only every n-th selected episode from the k-th, so that n processes into the
    same `out` tokenise a store together (one per core: the encoder runs on one thread)."""
    k, n = shard
    if not 0 <= k < n:
        raise TokenizeError(f"--shard: expected K/N with 0 <= K < N, got {k}/{n}")
    from instant_fold_core.dataset.zarr_store import EpisodeStore, StoreError

    if not Path(store_path).exists():
        raise TokenizeError(f"--store {store_path}: no such episode store")
    try:
        store = EpisodeStore(store_path)
    except StoreError as exc:
        raise TokenizeError(f"--store: {exc}") from exc
    identity = encoder_identity(encoder_dir)
    try:
        encoder = ClothEncoder.from_pretrained(encoder_dir, resolve_device(device))
    except CheckpointError as exc:
        raise TokenizeError(f"--encoder: {exc}") from exc
    if policy_config:
        check_dims(encoder, policy_config)
    names, skipped = select_episodes(store, split, modes, max_oracle_error, match, exclude)
    if not names:
        raise TokenizeError(f"--store {store_path}: no episode left to tokenise (skipped: {skipped})")
    names = names[k::n]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    check_manifest(out, identity)
    done, existing = [], []
    for name in tqdm(names, desc="tokenise episodes", unit="ep", disable=not progress):
        path = out / f"{name}.npz"
        if path.is_file():
            existing.append(name)
            continue
        try:
            episode = store.read(name)
            episode.meta.setdefault("episode_name", name)
            save_atomic(tokenize_episode(encoder, episode, batch_size), path)
        except (StoreError, GeometryError, PolicyDataError) as exc:
            raise TokenizeError(f"episode {name}: {exc}") from exc
        done.append(name)
    return {"tokenized": done, "existing": existing, "skipped": skipped, "out": str(out)}
