"""The default models (v6, since 2026-11-27) as the cards, the README and docs/policy.md describe
them: their training run (docs/results/default_models.json), their closed-loop results against
the shipped banks of 10 (the re-scored 16-layout JSONs), the main job (main_job.json) and v5 beside
them. Typed once: every number here is formatted from those JSONs."""

from __future__ import annotations

import json

from docs_quotes import REPO, assert_quoted, count, counted, doc, flat_doc, issue_28_bars, result, row_of, successes

SEEN = "eval_cpu_k10_recipe_l16.json"
GARMENTS = "eval_cpu_garments_k10_recipe_l16.json"
DRAWS = (SEEN, "eval_cpu_l16_seed1.json", "eval_cpu_l16_seed2.json")


def test_the_shipped_checkpoint_is_the_runs_and_the_one_scored() -> None:
    """The card's run trained what models/policy holds (its steps, on both processes, to the end), the
    re-scored rows the docs quote for v6 are against the banks of 10, and the README's main job folds
    as the re-scored run of that checkpoint did (same Geom. to the last digit: the same fold)."""
    run = result("default_models.json")
    shipped = json.loads((REPO / "models" / "policy" / "config.json").read_text())
    assert shipped["train"]["steps"] == 10_000 and run["stage_minutes"]["4/5"] > 0
    assert run["policy_end"]["event"] == "end" and run["policy_end"]["ranks_in_sync"]
    assert run["policy_end"]["world_size"] == 2 and run["policy_start"]["start_step"] == 0
    assert all(result(name)["bank_runs"] == 10 for name in (SEEN, GARMENTS))
    assert result("main_job.json")["same_init"]["geom"] == result("main_job_k10_recipe_l16.json")["same_init"]["geom"]


def test_the_policy_card_quotes_the_v6_training_run() -> None:
    run = result("default_models.json")
    card = doc("models/policy/README.md")
    offline, minutes = run["offline"], run["stage_minutes"]
    quoted = [
        f"{run['policy_start']['episodes']} episodes, {run['policy_start']['samples']:,} samples",
        f"only k = 11-15 ({minutes['1/5']} min)",
        f"({minutes['2/5']} min with both attempts); tokenising {minutes['3/5']} min; policy {minutes['4/5']} min",
        f"offline evaluation {minutes['5/5']} min",
        f"{run['policy_end']['initial_action_error'] * 100:.2f} cm at initialisation -> "
        f"{offline['train']['action_error_cm']:.2f} cm on training frames, "
        f"{offline['heldout']['action_error_cm']:.2f} cm on held-out starts",
        f"median {offline['train']['arm_sensitivity']['slope_median']:.2f} on training and on held-out starts",
    ]
    assert f"{offline['heldout']['arm_sensitivity']['slope_median']:.2f}" == quoted[-1].split()[1]
    for split in ("train", "heldout"):
        g = offline[split]["first_grasp"]
        quoted.append(
            f"| {g['arms']} | {g['closed']:.1%} | {g['mean_error_cm']:.1f} cm | "
            f"{g['within_5cm']:.1%} / {g['within_10cm']:.1%} |".replace("%", " %")
        )
        quoted.append(f"({offline[split]['episodes']} episodes")
    flat = " ".join(card.split())
    assert_quoted(flat, [" ".join(q.split()) for q in quoted])
    encoder = run["encoder"]
    assert_quoted(
        flat_doc("models/encoder/README.md"),
        [
            f"loss {encoder['first_loss']:.2f} -> {encoder['last']['loss']:.2f}",
            f"{(encoder['last']['elapsed_s']) / 60:.1f} min, {encoder['last']['tokens_per_s']:,.0f} tokens/s",
        ],
    )


def test_the_policy_card_quotes_v6_against_the_banks_of_10_and_v5() -> None:
    seen, held, garments = row_of(SEEN), row_of(SEEN, split="heldout"), row_of(GARMENTS)
    oos = result(SEEN)["rows"]["oracle-out-of-sample"]["seen"]
    v5, v5_garments = row_of("eval_cpu_k10_v5_rerun.json"), row_of("eval_cpu_garments_k10_v5_rerun.json")
    job, second, v5_job = (
        result(n)["same_init"] for n in ("main_job.json", "main_job_second_demo.json", "main_job_v5.json")
    )
    grasp = seen["first_grasp"]
    replay = row_of("eval_cpu_k10_registration_replay.json")
    replay_job = result("main_job_k10_registration_replay.json")["same_init"]
    draws = [row_of(name) for name in DRAWS[1:]]
    bars = issue_28_bars()
    p5 = result(GARMENTS)["garments"]["seen"]["proc_00005"]["policy"]
    draw_span = successes(draws[0]) - successes(draws[1])
    assert draw_span == successes(seen) - successes(v5)
    quoted = [
        f"Ctx. Acc. {seen['ctx_acc']['mean']:.1f} %, C-SR@95 {seen['csr95']['mean']:.1f} % ({successes(seen)} of "
        f"{seen['rollouts']}; the scripted oracle out of sample: {oos['csr95']['mean']:.1f} %), Geom. "
        f"{seen['geom']['mean']:.2f} ({oos['geom']['mean']:.2f}), first grasps {100 * grasp['xy_m']['mean']:.1f} cm "
        f"from the oracle's on average, {100 * grasp['within_5cm']:.1f} % within 5 cm; held-out fold Ctx. Acc. "
        f"{held['ctx_acc']['mean']:.1f} %, no success",
        f"C-SR@95 {garments['csr95']['mean']:.1f} % ({successes(garments)} of {garments['rollouts']}), Geom. "
        f"{garments['geom']['mean']:.2f}",
        f"Geom. {job['geom']:.2f} against its envelope of {job['envelope']:.2f}, a success, and with the body-first "
        f"demonstration {second['geom']:.2f} against {second['envelope']:.2f}, a success",
        f"seen C-SR@95 {v5['csr95']['mean']:.1f} -> {seen['csr95']['mean']:.1f} %, Geom. {v5['geom']['mean']:.2f} -> "
        f"{seen['geom']['mean']:.2f}, context {v5['ctx_acc']['mean']:.1f} -> {seen['ctx_acc']['mean']:.1f} %; held-out "
        f"garments C-SR@95 {v5_garments['csr95']['mean']:.1f} -> {garments['csr95']['mean']:.1f} %, Geom. "
        f"{v5_garments['geom']['mean']:.2f} -> {garments['geom']['mean']:.2f}; main job Geom. {v5_job['geom']:.2f} -> "
        f"{job['geom']:.2f}",
        f"C-SR@95 {draws[0]['csr95']['mean']:.1f} % and {draws[1]['csr95']['mean']:.1f} % and Geom. "
        f"{draws[0]['geom']['mean']:.2f} and {draws[1]['geom']['mean']:.2f}",
        f"({successes(seen)} of {seen['rollouts']} against {bars['csr']:.2f} %), Geom. {seen['geom']['mean']:.2f} is "
        f"above 1.5x the oracle's ({bars['geom']:.2f})",
        f"({successes(garments)} of {garments['rollouts']} against {bars['garments_csr']:.2f} %",
        f"({seen['geom']['mean']:.2f} against {replay['geom']['mean']:.2f} on the seen folds, {job['geom']:.2f} against "
        f"{replay_job['geom']:.2f} on the main job's start",
        f"(held-out fold: Ctx. Acc. {held['ctx_acc']['mean']:.1f} %, {count(held, 'ctx_acc')} of {held['rollouts']}, "
        "no success)",
        f"`proc_00005`, {counted(p5['csr95'], p5['folds'])} of {p5['folds']}, has",
        f"v6 ({draw_span} of 63 each)",
    ]
    assert held["csr95"]["mean"] == 0.0 and job["csr95_success"] and second["csr95_success"]
    assert seen["csr95"]["mean"] < bars["csr"] and garments["csr95"]["mean"] < bars["garments_csr"]
    assert seen["geom"]["mean"] > max(bars["geom"], replay["geom"]["mean"])
    assert_quoted(flat_doc("models/policy/README.md"), quoted)


def test_the_readme_and_the_docs_quote_v6_and_v5_as_measured() -> None:
    seen = row_of(SEEN)
    v5 = row_of("eval_cpu_k10_v5_rerun.json")
    draws = [row_of(name) for name in DRAWS]
    job, v5_job, second, v5_second = (
        result(n)
        for n in ("main_job.json", "main_job_v5.json", "main_job_second_demo.json", "main_job_second_demo_v5.json")
    )
    replay = row_of("eval_cpu_k10_registration_replay.json")
    replay_job = result("main_job_k10_registration_replay.json")["same_init"]
    low, high = sorted(d["csr95"]["mean"] for d in draws[1:])
    wall = round(v5_job["wall_s_total"])
    quoted = [
        f"succeeds in {seen['csr95']['mean']:.1f} %",
        f"span {low:.1f}-{high:.1f} % from the same starts and folds",
        f"v5 succeeded in {v5['csr95']['mean']:.1f} % (Geom. {v5['geom']['mean']:.2f},",
        f"The previous default v5 folded this start to Geom. {v5_job['same_init']['geom']:.2f}, also a success",
        f"the previous default v5 took {wall // 60} min {wall % 60} s on the quiet machine",
        f"(v5: Geom. {v5_second['same_init']['geom']:.2f},",
        f"(Geom. {seen['geom']['mean']:.2f} against the replay's {replay['geom']['mean']:.2f} on the seen folds; on "
        f"this start {job['same_init']['geom']:.2f} against {replay_job['geom']:.2f})",
    ]
    assert v5_job["same_init"]["csr95_success"] and second["same_init"]["csr95_success"]
    assert_quoted(flat_doc("README.md"), quoted)
    garments, v5_garments = row_of(GARMENTS), row_of("eval_cpu_garments_k10_v5_rerun.json")
    assert garments["csr95"]["mean"] == v5_garments["csr95"]["mean"]
    assert_quoted(
        flat_doc("docs/policy.md"),
        [
            f"v5: {v5['csr95']['mean']:.1f} %), with folds that land closer than v5's but not yet at the oracle's "
            f"(Geom. {seen['geom']['mean']:.2f} against",
            f"seen C-SR@95 {seen['csr95']['mean']:.1f} vs {v5['csr95']['mean']:.1f} %, Geom. {seen['geom']['mean']:.2f} vs "
            f"{v5['geom']['mean']:.2f}, held-out garments the same {garments['csr95']['mean']:.1f} %, the main job's start "
            f"Geom. {job['same_init']['geom']:.2f} vs {v5_job['same_init']['geom']:.2f}",
        ],
    )


def test_the_wall_times_and_the_status_row_are_quoted_as_measured() -> None:
    """The README's status row (rounded), and v5's from-nothing time where the cards still quote it."""
    seen, oos = row_of(SEEN), result(SEEN)["rows"]["oracle-out-of-sample"]["seen"]
    run = result("default_models.json")
    assert_quoted(
        flat_doc("README.md"),
        [
            f"the default models ({run['policy_start']['episodes']} episodes, 3 modes",
            f"in {seen['ctx_acc']['mean']:.0f} % of the CPU benchmark's seen-fold rollouts and succeed in "
            f"{seen['csr95']['mean']:.0f} % (a scripted fold scored out of sample: {oos['csr95']['mean']:.0f} %",
        ],
    )
    v5 = f"{result('default_models_from_nothing_v5.json')['total_minutes']:.0f} min"
    for path in ("models/README.md", "models/policy/README.md", "docs/policy.md"):
        assert f"took {v5}" in flat_doc(path) or f"in {v5}" in flat_doc(path), path


def test_the_from_nothing_run_is_quoted_as_measured() -> None:
    """The one-piece run of the script with v6's defaults: its wall time and stages in the card, the
    same wall time in models/README.md, docs/policy.md and the recipe's header, and what it made."""
    run = result("default_models_from_nothing.json")
    minutes = run["stage_minutes"]
    assert run["total_minutes"] <= 150  # issue 28: <= 2.5 h on 2 cores
    quoted = [
        f"**{run['total_minutes']:.0f} min wall**",
        f"{run['store_episodes']} episodes generated in {minutes['1/5']} min",
        f"encoder {minutes['2/5']} min, tokenising {minutes['3/5']} min, policy {minutes['4/5']} min",
        f"offline evaluation {minutes['5/5']} min",
        f"its largest process peaked at {run['peak_rss_gb']} GB",
        f"commit {run['commit']}",
    ]
    if all(run["same_weights_as_shipped"].values()):
        quoted.append("bitwise the shipped ones")
    assert_quoted(flat_doc("models/policy/README.md"), quoted)
    wall = f"in {run['total_minutes']:.0f} min on"
    for path in ("models/README.md", "docs/policy.md"):
        assert wall in flat_doc(path), path
    header = (REPO / "config" / "pipelines" / "cpu-small.yaml").read_text().splitlines()[0]
    assert f"{run['total_minutes'] / 60:.2f} h from nothing" in header


def test_the_main_job_on_another_machine_is_the_measured_one() -> None:
    """The README's main job (v6) on a second machine: another CPU, the same fold decision (success),
    another Geom. (runs repeat on one machine only)."""
    here, there = result("main_job.json"), result("main_job_amd.json")
    assert here["machine"]["cpu"] != there["machine"]["cpu"] and there["same_init"]["csr95_success"]
    assert there["same_init"]["context_correct"] and there["fold"]["outcome"] == "completed"
    assert_quoted(
        flat_doc("README.md"),
        [
            f"an {there['machine']['cpu']} machine folds the main job's start to Geom. "
            f"{there['same_init']['geom']:.2f}, a success, where the Intel Xeon machine of the numbers below folds it "
            f"to {here['same_init']['geom']:.2f}"
        ],
    )
    assert "Xeon" in here["machine"]["cpu"]
