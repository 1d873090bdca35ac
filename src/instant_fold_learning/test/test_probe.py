"""Correspondence probe: oracle features score perfectly, random ones do not; PCA figure renders."""

import torch
import torch.nn.functional as F

from instant_fold_learning.encoder import ClothEncoder, preset
from instant_fold_learning.encoder.probe import (
    EncodedTrajectory,
    correspondence_probe,
    keypoint_correspondence_errors,
    knn_predict,
    particle_correspondence_errors,
    pca_colours,
    pca_figure,
)
from instant_fold_learning.encoder.synthetic import make_cloth, synthetic_episode


def oracle_trajectory(features_from_particle: bool, seed: int) -> EncodedTrajectory:
    """Two frames of a moving cloth; tokens sit on particles, features identify the particle."""
    gen = torch.Generator().manual_seed(seed)
    m, n = 60, 40
    base = torch.rand(m, 3, generator=torch.Generator().manual_seed(0)) * 0.4
    particles = torch.stack([base, base + torch.tensor([0.1, 0.05, 0.0])])
    ids = torch.stack([torch.randperm(m, generator=gen)[:n] for _ in range(2)])
    positions = torch.stack([particles[t][ids[t]] for t in range(2)]) + 0.002
    emb = F.normalize(torch.randn(m, 16, generator=torch.Generator().manual_seed(1)), dim=-1)
    feats = emb[ids] if features_from_particle else F.normalize(torch.randn(2, n, 16, generator=gen), dim=-1)
    kp_ids = torch.arange(7)
    return EncodedTrajectory(
        "c",
        positions,
        feats,
        torch.ones(2, n, dtype=torch.bool),
        particles,
        torch.ones(2, m, dtype=torch.bool),
        particles[:, kp_ids],
        torch.ones(2, 7, dtype=torch.bool),
    )


def test_knn_prediction_is_similarity_weighted():
    feat = torch.eye(3)
    pos = torch.tensor([[0.0, 0, 0], [1.0, 0, 0], [0.0, 1, 0]])
    q = F.normalize(torch.tensor([[1.0, 1.0, 0.0]]), dim=-1)
    assert torch.allclose(knn_predict(q, feat, pos, torch.ones(3, dtype=torch.bool), k=2), torch.tensor([[0.5, 0, 0]]))
    assert torch.allclose(knn_predict(feat[:1], feat, pos, torch.ones(3, dtype=torch.bool), k=1), pos[:1])


def test_oracle_features_track_particles_and_random_features_do_not():
    oracle = oracle_trajectory(True, seed=2)
    err = particle_correspondence_errors(oracle, 0, oracle, 1, k=1)
    shared = len(set(oracle.features[0].argmax(-1).tolist()))  # sanity: many tokens
    assert shared > 10 and err.numel() > 0
    # tokens whose particle also carries a token in the target are found exactly (up to offsets)
    assert (err < 0.01).float().mean() > 0.5
    rand = oracle_trajectory(False, seed=2)
    err_rand = particle_correspondence_errors(rand, 0, rand, 1, k=1)
    assert (err_rand < 0.01).float().mean() < (err < 0.01).float().mean() - 0.3
    kp = keypoint_correspondence_errors(oracle, 0, oracle, 1, k=3, radius=0.2)
    assert kp.numel() == 7


def test_probe_and_pca_figure_on_synthetic_episodes(tmp_path):
    eps = [synthetic_episode(make_cloth(c), seed=s, frames=4, image_size=64) for c in range(2) for s in range(2)]
    torch.manual_seed(0)
    tok = ClothEncoder(preset("cpu-small")).eval()
    res = correspondence_probe(tok, eps, max_pairs=10)
    assert set(res) == {"intra_trajectory", "cross_trajectory", "cross_cloth"}
    for r in res.values():
        assert r["n"] > 0 and 0 <= r["pck2"] <= r["pck5"] <= 100 and r["err_cm"] > 0
    path = pca_figure({"random": tok}, eps[0], tmp_path / "pca.png", max_frames=3)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    colours = pca_colours(torch.randn(3, 10, 8), torch.ones(3, 10, dtype=torch.bool))
    assert colours.shape == (3, 10, 3) and colours.min() >= 0 and colours.max() <= 1
