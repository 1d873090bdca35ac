"""Numbers are typed once: breadth v2 (issue 34), its training run in docs/policy.md and its
closed-loop rows in docs/evaluation.md, against the JSONs they were read from."""

from __future__ import annotations

from datetime import datetime

from docs_quotes import assert_quoted, count, counted, cpu_flags, doc, flat_doc, result, successes

from instant_fold_evaluation.evaluate import merged_rows
from instant_fold_evaluation.scoring import context_table, grasp_table, primitive_table, table


def _breadth_v2_from_nothing() -> dict[str, float]:
    """Breadth v2's stage minutes as a run from nothing would take them: the encoder resumed at
    step 100 (scaled to 600 steps), tokenising after 78 episodes were done (scaled to all)."""
    run = result("breadth_v2_training.json")
    minutes = {stage: row["minutes_to_next"] for stage, row in run["stage_work"].items()}
    resumed = run["tokenising_resumed"]
    return {
        "generation": run["generation"]["minutes_for_2_workers"],
        "encoder": round(minutes["encoder"] * 600 / 500, 1),
        "tokenising": round(minutes["tokenising"] * sum(resumed.values()) / resumed["tokenised"], 1),
        **{stage: minutes[stage] for stage in ("keypoints", "policy", "offline")},
    }


def _recipe_from_nothing(generation: dict, train_episodes: int, policy_minutes: float) -> dict[str, float]:
    """A fold-split recipe's stage minutes from nothing: its episodes' generation (`generation_cost`
    of breadth v2's store), its policy run, breadth v2's other stages scaled to its episodes (the
    offline evaluation reads its training episodes and breadth v2's held-out starts)."""
    v2, v2_scaled = result("breadth_v2_training.json"), _breadth_v2_from_nothing()
    tokenised = sum(v2["tokenising_resumed"].values())
    evaluated = (train_episodes + v2["episodes"]["tokens_heldout"]) / sum(v2["episodes"].values())
    return {
        "generation": generation["minutes_for_2_workers"],
        "encoder": v2_scaled["encoder"],
        "tokenising": round(v2_scaled["tokenising"] / tokenised * generation["episodes"], 1),
        "keypoints": v2_scaled["keypoints"],
        "policy": policy_minutes,
        "offline": round(v2_scaled["offline"] * evaluated, 1),
    }


def _cost_rows(stages: dict[str, float], generation: dict, train_episodes: int) -> list[str]:
    """The lines of docs/policy.md's cost table of a recipe (`_recipe_from_nothing`)."""
    v2 = result("breadth_v2_training.json")
    total = round(sum(stages.values()), 1)
    return [f"| {stage} | {minutes} |" for stage, minutes in stages.items() if stage != "offline"] + [
        f"| offline evaluation | {stages['offline']} | breadth v2's x {train_episodes + v2['episodes']['tokens_heldout']} / "
        f"{sum(v2['episodes'].values())} episodes |",
        f"| total | {total} | breadth v2: about {round(sum(_breadth_v2_from_nothing().values()))} |",
        f"the recipe's {generation['episodes']} episodes in breadth v2's store: {generation['worker_seconds']:,} "
        "worker-seconds over 2 workers",
    ]


def test_the_breadth_v2_training_run_is_the_measured_one() -> None:
    """docs/policy.md's "Breadth v2" stage table, budget and offline results."""
    run = result("breadth_v2_training.json")
    generation = run["generation"]
    minutes = {stage: row["minutes_to_next"] for stage, row in run["stage_work"].items()}
    starts_utc = [datetime.fromisoformat(row["utc"].replace("Z", "+00:00")) for row in run["timeline"]]
    assert starts_utc == sorted(starts_utc)
    start, end = run["policy_start"], run["policy_end"]
    assert start["start_step"] == 0 and start["world_size"] == 2 and end["ranks_in_sync"]
    offline, rate, resumed = run["offline"], run["policy_throughput"], run["tokenising_resumed"]
    held, train = offline["heldout"]["first_grasp"], offline["train"]["first_grasp"]
    v6 = result("default_models_from_nothing.json")["stage_minutes"]["4/5"]
    v1 = result("breadth_v1_training.json")
    scaled = _breadth_v2_from_nothing()
    encoder_whole, tokenise_whole = scaled["encoder"], scaled["tokenising"]
    whole = sum(scaled.values())
    by_context = run["generation_by_context"]
    cheap = min(by_context, key=lambda c: by_context[c]["seconds_mean"])
    dear = max(by_context, key=lambda c: by_context[c]["seconds_mean"])
    policy = doc("docs/policy.md")
    assert_quoted(
        policy,
        [
            f"| generation | {minutes['generation']} | {generation['episodes']} episodes, {generation['frames']:,} frames, "
            f"{generation['worker_seconds']:,} worker-seconds ({generation['seconds_per_frame']} s per frame; breadth v1: "
            f"{v1['generation']['seconds_per_frame']}), 2 workers |",
            f"| encoder | {minutes['encoder']} | steps 100-600,",
            f"| tokenising | {minutes['tokenising']} | the last {resumed['tokenised']} episodes",
            f"| keypoints | {minutes['keypoints']} | 4,000 steps, alone |",
            f"| policy | {minutes['policy']} | 10,000 steps, 2 processes, {start['samples']:,} samples of "
            f"{start['episodes']} episodes, alone |",
            f"| offline evaluation | {minutes['offline']} | {offline['train']['episodes']} + "
            f"{offline['heldout']['episodes']} episodes,",
        ],
    )
    assert_quoted(
        flat_doc("docs/policy.md"),
        [
            f"costs from {by_context[cheap]['seconds_mean']} s (`{cheap}`, {by_context[cheap]['frames_mean']} frames) to "
            f"{by_context[dear]['seconds_mean']} s (`{dear}`, {by_context[dear]['frames_mean']} frames)",
            f"({generation['minutes_for_2_workers']} min of work for 2 workers, against breadth v1's "
            f"{round(v1['generation']['worker_seconds'] / 120, 1)} for three starts)",
            f"({v6} min on the machine v6 was trained on)",
            f"median {rate['breadth_v2']['keyframes_median']} keyframes against {rate['v6_folds_same_machine']['keyframes_median']}",
            f"{rate['breadth_v2']['steps_per_s_at_5000']} steps a second at step 5,000 against "
            f"{rate['v6_folds_same_machine']['steps_per_s_at_5000']} for v6's recipe",
            f"({encoder_whole} and {tokenise_whole} min;",
            f"about {round(whole)} min:",
            f"on the {offline['heldout']['episodes']} held-out starts: the policy closes {held['closed'] * 100:.1f} % of the "
            f"{held['arms']} first grasps the expert makes, {held['mean_error_cm']:.1f} cm from the expert's "
            f"({held['within_5cm'] * 100:.1f} % within 5 cm; training episodes: {train['closed'] * 100:.1f} % of "
            f"{train['arms']}, {train['mean_error_cm']:.1f} cm)",
            f"action error {offline['train']['action_error_cm']:.2f} / {offline['heldout']['action_error_cm']:.2f} cm "
            f"(train / held-out; breadth v1: {v1['offline']['train']['action_error_cm']:.2f} / "
            f"{v1['offline']['heldout']['action_error_cm']:.2f})",
            f"moves {offline['heldout']['arm_sensitivity']['slope_median']:.3f} m per metre of arm shift",
        ],
    )


def test_breadth_v2_on_the_quick_yardstick_is_the_measured_one() -> None:
    """docs/evaluation.md's "Breadth v2" quick-yardstick tables and prose, against v6 on the same bank."""
    names = ("breadth_v2", "breadth_v2_match50", "v6")
    runs = [result(f"folds_quick_{n}.json") for n in names]
    reference = result("folds_quick_reference.json")
    assert {run["bank"] for run in runs} == {reference["bank"]} and {run["bank_runs"] for run in runs} == {10}
    assert {cpu_flags(run) for run in runs} == {cpu_flags(reference)}
    assert [run["grasp_match_m"] for run in runs] == [0.08, 0.5, 0.08]
    rows = merged_rows(runs)
    evaluation = doc("docs/evaluation.md")
    assert table(rows) + "\n" + grasp_table(rows) + "\n" + primitive_table(rows) in evaluation
    v2, match, v6 = (run["rows"]["policy"] for run in runs)
    seen, held = v2["seen"], v2["heldout"]
    wrong = runs[0]["rows"]["wrong-demo"]["seen"]
    contexts = runs[0]["contexts"]
    recognised = sorted(c for c in runs[0]["benchmark"]["heldout"] if contexts[c]["policy"]["ctx_acc"] == 100.0)
    assert recognised == ["sleeves_center__shoulders_down/R", "sleeves_diagonal__shoulders_down/L"]
    assert contexts["sleeves_diagonal__bottom_up/R"]["policy"]["classified_as"] == {"sleeves_diagonal__side_fold/RR": 1}
    grasp2 = {split: v2[split]["events"]["grasp 2"] for split in ("seen", "heldout")}
    oracle2 = {
        s: runs[0]["rows"]["oracle-out-of-sample"][s]["events"]["grasp 2"]["xy_m"]["mean"] for s in ("seen", "heldout")
    }
    primitives = seen["primitives"]
    do_nothing = runs[0]["rows"]["do-nothing"]["heldout"]["geom"]["mean"]
    assert_quoted(
        flat_doc("docs/evaluation.md"),
        [
            f"recognises {count(seen, 'ctx_acc')} of 16 seen contexts (v6: {count(v6['seen'], 'ctx_acc')}; with another "
            f"context's demonstration: {count(wrong, 'ctx_acc')}), lands {count(seen, 'csr95')} of 16 inside the envelope "
            f"(v6: {count(v6['seen'], 'csr95')}) and brings the seen folds to Geom. {seen['geom']['mean']:.2f} "
            f"({v6['seen']['geom']['mean']:.2f})",
            f"{count(held, 'ctx_acc')} of 3 recognised (v6 and breadth v1: 0)",
            f"(Geom. {held['geom']['mean']:.2f}; do-nothing {do_nothing:.2f})",
            f"{grasp2['heldout']['xy_m']['mean'] * 100:.1f} cm from the oracle's on average on the held-out folds "
            f"({round(grasp2['heldout']['within_5cm'] * grasp2['heldout']['measured'])} of {grasp2['heldout']['measured']} "
            f"within 5 cm; seen folds: {grasp2['seen']['xy_m']['mean'] * 100:.1f} cm; the out-of-sample oracle: "
            f"{oracle2['heldout'] * 100:.1f} and {oracle2['seen'] * 100:.1f})",
            f"(sleeve fold right in {round(primitives['sleeve'] * primitives['folds'] / 100)} of 16, body fold in "
            f"{round(primitives['body'] * primitives['folds'] / 100)} of 16)",
            f"one more seen fold inside the envelope ({count(match['seen'], 'csr95')} of 16), the held-out folds at Geom. "
            f"{match['heldout']['geom']['mean']:.2f}",
            f"seen Ctx. Acc. {seen['ctx_acc']['mean']:.1f} % against 90 %; held-out Ctx. Acc. {held['ctx_acc']['mean']:.1f} % "
            f"against 60 %",
            f"held-out Geom. {held['geom']['mean']:.2f} against half of do-nothing's, {do_nothing / 2:.2f}",
        ],
    )
    assert count(match["seen"], "csr95") == count(seen, "csr95") + 1


def test_breadth_v2_on_the_full_breadth_benchmark_is_the_measured_one() -> None:
    """docs/evaluation.md's "Breadth v2" on `cpu_folds`: issue 34's bars, the per-fold table and the prose."""
    run, quick = result("folds_breadth_v2.json"), result("folds_quick_breadth_v2.json")
    reference = result("eval_cpu_folds_k10_reference.json")
    assert run["bank"] == quick["bank"] and run["bank_runs"] == 10 and cpu_flags(run) == cpu_flags(quick)
    assert run["checkpoint"] == quick["checkpoint"] and run["grasp_match_m"] == quick["grasp_match_m"]
    order = run["benchmark"]["seen"] + run["benchmark"]["heldout"]
    evaluation = doc("docs/evaluation.md")
    assert context_table(run["contexts"], order) in evaluation
    rows = run["rows"]
    seen, held = rows["policy"]["seen"], rows["policy"]["heldout"]
    oracle = rows["oracle-out-of-sample"]["seen"]["csr95"]["mean"]
    assert oracle == reference["rows"]["oracle-out-of-sample"]["seen"]["csr95"]["mean"]
    do_nothing = rows["do-nothing"]["heldout"]["geom"]["mean"]
    timing = run["timing"]
    garments = len(run["benchmark"]["garments"]) - len(quick["benchmark"]["garments"])
    demos = len(run["benchmark"]["seen"] + run["benchmark"]["heldout"]) * garments
    assert_quoted(
        evaluation,
        [
            f"| seen: Ctx. Acc. | >= 90 % | {seen['ctx_acc']['mean']:.1f} % |",
            f"| seen: C-SR@95 | >= 70 % of the out-of-sample oracle's {oracle:.1f} % = {0.7 * oracle:.1f} % | "
            f"{seen['csr95']['mean']:.1f} % ({count(seen, 'csr95')} of {seen['rollouts']}) |",
            f"| held-out: Ctx. Acc. | >= 60 % | {held['ctx_acc']['mean']:.1f} % |",
            f"| held-out: Geom. | <= half of do-nothing's {do_nothing:.2f} = {do_nothing / 2:.2f} | {held['geom']['mean']:.2f} |",
        ],
    )
    # two bars met: the held-out Geom. and the trained modes (16 contexts of the split's training side)
    assert held["geom"]["mean"] <= do_nothing / 2 and len(run["benchmark"]["seen"]) == 16
    assert seen["ctx_acc"]["mean"] < 90 and seen["csr95"]["mean"] < 0.7 * oracle and held["ctx_acc"]["mean"] < 60
    grasp1, primitives = seen["first_grasp"], seen["primitives"]
    grasp2 = {split: rows["policy"][split]["events"]["grasp 2"]["xy_m"]["mean"] for split in ("seen", "heldout")}
    oracle2 = {
        split: rows["oracle-out-of-sample"][split]["events"]["grasp 2"]["xy_m"]["mean"] for split in ("seen", "heldout")
    }
    contexts = run["contexts"]
    by_garment = {g: v["policy"]["csr95"] for g, v in run["garments"]["seen"].items()}
    assert contexts["sleeves_diagonal__bottom_up/R"]["policy"]["classified_as"] == {"sleeves_diagonal__side_fold/RR": 3}
    assert contexts["sleeves_cross__shoulders_down/L"]["policy"]["ctx_acc"] == 0.0
    succeeded = [c for c in run["benchmark"]["heldout"] if contexts[c]["policy"]["csr95"] > 0]
    assert succeeded == ["sleeves_center__shoulders_down/R"]
    assert_quoted(
        flat_doc("docs/evaluation.md"),
        [
            f"{timing['rollouts_s'] / 60:.1f} min of rollouts, after {timing['demos_s'] / 60:.1f} min simulating the "
            f"{demos} demonstrations",
            f"{grasp1['measured']} of the {grasp1['arms']} first grasps expected on seen folds are made, "
            f"{grasp1['xy_m']['mean'] * 100:.1f} cm from the oracle's ({grasp1['within_5cm'] * 100:.1f} % within 5 cm)",
            f"Recognition: {count(seen, 'ctx_acc')} of {seen['rollouts']} seen contexts right; the classified fold has the "
            f"shown fold's sleeve fold in {primitives['sleeve']:.1f} %, its body fold in {primitives['body']:.1f} %, both in "
            f"{primitives['both']:.1f} %",
            f"{grasp2['seen'] * 100:.1f} cm from the oracle's on seen folds (the out-of-sample oracle: "
            f"{oracle2['seen'] * 100:.1f}) and {grasp2['heldout'] * 100:.1f} cm on held-out ones ({oracle2['heldout'] * 100:.1f})",
            f"seen C-SR@95 {by_garment['proc_00000']:.1f} % there against {by_garment['proc_00001']:.1f} and "
            f"{by_garment['proc_00002']:.1f} % on the two others",
            f"{count(quick['rows']['policy']['heldout'], 'ctx_acc')} of 3 recognised there, {count(held, 'ctx_acc')} of "
            f"{held['rollouts']} over the three garments",
        ],
    )


def test_the_breadth_step_cost_is_the_measured_one() -> None:
    """docs/policy.md's one-step timing of breadth v2's recipe on its tokens and on v6's folds."""
    bench = result("bench_policy_train_breadth.json")
    steps = {name: run["variants"]["recipe"] for name, run in bench["runs"].items()}
    assert bench["runs"]["breadth_v2"]["keyframes_median"] == 14 and bench["runs"]["v6_folds"]["keyframes_median"] == 10
    ratio = steps["breadth_v2"]["step_ms"] / steps["v6_folds"]["step_ms"]
    assert 1.15 < ratio < 1.35  # "about a quarter more a step"
    assert_quoted(
        flat_doc("docs/policy.md"),
        [
            f"{steps['breadth_v2']['step_ms']:.1f} ms on breadth v2's tokens (again: {steps['breadth_v2_again']['step_ms']:.1f}) "
            f"against {steps['v6_folds']['step_ms']:.1f} ms on v6's folds, the demonstration encoding "
            f"{steps['breadth_v2']['encode_demo_ms']:.1f} against {steps['v6_folds']['encode_demo_ms']:.1f} ms",
        ],
    )


def test_registration_replay_beside_breadth_v2_is_the_measured_one() -> None:
    """docs/evaluation.md's registration-replay row on `cpu_folds` beside breadth v2 (issue 34's baseline row)."""
    v2, replay = result("folds_breadth_v2.json"), result("folds_registration_replay.json")
    assert replay["checkpoint"] == "models/registration_replay" and replay["bank"] == v2["bank"]
    assert cpu_flags(replay) == cpu_flags(v2)
    rows = merged_rows([v2, replay])
    assert table(rows) + "\n" + primitive_table(rows) in doc("docs/evaluation.md")
    r, p = replay["rows"]["policy"], v2["rows"]["policy"]
    assert (
        r["seen"]["geom"]["mean"] > p["seen"]["geom"]["mean"]
        and r["heldout"]["geom"]["mean"] > p["heldout"]["geom"]["mean"]
    )
    assert r["seen"]["csr95"]["mean"] > p["seen"]["csr95"]["mean"]
    assert_quoted(
        flat_doc("docs/evaluation.md"),
        [
            f"recognises more folds ({r['seen']['ctx_acc']['mean']:.1f} % seen, {r['heldout']['ctx_acc']['mean']:.1f} % "
            f"held-out) and succeeds more often ({r['seen']['csr95']['mean']:.1f} % seen, "
            f"{r['heldout']['csr95']['mean']:.1f} % held-out); breadth v2 shapes the cloth better (Geom. "
            f"{p['seen']['geom']['mean']:.2f} against {r['seen']['geom']['mean']:.2f} seen, "
            f"{p['heldout']['geom']['mean']:.2f} against {r['heldout']['geom']['mean']:.2f} held-out)",
        ],
    )


def test_the_breadth_v3_recipe_and_its_cost_are_the_measured_ones() -> None:
    """docs/policy.md's "Breadth v3": the cpu-folds recipe's cost from nothing, each stage from its
    measurement (breadth v3's policy run, the recipe's episodes of breadth v2's store, breadth v2's
    other stages scaled to the recipe's episodes)."""
    run, v2 = result("breadth_v3_training.json"), result("breadth_v2_training.json")
    start, end, generation = run["policy_start"], run["policy_end"], run["generation"]
    assert start["start_step"] == 0 and start["world_size"] == 2 and end["ranks_in_sync"]
    assert run["generation_names"] == ["*__e00[012]", "proc_0000[012]__*__e003"]
    assert generation["episodes"] == 16 * (7 * 3 + 3) and cpu_flags(run) == cpu_flags(v2)
    assert run["policy_start"]["episodes"] == 321 and run["policy_end"]["event"] == "end"
    v2_scaled = _breadth_v2_from_nothing()
    stages = _recipe_from_nothing(generation, start["episodes"], run["policy_minutes"])
    total = round(sum(stages.values()), 1)
    assert 150 < total < round(sum(v2_scaled.values()))  # cheaper than breadth v2, still over 2.5 h
    assert_quoted(doc("docs/policy.md"), _cost_rows(stages, generation, start["episodes"]))
    assert_quoted(
        flat_doc("docs/policy.md"),
        [
            f"{start['episodes']} training episodes, {start['samples']:,} samples, {run['policy_minutes']} min alone, "
            f"{run['policy_steps_per_s']['6000']} steps a second at the end)",
            f"Still about {round(total - 150)} min over the 2.5 h budget",
            f"(breadth v1's took {result('breadth_v1_training.json')['stage_minutes']['2/5 encoder']} min)",
            f"`docs/results/breadth_v3_10k_training.json`: {result('breadth_v3_10k_training.json')['minutes']} min alone",
            f"With it the recipe would cost about "
            f"{round(total - run['policy_minutes'] + result('breadth_v3_10k_training.json')['minutes'])} min from nothing",
        ],
    )


def test_breadth_v3_and_the_language_row_on_the_full_breadth_benchmark_are_the_measured_ones() -> None:
    """docs/evaluation.md's "Breadth v3": its tables beside breadth v2 and the language row, issue
    34's bars for both, the quick yardstick's contrary reading, and the paper's first ordering."""
    names = ("folds_breadth_v2", "folds_breadth_v3", "folds_breadth_v3_language")
    v2, v3, language = runs = [result(f"{name}.json") for name in names]
    quick = result("folds_quick_breadth_v3.json")
    assert {run["bank"] for run in runs} == {v2["bank"]} and len({cpu_flags(run) for run in runs}) == 1
    assert v3["checkpoint"] == quick["checkpoint"] and (v3["conditioning"], language["conditioning"]) == (
        "demo",
        "language",
    )
    rows = merged_rows(runs)
    evaluation = doc("docs/evaluation.md")
    assert table(rows) + "\n" + grasp_table(rows) + "\n" + primitive_table(rows) in evaluation
    p2, p3, pl = (run["rows"]["policy"] for run in runs)
    oracle = v2["rows"]["oracle-out-of-sample"]["seen"]["csr95"]["mean"]
    do_nothing = v2["rows"]["do-nothing"]["heldout"]["geom"]["mean"]
    bars = [
        f"| seen: Ctx. Acc. | >= 90 % | {p2['seen']['ctx_acc']['mean']:.1f} % | {p3['seen']['ctx_acc']['mean']:.1f} % |",
        f"| seen: C-SR@95 | >= {0.7 * oracle:.1f} % | {p2['seen']['csr95']['mean']:.1f} % ({count(p2['seen'], 'csr95')} of 48) "
        f"| {p3['seen']['csr95']['mean']:.1f} % ({count(p3['seen'], 'csr95')} of 48) |",
        f"| held-out: Ctx. Acc. | >= 60 % | {p2['heldout']['ctx_acc']['mean']:.1f} % | {p3['heldout']['ctx_acc']['mean']:.1f} % |",
        f"| held-out: Geom. | <= {do_nothing / 2:.2f} | {p2['heldout']['geom']['mean']:.2f} | {p3['heldout']['geom']['mean']:.2f} |",
    ]
    assert_quoted(evaluation, bars)
    q2, q3 = (r["rows"]["policy"] for r in (result("folds_quick_breadth_v2.json"), quick))
    later = {
        name: run["rows"]["policy"]["seen"]["events"]["later"]["extra"] for name, run in zip(names, runs, strict=True)
    }
    first = {
        name: run["rows"]["policy"]["seen"]["first_grasp"]["xy_m"]["mean"]
        for name, run in zip(names, runs, strict=True)
    }
    v3_contexts, lang_contexts = v3["contexts"], language["contexts"]
    assert all(v3_contexts[c]["policy"]["ctx_acc"] > 0 for c in v3["benchmark"]["heldout"])
    assert counted(v3_contexts["sleeves_diagonal__bottom_up/R"]["policy"]["ctx_acc"], 3) == 1
    assert lang_contexts["sleeves_diagonal__shoulders_down/L"]["policy"]["classified_as"] == {
        "sleeves_asymmetric__side_fold/RL": 3
    }
    shares = pl["heldout"]["primitives"]
    assert_quoted(
        flat_doc("docs/evaluation.md"),
        [
            f"seen contexts right {count(q3['seen'], 'ctx_acc')} of 16 (breadth v2: {count(q2['seen'], 'ctx_acc')}), "
            f"{count(q3['seen'], 'csr95')} of 16 inside the envelope ({count(q2['seen'], 'csr95')}), Geom. "
            f"{q3['seen']['geom']['mean']:.2f} ({q2['seen']['geom']['mean']:.2f}); held-out {count(q3['heldout'], 'ctx_acc')} "
            f"of 3 right, {count(q3['heldout'], 'csr95')} inside the envelope ({count(q2['heldout'], 'csr95')}), Geom. "
            f"{q3['heldout']['geom']['mean']:.2f} ({q2['heldout']['geom']['mean']:.2f})",
            f"{count(p3['seen'], 'ctx_acc')} of 48 contexts right against {count(p2['seen'], 'ctx_acc')}, "
            f"{count(p3['seen'], 'csr95')} successes against {count(p2['seen'], 'csr95')}, Geom. "
            f"{p3['seen']['geom']['mean']:.2f} against {p2['seen']['geom']['mean']:.2f}, first grasps "
            f"{first[names[1]] * 100:.1f} cm against {first[names[0]] * 100:.1f}",
            f"step limit in {v3['outcomes']['step_limit']} of 57 rollouts (breadth v2: {v2['outcomes']['step_limit']})",
            f"makes {later[names[1]]} grasps beyond the oracle's on the seen folds (breadth v2: {later[names[0]]})",
            f"recognises more ({count(p3['heldout'], 'ctx_acc')} of 9 against {count(p2['heldout'], 'ctx_acc')};",
            f"succeeds in {count(p3['heldout'], 'csr95')} of 9 (breadth v2: {count(p2['heldout'], 'csr95')})",
            f"(Geom. {p3['heldout']['geom']['mean']:.2f}, over the bar of {do_nothing / 2:.2f}",
            f"{result('breadth_v3_language_training.json')['minutes']} min on both cores",
            f"recognises {count(pl['seen'], 'ctx_acc')} of 48 seen contexts ({pl['seen']['ctx_acc']['mean']:.1f} %; C-SR@95 "
            f"{pl['seen']['csr95']['mean']:.1f} %, Geom. {pl['seen']['geom']['mean']:.2f}) and none of the 9 held-out ones "
            f"(Geom. {pl['heldout']['geom']['mean']:.2f}, against the demonstration's {p3['heldout']['geom']['mean']:.2f})",
            f"shares one half of it in {counted(shares['sleeve'], 9) + counted(shares['body'], 9)} of 9 rollouts",
        ],
    )
    assert count(pl["heldout"], "ctx_acc") == 0
    assert shares["both"] == 0.0


def test_which_cut_costs_the_seen_folds_is_the_measured_one() -> None:
    """docs/evaluation.md's "Which cut costs the seen folds": four starts at 6,000 steps beside
    breadth v2 (four starts, 10,000) and breadth v3 (three starts, 6,000); docs/policy.md's summary."""
    names = ("folds_breadth_v2", "folds_breadth_v2_6k", "folds_breadth_v3")
    runs = [result(f"{name}.json") for name in names]
    assert len({cpu_flags(run) for run in runs}) == 1 and {run["bank"] for run in runs} == {runs[0]["bank"]}
    training = result("breadth_v2_6k_training.json")
    assert training["policy_start"]["episodes"] == 383 and training["policy_end"]["event"] == "end"
    rows = merged_rows(runs)
    assert table(rows) + "\n" + primitive_table(rows) in doc("docs/evaluation.md")
    v2, six, v3 = (run["rows"]["policy"]["seen"] for run in runs)
    limits = [run["outcomes"]["step_limit"] for run in runs]
    extra = [row["events"]["later"]["extra"] for row in (v2, six, v3)]
    assert count(six, "ctx_acc") <= count(v3, "ctx_acc") < count(v2, "ctx_acc")  # the steps, not the fourth start
    assert_quoted(
        flat_doc("docs/evaluation.md"),
        [
            f"{training['minutes']} min; `folds_breadth_v2_6k.json`)",
            f"recognise {count(six, 'ctx_acc')} of 48 seen contexts (breadth v2 at 10,000: {count(v2, 'ctx_acc')}; "
            f"breadth v3, three starts at 6,000: {count(v3, 'ctx_acc')}) and land {count(six, 'csr95')} inside the "
            f"envelope ({count(v2, 'csr95')}; {count(v3, 'csr95')}), with {limits[1]} rollouts at the step limit and "
            f"{extra[1]} grasps beyond the oracle's on the seen folds ({limits[0]} and {extra[0]}; {limits[2]} and {extra[2]})",
        ],
    )
    assert_quoted(flat_doc("docs/policy.md"), [f"do no better on the seen folds ({count(six, 'ctx_acc')} of 48 right)"])


def test_three_starts_at_ten_thousand_steps_is_the_measured_one() -> None:
    """docs/evaluation.md's "Three starts at 10,000 steps": breadth v3's tokens at breadth v2's steps."""
    names = ("folds_breadth_v2", "folds_breadth_v3", "folds_breadth_v3_10k")
    runs = [result(f"{name}.json") for name in names]
    assert len({cpu_flags(run) for run in runs}) == 1 and {run["bank"] for run in runs} == {runs[0]["bank"]}
    training = result("breadth_v3_10k_training.json")
    assert training["policy_start"]["episodes"] == 321 and training["policy_end"]["event"] == "end"
    rows = merged_rows(runs)
    assert table(rows) + "\n" + primitive_table(rows) in doc("docs/evaluation.md")
    v2, v3, ten = (run["rows"]["policy"] for run in runs)
    limits = [run["outcomes"]["step_limit"] for run in runs]
    assert count(ten["seen"], "csr95") > count(v3["seen"], "csr95")  # the steps buy successes
    assert_quoted(
        flat_doc("docs/evaluation.md"),
        [
            f"`docs/results/breadth_v3_10k_training.json`, {training['minutes']} min alone",
            f"recognise {count(ten['seen'], 'ctx_acc')} of 48 seen contexts (breadth v2, four starts: "
            f"{count(v2['seen'], 'ctx_acc')}; breadth v3, three starts at 6,000: {count(v3['seen'], 'ctx_acc')}) and land "
            f"{count(ten['seen'], 'csr95')} inside the envelope ({count(v2['seen'], 'csr95')}; {count(v3['seen'], 'csr95')}), "
            f"Geom. {ten['seen']['geom']['mean']:.2f} ({v2['seen']['geom']['mean']:.2f}; {v3['seen']['geom']['mean']:.2f})",
            f"on the held-out folds {count(ten['heldout'], 'ctx_acc')} of 9 are recognised ({count(v2['heldout'], 'ctx_acc')}; "
            f"{count(v3['heldout'], 'ctx_acc')}), Geom. {ten['heldout']['geom']['mean']:.2f} "
            f"({v2['heldout']['geom']['mean']:.2f}; {v3['heldout']['geom']['mean']:.2f})",
            f"{limits[2]} of the 57 rollouts stop at the step limit (breadth v2: {limits[0]}; breadth v3: {limits[1]})",
            f"fourth start is level on successes and {count(v2['seen'], 'ctx_acc') - count(ten['seen'], 'ctx_acc')} contexts ahead",
        ],
    )


def following_table(rows: list[tuple[str, str]]) -> str:
    """docs/policy.md's "Target following" table: per checkpoint (label, offline JSON of
    docs/results) and split, the trajectory's target following and the other offline checks."""
    lines = [
        "| offline checks | split | target following: slope ↑ | straight follower | first grasp: mean (cm) ↓ "
        "| within 5 cm (%) ↑ | keypose arm sensitivity ↓ | action error (cm) ↓ |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, name in rows:
        run = result(name)
        for split, title in (("train", "training"), ("heldout", "held-out starts")):
            r = run[split]
            f, g = r["target_following"], r["first_grasp"]
            lines.append(
                f"| {label} | {title} ({r['episodes']}) | {f['slope_median']:.2f} | {f['follower_slope_median']:.2f} "
                f"| {g['mean_error_cm']:.1f} | {g['within_5cm'] * 100:.1f} | {r['arm_sensitivity']['slope_median']:.3f} "
                f"| {r['action_error_cm']:.2f} |"
            )
    return "\n".join(lines) + "\n"


def test_target_following_is_the_measured_one() -> None:
    """docs/policy.md's "Target following": the offline probe of both checkpoints and the closed-loop
    rows of the policy trained with target shifts against the one without."""
    offline = [("three starts, 10,000 steps", "offline_breadth_v3_10k.json")]
    offline.append(("the same with target shifts of up to 10 cm", "offline_target_shift.json"))
    runs = [result(f"{name}.json") for name in ("folds_breadth_v3_10k", "folds_target_shift")]
    assert cpu_flags(runs[0]) == cpu_flags(runs[1]) and runs[0]["bank"] == runs[1]["bank"]
    rows = merged_rows(runs)
    policy = doc("docs/policy.md")
    assert following_table(offline) in policy and table(rows) + "\n" + grasp_table(rows) in policy
    training = result("target_shift_training.json")
    assert training["policy_start"]["episodes"] == 321 and training["policy_end"]["event"] == "end"
    (_, before), (_, after) = ((label, result(name)["heldout"]["target_following"]) for label, name in offline)
    old, new = (run["rows"]["policy"] for run in runs)
    limits = [run["outcomes"]["step_limit"] for run in runs]
    first = [row["seen"]["first_grasp"] for row in (old, new)]
    assert after["slope_median"] > before["slope_median"] and limits[1] < limits[0]
    assert count(new["seen"], "csr95") < count(old["seen"], "csr95")  # and yet: rejected
    assert_quoted(
        flat_doc("docs/policy.md"),
        [
            f"Closed loop, {limits[0]} of the 57 rollouts of the three-start policy at 10,000 steps stop",
            f"moves its chunk end by {before['slope_median']:.2f} of a target shift on the held-out starts, where a "
            f"straight follower would move it by {before['follower_slope_median']:.2f}",
            f"{training['minutes']} min, `docs/results/target_shift_training.json`",
            f"raise the target following a little ({after['slope_median']:.2f} against {before['slope_median']:.2f}; "
            f"a straight follower: {after['follower_slope_median']:.2f})",
            f"cut the rollouts stopped at the step limit from {limits[0]} to {limits[1]} of 57, and the held-out folds' "
            f"Geom. from {old['heldout']['geom']['mean']:.2f} to {new['heldout']['geom']['mean']:.2f}",
            f"the seen folds lose {count(old['seen'], 'csr95') - count(new['seen'], 'csr95')} of their "
            f"{count(old['seen'], 'csr95')} successes ({count(new['seen'], 'csr95')}; Geom. "
            f"{new['seen']['geom']['mean']:.2f} against {old['seen']['geom']['mean']:.2f}), with as many contexts right "
            f"({count(new['seen'], 'ctx_acc')} of 48)",
            f"({first[1]['xy_m']['mean'] * 100:.1f} cm against {first[0]['xy_m']['mean'] * 100:.1f}, "
            f"{first[1]['within_5cm'] * 100:.1f} % within 5 cm against {first[0]['within_5cm'] * 100:.1f} %;",
        ],
    )
    assert count(new["seen"], "ctx_acc") == count(old["seen"], "ctx_acc")


def test_progress_through_the_fold_is_the_measured_one() -> None:
    """docs/policy.md's "Progress through the fold": the closed-loop rows of the policy told its event
    counts against the same recipe without them."""
    runs = [result(f"{name}.json") for name in ("folds_breadth_v3_10k", "folds_progress", "folds_breadth_v2")]
    assert len({cpu_flags(run) for run in runs}) == 1 and len({run["bank"] for run in runs}) == 1
    rows = merged_rows(runs[:2])
    assert table(rows) + "\n" + grasp_table(rows) + "\n" + primitive_table(rows) in doc("docs/policy.md")
    training = result("progress_training.json")
    assert training["policy_start"]["episodes"] == 321 and training["policy_end"]["event"] == "end"
    old, new, v2 = (run["rows"]["policy"] for run in runs)
    limits = [run["outcomes"]["step_limit"] for run in runs[:2]]
    extra = [sum(e["extra"] for e in row["seen"]["events"].values()) for row in (old, new)]
    missed = [row["seen"]["events"]["grasp 2"]["missed"] for row in (old, new)]
    body = [row["seen"]["primitives"]["body"] for row in (old, new)]
    csr_bar = 0.7 * runs[1]["rows"]["oracle-out-of-sample"]["seen"]["csr95"]["mean"]
    geom_bar = runs[1]["rows"]["do-nothing"]["heldout"]["geom"]["mean"] / 2
    made = [row["seen"]["events"]["grasp 1"]["measured"] for row in (old, new)]
    assert (
        limits[1] < limits[0] and extra[1] < extra[0] and count(new["seen"], "ctx_acc") > count(old["seen"], "ctx_acc")
    )
    assert_quoted(
        flat_doc("docs/policy.md"),
        [
            f"{training['minutes']} min, `docs/results/progress_training.json`",
            f"{limits[1]} of the 57 rollouts stop at the step limit ({limits[0]} without)",
            f"grasps and releases beyond the oracle's on the seen folds: {extra[1]} ({extra[0]} without",
            f"second grasps never made: {missed[1]} of {new['seen']['events']['grasp 2']['expected']} ({missed[0]})",
            f"{count(new['seen'], 'ctx_acc')} of 48 seen contexts right ({count(old['seen'], 'ctx_acc')} without), "
            f"the shown fold's body fold in {body[1]:.1f} % ({body[0]:.1f} %); {count(new['seen'], 'csr95')} inside the "
            f"envelope ({count(old['seen'], 'csr95')}), Geom. {new['seen']['geom']['mean']:.2f} "
            f"({old['seen']['geom']['mean']:.2f}); every expected first grasp made ({made[0]} of 96 without)",
            f"Held-out folds: {count(new['heldout'], 'ctx_acc')} of 9 recognised ({count(old['heldout'], 'ctx_acc')}), "
            f"Geom. {new['heldout']['geom']['mean']:.2f} ({old['heldout']['geom']['mean']:.2f})",
            f"(seen Ctx. Acc. {new['seen']['ctx_acc']['mean']:.1f} % against 90 %, C-SR@95 "
            f"{new['seen']['csr95']['mean']:.1f} % against {csr_bar:.1f} %, held-out Ctx. Acc. "
            f"{new['heldout']['ctx_acc']['mean']:.1f} % against 60 %, held-out Geom. "
            f"{new['heldout']['geom']['mean']:.2f} against {geom_bar:.2f})",
            f"breadth v2 (four starts, 10,000 steps) had {count(v2['seen'], 'ctx_acc')} of 48 seen contexts, "
            f"{count(v2['seen'], 'csr95')} successes, Geom. {v2['seen']['geom']['mean']:.2f}",
        ],
    )
    assert made[1] == 96


def test_progress_at_the_recipes_steps_is_the_measured_one() -> None:
    """docs/policy.md's "Progress through the fold" at 6,000 steps: the cpu-folds recipe with and
    without it, the reason the recipe turns it on."""
    runs = [result(f"{name}.json") for name in ("folds_breadth_v3", "folds_progress_6k")]
    assert cpu_flags(runs[0]) == cpu_flags(runs[1]) and runs[0]["bank"] == runs[1]["bank"]
    rows = merged_rows(runs)
    assert table(rows) + "\n" + primitive_table(rows) in doc("docs/policy.md")
    training = result("progress_6k_training.json")
    assert training["policy_start"]["episodes"] == 321 and training["policy_end"]["event"] == "end"
    old, new = (run["rows"]["policy"] for run in runs)
    limits = [run["outcomes"]["step_limit"] for run in runs]
    extra = [sum(e["extra"] for e in row["seen"]["events"].values()) for row in (old, new)]
    geom_bar = runs[1]["rows"]["do-nothing"]["heldout"]["geom"]["mean"] / 2
    assert new["heldout"]["geom"]["mean"] <= geom_bar < old["heldout"]["geom"]["mean"]
    assert count(new["seen"], "ctx_acc") > count(old["seen"], "ctx_acc")
    assert count(new["seen"], "csr95") >= count(old["seen"], "csr95")
    assert_quoted(
        flat_doc("docs/policy.md"),
        [
            f"`docs/results/progress_6k_training.json`, {training['minutes']} min with the README test command beside it",
            f"{count(new['seen'], 'ctx_acc')} of 48 seen contexts right ({count(old['seen'], 'ctx_acc')} without), "
            f"as many successes ({count(new['seen'], 'csr95')}), Geom. {new['seen']['geom']['mean']:.2f} "
            f"({old['seen']['geom']['mean']:.2f}); held-out folds {count(new['heldout'], 'ctx_acc')} of 9 recognised "
            f"({count(old['heldout'], 'ctx_acc')}), Geom. {new['heldout']['geom']['mean']:.2f} "
            f"({old['heldout']['geom']['mean']:.2f}), under issue 34's bar of half of do-nothing's ({geom_bar:.2f})",
            f"{limits[1]} rollouts at the step limit ({limits[0]}), {extra[1]} grasps and releases beyond the oracle's "
            f"on the seen folds ({extra[0]})",
        ],
    )
    assert count(new["seen"], "csr95") == count(old["seen"], "csr95")  # "as many successes"


def test_progress_offline_is_the_measured_one() -> None:
    """docs/policy.md's "Progress through the fold": the offline checks with and without the counts."""
    offline = [("three starts, 10,000 steps", "offline_breadth_v3_10k.json")]
    offline.append(("the same with event progress", "offline_progress.json"))
    assert following_table(offline) in doc("docs/policy.md")
    before, after = (result(name)["heldout"] for _, name in offline)
    assert_quoted(
        flat_doc("docs/policy.md"),
        [
            f"({after['target_following']['slope_median']:.2f} against {before['target_following']['slope_median']:.2f} "
            f"on the held-out starts; a straight follower: {after['target_following']['follower_slope_median']:.2f})",
            f"({after['first_grasp']['within_5cm'] * 100:.1f} % against {before['first_grasp']['within_5cm'] * 100:.1f} %)",
            f"({after['action_error_cm']:.2f} against {before['action_error_cm']:.2f} cm)",
        ],
    )


def test_two_starts_at_ten_thousand_steps_is_the_measured_one() -> None:
    """docs/policy.md's "Two starts at 10,000 steps, without progress" against three starts."""
    runs = [result(f"{name}.json") for name in ("folds_breadth_v4", "folds_breadth_v3_10k")]
    assert cpu_flags(runs[0]) == cpu_flags(runs[1]) and runs[0]["bank"] == runs[1]["bank"]
    two, three = (run["rows"]["policy"] for run in runs)
    assert count(two["seen"], "csr95") >= count(three["seen"], "csr95")  # "does as well as three"
    assert_quoted(
        flat_doc("docs/policy.md"),
        [
            f"{count(two['seen'], 'ctx_acc')} of 48 seen contexts right, {count(two['seen'], 'csr95')} successes, "
            f"Geom. {two['seen']['geom']['mean']:.2f}; held-out folds {count(two['heldout'], 'ctx_acc')} of 9 "
            f"recognised, Geom. {two['heldout']['geom']['mean']:.2f}; {runs[0]['outcomes']['step_limit']} rollouts "
            "at the step limit",
            f"as three ({count(three['seen'], 'ctx_acc')}, {count(three['seen'], 'csr95')}, "
            f"{three['seen']['geom']['mean']:.2f}; held-out {count(three['heldout'], 'ctx_acc')}, "
            f"{three['heldout']['geom']['mean']:.2f})",
        ],
    )


def test_two_starts_ten_thousand_steps_and_progress_is_the_recipe_and_the_measured_one() -> None:
    """docs/policy.md's "Two starts, 10,000 steps and progress: the cpu-folds recipe": its closed
    loop against the same run without progress and against the recipe it replaced, its offline
    checks, and its cost from nothing within the 2.5 h budget."""
    names = ("folds_breadth_v4", "folds_breadth_v4_progress", "folds_progress_6k", "folds_progress")
    runs = [result(f"{name}.json") for name in names]
    v4, new = runs[:2]
    assert all(cpu_flags(run) == cpu_flags(v4) and run["bank"] == v4["bank"] for run in runs)
    rows = merged_rows([v4, new])
    assert table(rows) + "\n" + primitive_table(rows) in doc("docs/policy.md")
    run = result("breadth_v4_progress_training.json")
    start, generation = run["policy_start"], run["generation"]
    assert start["start_step"] == 0 and start["world_size"] == 2 and run["policy_end"]["ranks_in_sync"]
    assert run["generation_names"] == ["*__e00[01]", "proc_0000[012]__*__e003"] and start["episodes"] == 215
    assert generation["episodes"] == 16 * (7 * 2 + 3) and cpu_flags(run) == cpu_flags(v4)
    stages = _recipe_from_nothing(generation, start["episodes"], result("progress_training.json")["minutes"])
    total = round(sum(stages.values()), 1)
    assert total < 150
    assert_quoted(doc("docs/policy.md"), _cost_rows(stages, generation, start["episodes"]))
    p = {name: run["rows"]["policy"] for name, run in zip(("v4", "new", "replaced", "three"), runs, strict=True)}
    seen = {
        k: (count(r["seen"], "ctx_acc"), count(r["seen"], "csr95"), f"{r['seen']['geom']['mean']:.2f}")
        for k, r in p.items()
    }
    held = {k: (count(r["heldout"], "ctx_acc"), f"{r['heldout']['geom']['mean']:.2f}") for k, r in p.items()}
    extra = {k: sum(e["extra"] for e in r["seen"]["events"].values()) for k, r in p.items()}
    body = {k: f"{r['seen']['primitives']['body']:.1f}" for k, r in p.items()}
    assert seen["new"][1] == seen["v4"][1]  # "as many successes"
    assert seen["new"][0] > max(seen[k][0] for k in ("v4", "replaced", "three"))  # "the most so far"
    geom_bar = new["rows"]["do-nothing"]["heldout"]["geom"]["mean"] / 2
    assert float(held["new"][1]) > geom_bar
    offline = result("offline_breadth_v4_progress.json")["heldout"]
    oracle = new["rows"]["oracle-out-of-sample"]["seen"]["csr95"]["mean"]
    assert_quoted(
        flat_doc("docs/policy.md"),
        [
            f"- {seen['new'][0]} of 48 seen contexts right, the most so far ({seen['v4'][0]} without progress), as many "
            f"successes ({seen['new'][1]}), Geom. {seen['new'][2]} ({seen['v4'][2]}); the shown fold's body fold kept in "
            f"{body['new']} % of seen rollouts ({body['v4']} %); held-out folds {held['new'][0]} of 9 recognised "
            f"({held['v4'][0]}), Geom. {held['new'][1]} ({held['v4'][1]}); {new['outcomes']['step_limit']} rollouts at "
            f"the step limit ({v4['outcomes']['step_limit']}), {extra['new']} grasps and releases beyond the oracle's "
            f"on the seen folds ({extra['v4']}).",
            f"6,000 steps: {seen['replaced'][0]} of 48, {seen['replaced'][1]} successes, Geom. {seen['replaced'][2]}; "
            f"held-out {held['replaced'][0]} of 9, Geom. {held['replaced'][1]}) it recognises "
            f"{seen['new'][0] - seen['replaced'][0]} more seen contexts and folds {seen['new'][1] - seen['replaced'][1]} "
            f"more inside the envelope",
            f"(over the bar of half of do-nothing's, {geom_bar:.2f})",
            f"10,000 steps ({seen['three'][0]}, {seen['three'][1]}, {seen['three'][2]})",
            f"5 cm {offline['first_grasp']['within_5cm'] * 100:.1f} %, target following "
            f"{offline['target_following']['slope_median']:.2f}, action error {offline['action_error_cm']:.2f} cm",
            f"Within the 2.5 h budget by about {round(150 - total)} min",
            f"seen Ctx. Acc. {new['rows']['policy']['seen']['ctx_acc']['mean']:.1f} % against 90 %, C-SR@95 "
            f"{new['rows']['policy']['seen']['csr95']['mean']:.1f} % against {0.7 * oracle:.1f} %, held-out Ctx. Acc. "
            f"{new['rows']['policy']['heldout']['ctx_acc']['mean']:.1f} % against 60 %",
        ],
    )


def test_the_untrained_encoder_row_on_the_breadth_benchmark_is_the_measured_one() -> None:
    """docs/evaluation.md's "The untrained-encoder row on the breadth benchmark": the paper's second
    ordering at breadth v3's recipe with progress, same data, settings and benchmark."""
    runs = [result(f"{name}.json") for name in ("folds_progress_6k", "folds_untrained_6k")]
    assert cpu_flags(runs[0]) == cpu_flags(runs[1]) and runs[0]["bank"] == runs[1]["bank"]
    assert runs[1]["encoder"] != runs[0]["encoder"]  # each row closed loop with its own encoder
    rows = merged_rows(runs)
    assert table(rows) + "\n" + grasp_table(rows) + "\n" + primitive_table(rows) in doc("docs/evaluation.md")
    run, pretrained = result("untrained_6k_training.json"), result("progress_6k_training.json")
    assert run["encoder"].startswith("untrained") and cpu_flags(run) == cpu_flags(runs[0])
    same = ("episodes", "samples", "start_step", "world_size")
    assert [run["policy_start"][k] for k in same] == [pretrained["policy_start"][k] for k in same]
    trained, untrained = (r["rows"]["policy"] for r in runs)
    seen = [
        (count(r["seen"], "ctx_acc"), count(r["seen"], "csr95"), r["seen"]["geom"]["mean"])
        for r in (trained, untrained)
    ]
    held = [
        (count(r["heldout"], "ctx_acc"), count(r["heldout"], "csr95"), r["heldout"]["geom"]["mean"])
        for r in (trained, untrained)
    ]
    assert seen[0][:2] == seen[1][:2] and seen[0][2] < seen[1][2]  # "level ... shaped a little better"
    assert held[0][0] == held[1][0] + 1 and held[0][1] == held[1][1] + 1 and held[0][2] < held[1][2]
    within = [r["seen"]["first_grasp"]["within_5cm"] * 100 for r in (trained, untrained)]
    assert_quoted(
        flat_doc("docs/evaluation.md"),
        [
            f"`untrained_6k_training.json`: {run['policy_start']['episodes']} training episodes, "
            f"{run['policy_start']['samples']:,} samples, as the pretrained row's",
            f"({seen[0][0]} of 48 contexts right, {seen[0][1]} successes each)",
            f"(Geom. {seen[0][2]:.2f} against {seen[1][2]:.2f})",
            f"more often ({within[0]:.1f} % against {within[1]:.1f} %)",
            f"({held[0][0]} of 9 against {held[1][0]}), succeeds once more ({held[0][1]} against {held[1][1]}) and "
            f"shapes them better (Geom. {held[0][2]:.2f} against {held[1][2]:.2f})",
        ],
    )


def test_the_recipes_second_draw_is_the_measured_one() -> None:
    """docs/policy.md's second draw of the cpu-folds recipe's row: same checkpoint, bank and machine, sampler seed 1."""
    first, second = (
        result(f"{name}.json") for name in ("folds_breadth_v4_progress", "folds_breadth_v4_progress_seed1")
    )
    assert (first["seed"], second["seed"]) == (0, 1) and first["checkpoint"] == second["checkpoint"]
    assert cpu_flags(first) == cpu_flags(second) and first["bank"] == second["bank"]
    one, two = (run["rows"]["policy"] for run in (first, second))
    assert_quoted(
        flat_doc("docs/policy.md"),
        [
            f"{count(two['seen'], 'ctx_acc')} of 48 seen contexts right, {count(two['seen'], 'csr95')} successes, Geom. "
            f"{two['seen']['geom']['mean']:.2f}; held-out folds {count(two['heldout'], 'ctx_acc')} of 9 recognised, Geom. "
            f"{two['heldout']['geom']['mean']:.2f}; {second['outcomes']['step_limit']} rollouts at the step limit",
            f"across draws ({count(one['seen'], 'ctx_acc')}, {count(two['seen'], 'ctx_acc')}); the successes "
            f"({count(one['seen'], 'csr95')}, {count(two['seen'], 'csr95')}) and the held-out folds "
            f"({count(one['heldout'], 'ctx_acc')}, {count(two['heldout'], 'ctx_acc')} of 9)",
        ],
    )


#: The pipeline's stage keys (`stage_minutes`) by the names docs/policy.md's cost tables give them.
STAGES = {
    "1/6": "generation",
    "2/6": "encoder",
    "3/6": "tokenising",
    "4/6": "keypoints",
    "5/6": "policy",
    "6/6": "offline evaluation",
}


def test_the_recipe_from_nothing_is_the_measured_one() -> None:
    """docs/policy.md's "The recipe from nothing, with the progress bias": its stages as measured,
    within the 2.5 h budget."""
    run = result("progress_bias_from_nothing.json")
    minutes, generation, start = run["stage_minutes"], run["generation"], run["policy_start"]
    assert list(minutes) == list(STAGES) and run["total_minutes"] < 150
    assert abs(sum(minutes.values()) - run["total_minutes"]) < 0.3  # each rounded to 0.1
    assert start["start_step"] == 0 and start["world_size"] == 2 and run["policy_end"]["ranks_in_sync"]
    assert start["parameters"]["fusion_progress"] + start["parameters"]["anchor_progress"] == 56
    assert generation["episodes"] == 272 and cpu_flags(run) == "08328ec5383d"
    text = doc("docs/policy.md")
    assert_quoted(
        text,
        [f"| {STAGES[k]} | {m} |" for k, m in minutes.items()]
        + [
            f"{generation['episodes']} episodes, {generation['worker_seconds']:,} worker-seconds "
            f"({generation['minutes_for_2_workers']} min over 2 workers)",
            f"{run['episodes']['tokens_train']} training and {run['episodes']['tokens_heldout']} held-out episodes",
            f"{start['samples']:,} samples, as breadth v4's",
            f"| total | {run['total_minutes']} |",
        ],
    )
    assert start["samples"] == result("breadth_v4_progress_training.json")["policy_start"]["samples"]
    assert_quoted(flat_doc("docs/policy.md"), [f"within the 2.5 h budget, by {150 - run['total_minutes']:.1f} min"])


def test_the_progress_bias_row_is_the_measured_one() -> None:
    """docs/policy.md's closed-loop row of the recipe from nothing with the progress bias, and its
    claims against every other row of the breadth benchmark in docs/results."""
    new = result("folds_progress_bias.json")
    assert cpu_flags(new) == cpu_flags("progress_bias_from_nothing.json")
    assert table(merged_rows([new])) + "\n" + primitive_table(merged_rows([new])) in doc("docs/policy.md")
    p = new["rows"]["policy"]
    names = [f"folds_{n}" for n in ("breadth_v2", "breadth_v3_10k", "breadth_v4", "breadth_v4_progress", "progress")]
    others = {n: result(f"{n}.json")["rows"]["policy"]["seen"] for n in [*names, "folds_breadth_v4_progress_seed1"]}
    replay = result("folds_registration_replay.json")["rows"]["policy"]["seen"]
    assert all(count(o, "csr95") < count(p["seen"], "csr95") for o in others.values())
    assert count(replay, "csr95") == count(p["seen"], "csr95")
    assert all(o["geom"]["mean"] > p["seen"]["geom"]["mean"] for o in [*others.values(), replay])
    geom_bar = new["rows"]["do-nothing"]["heldout"]["geom"]["mean"] / 2
    oracle = new["rows"]["oracle-out-of-sample"]["seen"]["csr95"]["mean"]
    recipe = [others[f"folds_breadth_v4_progress{s}"] for s in ("", "_seed1")]
    assert_quoted(
        flat_doc("docs/policy.md"),
        [
            f"Seen folds: {count(p['seen'], 'ctx_acc')} of 48 contexts right, {count(p['seen'], 'csr95')} successes "
            f"({p['seen']['csr95']['mean']:.1f} %), Geom. {p['seen']['geom']['mean']:.2f}",
            f"as many as registration replay's ({count(replay, 'csr95')}, Geom. {replay['geom']['mean']:.2f})",
            f"{count(recipe[0], 'csr95')} and {count(recipe[1], 'csr95')} successes, Geom. "
            f"{recipe[0]['geom']['mean']:.2f} and {recipe[1]['geom']['mean']:.2f}); "
            f"{new['outcomes']['step_limit']} rollouts at the step limit",
            f"Held-out folds: {count(p['heldout'], 'ctx_acc')} of 9 recognised ({p['heldout']['ctx_acc']['mean']:.1f} %, "
            f"over issue 34's 60 % bar), Geom. {p['heldout']['geom']['mean']:.2f} (over the bar of half of "
            f"do-nothing's, {geom_bar:.2f})",
            f"Ctx. Acc. {p['seen']['ctx_acc']['mean']:.1f} % against 90 %; C-SR@95 {p['seen']['csr95']['mean']:.1f} % "
            f"against {0.7 * oracle:.1f} % (70 % of the out-of-sample oracle's {oracle:.1f} %), one fold short",
        ],
    )


#: docs/policy.md's "The progress bias, isolated": each row's name and its measured JSON.
ISOLATION = {
    "with the bias, train seed 0, sampler seed 0": "folds_progress_bias.json",
    "with the bias, train seed 0, sampler seed 1": "folds_progress_bias_sampler1.json",
    "with the bias, train seed 1, sampler seed 0": "folds_progress_bias_train_seed1.json",
    "without, train seed 0, sampler seed 0": "folds_no_progress_bias.json",
    "without, train seed 0, sampler seed 1": "folds_no_progress_bias_sampler1.json",
}


def _draw_row(name: str, run: dict) -> str:
    """One line of the breadth draws' tables (the progress bias isolated, the event order, the
    partner call): the counts a reader compares across draws."""
    seen, heldout = run["rows"]["policy"]["seen"], run["rows"]["policy"]["heldout"]
    return (
        f"| {name} | {count(seen, 'ctx_acc')}/{seen['rollouts']} | {count(seen, 'csr95')} "
        f"({seen['csr95']['mean']:.1f} %) | {seen['geom']['mean']:.2f} | "
        f"{count(heldout, 'ctx_acc')}/{heldout['rollouts']} | {heldout['geom']['mean']:.2f} | "
        f"{run['outcomes']['step_limit']} |"
    )


def test_the_progress_bias_isolated_is_the_measured_one() -> None:
    """docs/policy.md's draws with and without the progress bias on one machine, one set of tokens and
    one encoder: each row as measured, and the mean successes the recipe's choice rests on (the
    recipe itself: test_pipeline)."""
    runs = {name: result(path) for name, path in ISOLATION.items()}
    assert {cpu_flags(run) for run in runs.values()} == {cpu_flags("progress_bias_from_nothing.json")}
    assert {run["encoder"] for run in runs.values()} == {"runs/folds_nothing/pretrain/encoder"}
    assert [run["seed"] for run in runs.values()] == [0, 1, 0, 0, 1]
    text = doc("docs/policy.md")
    assert_quoted(text, [_draw_row(name, run) for name, run in runs.items()])
    new = [runs[n] for n in ISOLATION if ISOLATION[n] != "folds_progress_bias.json"]
    assert table(merged_rows(new)) + "\n" + primitive_table(merged_rows(new)) in text
    seen = {name: run["rows"]["policy"]["seen"] for name, run in runs.items()}
    successes = {
        side: [count(row, "csr95") for name, row in seen.items() if name.split(",")[0] == side]
        for side in ("with the bias", "without")
    }
    assert min(successes["with the bias"]) > max(successes["without"])  # "every draw with it above"
    mean = {side: sum(draws) / len(draws) for side, draws in successes.items()}
    assert_quoted(
        flat_doc("docs/policy.md"),
        [f"{mean['with the bias']:.1f} successes per draw with the bias, {mean['without']:.1f} without"],
    )


#: docs/policy.md's "The order of the arms' events": each row's name and its measured JSON (the
#: rows without the order are the isolation's draws with the bias, above).
EVENT_ORDER = {
    "train seed 0, sampler seed 0": ("folds_progress_bias.json", "folds_event_order.json"),
    "train seed 0, sampler seed 1": ("folds_progress_bias_sampler1.json", "folds_event_order_sampler1.json"),
    "train seed 1, sampler seed 0": ("folds_progress_bias_train_seed1.json", "folds_event_order_train_seed1.json"),
    "without the bias, train seed 0, sampler seed 0": ("folds_no_progress_bias.json", "folds_event_order_no_bias.json"),
}


def _order_row(name: str, without: dict, held: dict) -> str:
    """One draw without the order and with it."""
    return f"{_draw_row(f'{name}, without', without)}\n{_draw_row(f'{name}, with the order', held)}"


def test_the_order_of_the_arms_events_is_the_measured_one() -> None:
    """docs/policy.md's draws with the fold loop's event order against the same checkpoints and
    sampler seeds without it, the bars of issue 34 they are held to, and the row that takes every
    later grasp from the demonstration instead."""
    pairs = {name: (result(a), result(b)) for name, (a, b) in EVENT_ORDER.items()}
    runs = [run for pair in pairs.values() for run in pair]
    assert {cpu_flags(run) for run in runs} == {cpu_flags("progress_bias_from_nothing.json")}
    for without, held in pairs.values():  # a pair differs in the order alone
        assert (held["checkpoint"], held["seed"], held["encoder"]) == (
            without["checkpoint"],
            without["seed"],
            without["encoder"],
        )
        assert without.get("event_order_wait") is None and held["event_order_wait"] == 30
    text = doc("docs/policy.md")
    assert_quoted(text, [_order_row(name, *pair) for name, pair in pairs.items()])
    new = [held for _, held in pairs.values()]
    assert table(merged_rows(new)) + "\n" + primitive_table(merged_rows(new)) in text
    seen = {name: [p["rows"]["policy"]["seen"] for p in pair] for name, pair in pairs.items()}
    oracle = new[0]["rows"]["oracle-out-of-sample"]["seen"]["csr95"]["mean"]
    geom_bar = new[0]["rows"]["do-nothing"]["heldout"]["geom"]["mean"] / 2
    ctx = [count(held, "ctx_acc") for _, held in seen.values()]
    wins = [successes(held) for _, held in seen.values()]
    before = [successes(without) for without, _ in seen.values()]
    stuck = sum(
        held["contexts"]["body_bottom_up__sleeves_down/S"]["policy"]["classified_as"].get(
            "body_bottom_up__sleeves_center/R", 0
        )
        for held in new
    )
    missed = sum(held["rollouts"] - count(held, "ctx_acc") for _, held in seen.values())
    match = result("folds_progress_bias_match50.json")
    m = match["rows"]["policy"]["seen"]
    assert (match["checkpoint"], match["seed"], match["grasp_match_m"]) == (new[0]["checkpoint"], 0, 0.5)
    heldout = [held["rows"]["policy"]["heldout"] for held in new]
    held_geom = ", ".join(f"{h['geom']['mean']:.2f}" for h in heldout)
    assert_quoted(
        flat_doc("docs/policy.md"),
        [
            f"{sum(before) / len(pairs):.1f} successes per draw without the order, {sum(wins) / len(pairs):.1f} with it",
            f"more contexts right ({', '.join(map(str, ctx[:-1]))} and {ctx[-1]} of 48 with the order",
            f"against issue 34's 90 % and {0.7 * oracle:.1f} % (70 % of the out-of-sample oracle's {oracle:.1f} %)",
            f"every later grasp at the demonstrated one (`--grasp-match-m 0.5`, same checkpoint and seed; "
            f"`docs/results/folds_progress_bias_match50.json`): {count(m, 'ctx_acc')} of 48 contexts right, "
            f"{successes(m)} successes, Geom. {m['geom']['mean']:.2f}",
            f"Held-out folds: recognised {', '.join(str(count(h, 'ctx_acc')) for h in heldout[:-1])} and "
            f"{count(heldout[-1], 'ctx_acc')} of 9 with the order",
            f"Geom. {held_geom} with the order against the bar of {geom_bar:.2f}",
            f"Still misrecognised: {stuck} of the {missed} seen folds the four draws name wrongly",
        ],
    )


def test_the_default_policy_with_the_event_order_is_the_measured_one() -> None:
    """docs/policy.md's default policy (v6) with and without the event order on its quick yardstick,
    the whole hem-rigid benchmark and its held-out garments, on one machine, the order the only
    difference."""
    without, held = result("quick_sleeve_v6_08328.json"), result("quick_sleeve_v6_event_order.json")
    assert cpu_flags(without) == cpu_flags(held) == cpu_flags("folds_event_order.json")
    for run in (without, held):
        assert (run["checkpoint"], run["encoder"], run["event_targets"]) == (
            "models/policy",
            "models/encoder",
            "demonstration",
        )
        assert run["benchmark"]["name"] == "cpu_quick_sleeve" and run["seed"] == 0
    assert without.get("event_order_wait") is None and held["event_order_wait"] == 30
    a, b = (run["rows"]["policy"]["seen"] for run in (without, held))
    assert_quoted(
        flat_doc("docs/policy.md"),
        [
            f"contexts right {count(a, 'ctx_acc')} of {a['rollouts']} without the order, {count(b, 'ctx_acc')} "
            f"with it; successes {successes(a)} and {successes(b)}; Geom. {a['geom']['mean']:.2f} and "
            f"{b['geom']['mean']:.2f}",
        ],
    )


#: The default policy (v6) on the old starts and their held-out garments: (without, with the order).
V6_OLD_STARTS = {
    "cpu": ("eval_cpu_v6_08328.json", "eval_cpu_v6_event_order.json"),
    "cpu_garments": ("eval_cpu_garments_v6_08328.json", "eval_cpu_garments_v6_event_order.json"),
}
#: ... and the whole of the rule's comparison: the hem-rigid runs too.
V6_HEM_RIGID = {
    "cpu_sleeve": ("eval_cpu_sleeve_v6_08328.json", "eval_cpu_sleeve_v6_event_order.json"),
    "cpu_garments_sleeve": ("eval_cpu_garments_sleeve_v6_08328.json", "eval_cpu_garments_sleeve_v6_event_order.json"),
}


def test_the_event_order_is_the_default_by_the_rule_for_a_new_default(capsys) -> None:
    """docs/policy.md's default policy with and without the event order on the old starts, the main
    jobs with it, and the rule's verdict that put it in config/policy.yaml."""
    import yaml
    from docs_quotes import REPO

    from instant_fold_evaluation.compare import main as compare

    pairs = {name: (result(a), result(b)) for name, (a, b) in {**V6_OLD_STARTS, **V6_HEM_RIGID}.items()}
    for name, (without, held) in pairs.items():
        assert cpu_flags(without) == cpu_flags(held) == cpu_flags("folds_event_order.json")
        assert without["benchmark"]["name"] == held["benchmark"]["name"] == name
        assert (held["checkpoint"], held["seed"]) == (without["checkpoint"], without["seed"]) == ("models/policy", 0)
        assert without.get("event_order_wait") is None and held["event_order_wait"] == 30
    (cpu_a, cpu_b), (g_a, g_b) = (
        (p["rows"]["policy"]["seen"] for p in pairs[name]) for name in ("cpu", "cpu_garments")
    )
    jobs = [
        result(f"main_job{demo}_{run}.json") for demo in ("", "_second_demo") for run in ("08328", "event_order_call")
    ]
    assert {cpu_flags(job) for job in jobs} == {cpu_flags("folds_event_order.json")}
    assert [job["same_init"]["geom"] for job in jobs[:2]] == [jobs[0]["same_init"]["geom"]] * 2
    assert [job["same_init"]["geom"] for job in jobs[2:]] == [jobs[2]["same_init"]["geom"]] * 2
    assert all(job["same_init"]["csr95_success"] for job in jobs)
    assert count(cpu_a, "ctx_acc") == count(cpu_b, "ctx_acc")
    assert_quoted(
        flat_doc("docs/policy.md"),
        [
            f"seen folds recognised {count(cpu_a, 'ctx_acc')} of 63 without the order and with it",
            f"successes {successes(cpu_a)} and {successes(cpu_b)}; Geom. {cpu_a['geom']['mean']:.2f} and "
            f"{cpu_b['geom']['mean']:.2f}; held-out garments: successes {successes(g_a)} and {successes(g_b)} of 18, "
            f"Geom. {g_a['geom']['mean']:.2f} and {g_b['geom']['mean']:.2f}",
            f"Geom. {jobs[0]['same_init']['geom']:.2f} and {jobs[2]['same_init']['geom']:.2f}, both successes",
        ],
    )
    runs = [
        str(REPO / "docs" / "results" / pair[i]) for i in (0, 1) for pair in {**V6_OLD_STARTS, **V6_HEM_RIGID}.values()
    ]
    assert compare(["--baseline", *runs[:4], "--candidate", *runs[4:]]) == 0
    assert "gained ['cpu_sleeve: held-out garments C-SR@95 (%)']" in capsys.readouterr().out
    fold = yaml.safe_load((REPO / "config" / "policy.yaml").read_text())["policy_server"]["ros__parameters"]["fold"]
    assert fold["event_order"] is True


#: The partner call's draws: (with the order alone, with the order and the call).
CALL = {
    "train seed 0, sampler seed 0": ("folds_event_order.json", "folds_event_order_call.json"),
    "train seed 0, sampler seed 1": ("folds_event_order_sampler1.json", "folds_event_order_call_sampler1.json"),
    "train seed 1, sampler seed 0": ("folds_event_order_train_seed1.json", "folds_event_order_call_train_seed1.json"),
}


def test_calling_the_partner_is_the_measured_one() -> None:
    """docs/policy.md's draws and default-policy runs with the partner call against the same runs
    with the event order alone: the call the only difference."""
    pairs = {name: (result(a), result(b)) for name, (a, b) in CALL.items()}
    v6 = {
        name: (result(f"eval_{name}_v6_event_order.json"), result(f"eval_{name}_v6_event_order_call.json"))
        for name in ("cpu", "cpu_garments")
    }
    for order, call in [*pairs.values(), *v6.values()]:
        assert cpu_flags(order) == cpu_flags(call) == cpu_flags("folds_event_order.json")
        assert (call["checkpoint"], call["seed"], call["encoder"]) == (
            order["checkpoint"],
            order["seed"],
            order["encoder"],
        )
        assert order["event_order_wait"] == call["event_order_wait"] == 30
        assert not order.get("event_order_call") and call["event_order_call"] is True
    lines = [
        _draw_row(f"{name}, {label}", run)
        for name, pair in pairs.items()
        for label, run in zip(("with the order", "with the order and the call"), pair, strict=True)
    ]
    text = doc("docs/policy.md")
    assert_quoted(text, lines)
    (cpu_a, cpu_b), (g_a, g_b) = ((run["rows"]["policy"]["seen"] for run in pair) for pair in v6.values())
    seed1 = pairs["train seed 1, sampler seed 0"][1]
    seen, heldout = seed1["rows"]["policy"]["seen"], seed1["rows"]["policy"]["heldout"]
    oracle = seed1["rows"]["oracle-out-of-sample"]["seen"]["csr95"]["mean"]
    geom_bar = seed1["rows"]["do-nothing"]["heldout"]["geom"]["mean"] / 2
    assert seen["ctx_acc"]["mean"] >= 90 and seen["csr95"]["mean"] >= 0.7 * oracle
    assert count(heldout, "ctx_acc") / heldout["rollouts"] >= 0.6 and heldout["geom"]["mean"] <= geom_bar
    fixed = [
        sum(
            run["contexts"]["body_bottom_up__sleeves_down/S"]["policy"]["classified_as"].get(
                "body_bottom_up__sleeves_down/S", 0
            )
            for run in pair
        )
        for pair in zip(*pairs.values(), strict=True)
    ]
    assert_quoted(
        flat_doc("docs/policy.md"),
        [
            f"seen: {seen['ctx_acc']['mean']:.1f} % of contexts against 90 %, C-SR@95 {seen['csr95']['mean']:.1f} % "
            f"against {0.7 * oracle:.1f} %; held-out: {count(heldout, 'ctx_acc')} of 9 recognised, Geom. "
            f"{heldout['geom']['mean']:.2f} against {geom_bar:.2f}",
            f"`body_bottom_up__sleeves_down/S` recognised on {fixed[1]} of the three draws' 9 garments with the call, "
            f"{fixed[0]} without it",
            f"The default policy (v6) on the old starts: successes {successes(cpu_a)} and {successes(cpu_b)} of 63, "
            f"Geom. {cpu_a['geom']['mean']:.2f} and {cpu_b['geom']['mean']:.2f}; its held-out garments: "
            f"{successes(g_a)} and {successes(g_b)} of 18",
        ],
    )
