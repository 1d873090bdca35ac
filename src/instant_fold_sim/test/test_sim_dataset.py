"""Episode store, keyframes, motion filter, the generation CLI (write, read back, resume)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from instant_fold_core.dataset.filtering import motion_filter
from instant_fold_core.dataset.keyframes import extract_keyframes
from instant_fold_core.dataset.schema import META_KEYS, Episode
from instant_fold_core.dataset.zarr_store import EpisodeStore, StoreError
from instant_fold_sim import generate


def _episode(t: int = 6, m: int = 20, res: int = 16) -> Episode:
    rng = np.random.default_rng(0)
    return Episode(
        rgb=rng.integers(0, 255, (t, res, res, 3), dtype=np.uint8),
        depth=rng.uniform(0.5, 1.0, (t, res, res)).astype(np.float32),
        mask=rng.random((t, res, res)) > 0.5,
        intrinsics=np.eye(3, dtype=np.float32),
        extrinsics=np.eye(4, dtype=np.float32),
        arm_state=rng.random((t, 2, 4)).astype(np.float32),
        action=rng.random((t, 2, 4)).astype(np.float32),
        particles=rng.random((t, m, 3)).astype(np.float32),
        particle_visible=rng.random((t, m)) > 0.3,
        keypoints=rng.random((t, 7, 3)).astype(np.float32),
        keypoint_particle_ids=np.arange(7, dtype=np.int32),
        keyframes=np.array([0, 2, t - 1], dtype=np.int32),
        meta={"mode": "x", "np_value": np.float64(1.5), "flag": np.bool_(True), "garment": {"split": "train"}},
    )


def test_store_roundtrip_is_exact_and_crash_safe(tmp_path):
    store = EpisodeStore(tmp_path / "s.zarr", mode="a")
    ep = _episode()
    store.write("a", ep)
    back = store.read("a")
    for field in ("rgb", "depth", "mask", "arm_state", "particles", "particle_visible", "keyframes"):
        np.testing.assert_array_equal(getattr(back, field), getattr(ep, field))
    assert back.meta["np_value"] == 1.5 and back.meta["flag"] is True
    # The format keeps its array name for the arm state: stores written before stay readable.
    assert (tmp_path / "s.zarr" / "episodes" / "a" / "gripper_state").is_dir()
    # A crashed writer leaves only a hidden temporary group: it is not an episode and is cleaned.
    (tmp_path / "s.zarr" / "episodes" / ".tmp-b-123").mkdir()
    assert store.names() == ["a"] and store.clean_partial() == 1
    with pytest.raises(StoreError, match="already exists"):
        store.write("a", ep)
    sub = store.read("a", frames=np.array([0, 1, 5]))
    assert sub.num_frames == 3 and sub.keyframes.tolist() == [0, 2]
    with pytest.raises(StoreError, match="not a zarr store"):
        EpisodeStore(tmp_path / "nothing")
    # Corrupt a chunk: reading names the episode instead of returning garbage.
    chunk = next((tmp_path / "s.zarr" / "episodes" / "a" / "particles").rglob("c/*/*/*"))
    chunk.write_bytes(b"garbage")
    with pytest.raises(StoreError, match="corrupt"):
        store.read("a")


def test_keyframes_follow_grasps_releases_and_sequential_motion():
    t = 60
    gs = np.zeros((t, 2, 4))
    gs[:, :, 3] = 1.0
    gs[10:25, 0, 3] = 0.0  # left arm holds cloth 10..24
    gs[5:30, 0, 0] = np.linspace(0, 1, 25)  # left moves 5..29
    gs[30:, 0, 0] = 1.0
    gs[35:50, 1, 0] = np.linspace(0, 1, 15)  # right starts after left finished
    gs[50:, 1, 0] = 1.0
    gs[38:45, 1, 3] = 0.0
    kf = extract_keyframes(gs).tolist()
    assert kf[0] == 0 and kf[-1] == t - 1
    assert {10, 25, 38, 45} <= set(kf)  # grasps and releases
    assert any(abs(k - 30) <= 1 for k in kf) and any(abs(k - 35) <= 1 for k in kf)  # left stops, right starts
    with pytest.raises(ValueError, match="arm_state"):
        extract_keyframes(np.zeros((3, 4)))


def test_motion_filter_keeps_moving_frames_and_caps_length():
    p = np.zeros((40, 100, 3))
    p[10:, :50, 0] = 0.05  # half the cloth moves 5 cm at frame 10
    p[20:, :10, 1] = 0.05  # only 10 % moves at frame 20: below the 15 % threshold
    assert motion_filter(p).tolist() == [0, 10]
    walk = np.cumsum(np.full((50, 10, 3), 0.03), axis=0)
    kept = motion_filter(walk)
    assert len(kept) == 15 and kept[0] == 0 and kept[-1] == 49
    with pytest.raises(ValueError, match="particles"):
        motion_filter(np.zeros((0, 3)))


def test_cli_writes_a_readable_dataset_and_resumes(tmp_path, monkeypatch):
    out = tmp_path / "sim.zarr"
    args = ["--out", str(out), "--preset", "cpu-small", "--garments", "proc:0", "--modes", "random_drag_1"]
    assert generate.main(args) == 0
    store = EpisodeStore(out)
    (name,) = store.names()
    item = store.read(name)
    t = item.rgb.shape[0]
    m = item.particles.shape[1]
    assert t > 10 and 100 < m <= 2000
    assert item.rgb.shape == (t, 256, 256, 3)
    assert item.depth.shape == (t, 256, 256) and (item.depth > 0).all()
    assert item.mask.shape == (t, 256, 256) and item.mask.any(axis=(1, 2)).all()
    assert item.arm_state.shape == (t, 2, 4) and item.action.shape == (t, 2, 4)
    assert item.particle_visible.shape == (t, m) and item.particle_visible.mean() > 0.3
    assert item.keypoints.shape == (t, 7, 3) and item.keyframes[-1] == t - 1
    meta = item.meta
    for key in (*META_KEYS, "garment", "randomization", "sim_config", "oracle"):
        assert key in meta
    assert meta["split"] == meta["garment"]["split"] == "train" and meta["randomization"]["sleeve_mode"] in "NLRB"
    assert meta["garment_id"] == meta["garment"]["id"]
    json.dumps(meta)
    # Geometry is consistent: keypoints are their particles, and particles project into the image.
    ids = item.keypoint_particle_ids.astype(np.int64)
    np.testing.assert_allclose(item.keypoints, item.particles[:, ids], atol=1e-6)
    k = item.intrinsics.astype(np.float64)
    p = item.particles[0].astype(np.float64)
    uv = (p[:, :2] / p[:, 2:3]) * k.diagonal()[:2] + k[:2, 2]
    assert (uv > 0).all() and (uv < 255).all()
    # Depth at a visible particle's pixel equals the particle's depth (same camera frame, metres).
    vis = item.particle_visible[0]
    px = np.clip(np.round(uv).astype(np.int64), 0, 255)
    d = item.depth[0][px[vis, 1], px[vis, 0]].astype(np.float64)
    assert np.median(np.abs(d - p[vis, 2])) < 0.01

    # Frame subsets as the trainers read them: context keyframes and motion-filtered frames.
    kf = store.read(name, frames=item.keyframes.astype(np.int64))
    assert kf.rgb.shape[0] == len(item.keyframes)
    np.testing.assert_array_equal(kf.rgb, item.rgb[item.keyframes])
    moving = motion_filter(item.particles)
    assert 2 <= len(moving) <= 15 and moving[0] == 0
    assert store.read(name, frames=moving).num_frames == len(moving)

    # What the context cost, as the training script's summary reports it per context.
    cost = generate.cost_by_context(out)
    assert cost == {
        f"{meta['mode']}/{meta['variant']}": {
            "episodes": 1,
            "frames_mean": float(t),
            "seconds_mean": round(meta["timing"]["total_s"], 1),
        }
    }
    total = generate.generation_cost(out)
    assert (total["episodes"], total["frames"]) == (1, t)
    assert total["worker_seconds"] == round(meta["timing"]["total_s"])
    assert total["seconds_per_frame"] == round(meta["timing"]["total_s"] / t, 3)
    assert generate.generation_cost(out, names=[name]) == total  # the part a recipe would generate
    assert generate.generation_cost(out, names=["*__e999", "nothing*"])["episodes"] == 0

    # Resume: a second run simulates nothing and leaves the finished episode untouched.
    before = {f: f.stat().st_mtime_ns for f in out.rglob("*") if f.is_file()}

    def boom(*a, **k):
        raise AssertionError("finished episode was simulated again")

    monkeypatch.setattr(generate, "run_episode", boom)
    assert generate.main(args) == 0
    assert {f: f.stat().st_mtime_ns for f in out.rglob("*") if f.is_file()} == before
    assert EpisodeStore(out).names() == [name]


def test_jobs_have_stable_distinct_seeds_and_cycle_variants():
    garments = generate.expand_garments(["proc:0:12"], "heldout", 0.035)
    assert [g for _, g in garments] == ["proc_00005", "proc_00011"]
    jobs = generate.make_jobs(garments, ["sleeves_down__side_fold"], None, 12, base_seed=0)
    assert len({j.name for j in jobs}) == len(jobs) == 24
    assert len({j.seed for j in jobs}) == 24
    per_variant = [j.variant for j in jobs if j.garment_id == "proc_00005"]
    assert sorted(set(per_variant)) == ["LL", "LR", "RL", "RR", "SL", "SR"]
    assert all(per_variant.count(v) == 2 for v in set(per_variant))  # evenly split across variants
    again = generate.make_jobs(garments, ["sleeves_down__side_fold"], None, 12, base_seed=0)
    assert [j.seed for j in again] == [j.seed for j in jobs]
    assert generate.make_jobs(garments, ["sleeves_down__side_fold"], None, 1, base_seed=1)[0].seed != jobs[0].seed
    # episode k of every mode on a garment shares its seed, hence its start state (in-context pairs)
    pairs = generate.make_jobs(garments[:1], ["sleeves_down__bottom_up", "body_bottom_up__sleeves_down"], None, 2, 0)
    seeds = {(j.mode, j.k): j.seed for j in pairs}
    assert seeds[("sleeves_down__bottom_up", 0)] == seeds[("body_bottom_up__sleeves_down", 0)]
    assert seeds[("sleeves_down__bottom_up", 1)] == seeds[("body_bottom_up__sleeves_down", 1)]
    assert seeds[("sleeves_down__bottom_up", 0)] != seeds[("sleeves_down__bottom_up", 1)]
    assert [j.k for j in pairs] == [0, 0, 1, 1]  # start-state-major: a run stopped early stays balanced
    pinned = generate.make_jobs(
        garments[:1], ["sleeves_down__bottom_up/S", "body_side_fold_L__sleeves_down"], None, 3, 0
    )
    assert {(j.mode, j.variant) for j in pinned} == {
        ("sleeves_down__bottom_up", "S"),
        ("body_side_fold_L__sleeves_down", "L"),
    }
    with pytest.raises(ValueError, match="variant"):
        generate.make_jobs(garments[:1], ["sleeves_down__bottom_up/Q"], None, 1, 0)


#: Batched and one-at-a-time episodes are the same physics; a world's contact sums may add up in
#: another order than a scene of its own (seen: identical, or 4.8 mm apart after 80 frames of a
#: crumpled drag), and cloth contact amplifies the rounding.
SAME_PHYSICS_ATOL = 0.01


def test_cli_batches_garments_into_one_model_with_the_same_episodes(tmp_path):
    """--worlds: several garments simulated together (a thread per world, meeting at a frame barrier) give the
    episodes that one process per episode gives."""
    args = ["--preset", "cpu-small", "--garments", "proc:0", "proc:1", "--modes", "random_drag_1"]
    assert generate.main([*args, "--out", str(tmp_path / "batch.zarr"), "--worlds", "2"]) == 0
    assert generate.main([*args, "--out", str(tmp_path / "solo.zarr")]) == 0
    batch, solo = EpisodeStore(tmp_path / "batch.zarr"), EpisodeStore(tmp_path / "solo.zarr")
    assert batch.names() == solo.names() and len(batch) == 2
    for name in batch.names():
        a, b = batch.read(name), solo.read(name)
        assert a.num_frames == b.num_frames
        np.testing.assert_allclose(a.particles, b.particles, atol=SAME_PHYSICS_ATOL)
        assert a.meta["oracle"]["max_error"] == pytest.approx(b.meta["oracle"]["max_error"], abs=0.01)


def test_cli_refuses_nonpositive_worlds(tmp_path, capsys):
    with pytest.raises(SystemExit):
        generate.main(["--out", str(tmp_path / "x.zarr"), "--worlds", "0"])
    assert "--worlds" in capsys.readouterr().err and not (tmp_path / "x.zarr").exists()


def test_batch_plan_spreads_garments_over_worlds():
    jobs = generate.make_jobs([("proc:0", "a"), ("proc:1", "b")], ["random_drag_1", "random_drag_2"], None, 3, 0)
    for parallel, shape in ((1, [[3, 3, 3, 3]]), (2, [[2, 2, 2, 2], [2, 2]])):
        plan = generate.plan_batches(jobs, worlds=4, parallel=parallel)
        assert [[len(slot) for slot in batch] for batch in plan] == shape
        slots = [slot for batch in plan for slot in batch]
        assert all(len({j.garment_spec for j in slot}) == 1 for slot in slots)  # a world keeps one mesh
        assert sorted(j.name for slot in slots for j in slot) == sorted(j.name for j in jobs)


@pytest.mark.slow
def test_cli_runs_in_parallel_on_ray(tmp_path):
    args = [
        "--preset",
        "cpu-small",
        "--garments",
        "proc:0",
        "proc:1",
        "--modes",
        "random_drag_1",
        "--episodes-per",
        "2",
    ]
    ray_store, batched, solo = tmp_path / "ray.zarr", tmp_path / "ray_batched.zarr", tmp_path / "solo.zarr"
    assert generate.main([*args, "--out", str(ray_store), "--workers", "2"]) == 0
    # Batches on Ray: 4 episodes as 2 tasks of 2 worlds each.
    assert generate.main([*args, "--out", str(batched), "--workers", "2", "--worlds", "2"]) == 0
    assert generate.main([*args, "--out", str(solo)]) == 0
    names = EpisodeStore(solo).names()
    assert len(names) == 4 and EpisodeStore(ray_store).names() == EpisodeStore(batched).names() == names
    for name in names:  # the same episodes however they were scheduled
        expected = EpisodeStore(solo).read(name).particles
        for store in (ray_store, batched):
            np.testing.assert_allclose(EpisodeStore(store).read(name).particles, expected, atol=SAME_PHYSICS_ATOL)


def test_cli_runs_only_the_chosen_start_states(tmp_path, monkeypatch, capsys):
    """--starts keeps the full run's jobs of those k (same names and seeds), in the same order."""
    seen: list[generate.Job] = []

    def record(todo, args):
        seen.extend(todo)
        return iter(())

    monkeypatch.setattr(generate, "_run_all", record)
    args = ["--out", str(tmp_path / "s.zarr"), "--preset", "cpu-small", "--garments", "proc:0", "proc:1"]
    args += ["--modes", "random_drag_1", "--episodes-per", "4"]
    assert generate.main([*args, "--starts", "3,1"]) == 0
    full = generate.make_jobs([("proc:0", "proc_00000"), ("proc:1", "proc_00001")], ["random_drag_1"], None, 4, 0)
    assert seen == [j for j in full if j.k in (1, 3)]
    for bad in ("4", "x", ","):
        with pytest.raises(SystemExit):
            generate.main([*args, "--starts", bad])
        assert "--starts" in capsys.readouterr().err
