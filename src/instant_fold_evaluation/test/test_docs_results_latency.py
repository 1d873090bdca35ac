"""Issue 32's latency numbers in the README and docs/architecture.md are the measured ones.

Typed once: the prose and tables quote docs/results/{main_job,latency_issue32,bench_graph,bench_dds}.json.
"""

from __future__ import annotations

from docs_quotes import assert_quoted, doc, result

BEFORE = "before: Fast DDS defaults, multi-threaded executors"
PROFILE_ONLY = "project DDS profile, multi-threaded executors"
AFTER = "after: project DDS profile, single-threaded executors + side nodes"


def _ms(value: float) -> str:
    return f"{value:,.0f}"


def _runs(name: str) -> list[dict]:
    return result("latency_issue32.json")["runs"][name]


def test_the_readme_quotes_the_main_jobs_latency_and_time() -> None:
    run = result("main_job.json")
    readme = doc("README.md")
    lat = run["latency"]
    wall = round(run["wall_s_total"])
    before = [r["latency"]["tokens_to_command"] for r in _runs(BEFORE)]
    quoted = [
        f"{wall // 60} min {wall % 60} s\nin all",
        f"median {_ms(lat['tokens_to_command']['median_ms'])} ms, p95 {_ms(lat['tokens_to_command']['p95_ms'])} ms, "
        f"max {_ms(lat['tokens_to_command']['max_ms'])} ms",
        f"p95 {_ms(lat['frame_to_command']['p95_ms'])} ms, over",
        f"p95 {_ms(before[0]['p95_ms'])} and {_ms(before[1]['p95_ms'])} ms, max {_ms(before[0]['max_ms'])} and\n"
        f"{_ms(before[1]['max_ms'])} ms in two runs",
    ]
    assert_quoted(readme.replace("\n", " "), [q.replace("\n", " ") for q in quoted])


def test_the_latency_table_quotes_every_run() -> None:
    docs = doc("docs/architecture.md")
    for name in (BEFORE, PROFILE_ONLY, AFTER):
        for r in _runs(name):
            t, s, f = (r["latency"][k] for k in ("tokens_to_command", "tokens_to_state", "frame_to_command"))
            row = (
                f"| {_ms(t['median_ms'])} / {_ms(t['p95_ms'])} / {_ms(t['max_ms'])} | {_ms(s['max_ms'])} | "
                f"{_ms(f['p95_ms'])} | {r['fold_duration_s']:.0f} s |"
            )
            assert row in docs, (name, row)


def test_the_stage_tables_quote_the_benchmarks() -> None:
    docs = doc("docs/architecture.md")
    graph = result("bench_graph.json")
    for case in graph["cases"]:
        p, g = case["in_process"], case["graph"]["latency"]
        cells = [
            p["tokenizer_per_frame"],
            p["context_cache_per_keyframe"],
            p["query"],
            g["frame_to_tokens"],
            g["tokens_to_command"],
        ]
        row = f"| {case['config']} | {case['busy_processes']} | " + " | ".join(
            f"{_ms(c['median_ms'])} / {_ms(c['p95_ms'])} / {_ms(c['max_ms'])}" for c in cells
        )
        assert row in docs, row
    dds = result("bench_dds.json")
    for case in dds["cases"]:
        cells = [case[k] for k in ("step_answer", "tokens_hop", "state_hop", "chunk_hop")]
        row = f"| {case['profile']} | {case['config']} | {case['busy_processes']} | " + " | ".join(
            f"{c['median_ms']:.1f} / {c['p95_ms']:.1f} / {c['max_ms']:.1f}" for c in cells
        )
        assert row in docs, row


def test_the_readme_quotes_the_first_querys_latency_as_measured() -> None:
    """The README's account of the fold's first query: counted in the README's run, where it waited
    for its tokens; in v5's two runs the delay fell between tokens and chunk."""
    run = result("main_job.json")
    queries = run["latency_queries"]
    first, second = (
        result(name)["latency_queries"] for name in ("main_job_20261127_first.json", "main_job_second_demo_v5.json")
    )
    assert len(queries) == run["fold"]["policy_queries"] and queries[0]["stamp_s"] == 0.0
    assert first[0]["stamp_s"] == second[0]["stamp_s"] == 0.0
    assert queries[0]["frame_to_tokens"] > 10 * max(q["frame_to_tokens"] for q in queries[1:])
    assert all(run[0]["tokens_to_command"] > 10 * run[0]["frame_to_tokens"] for run in (first, second))

    def rest(queries: list[dict]) -> str:
        return _ms(max(q["tokens_to_command"] for q in queries[1:]))

    quoted = [
        f"over {len(queries)} of the {run['fold']['policy_queries']} queries",
        f"waited {_ms(queries[0]['frame_to_tokens'])} ms for its cloth tokens (its chunk came "
        f"{_ms(queries[0]['tokens_to_command'])} ms after them)",
        f"{_ms(first[0]['tokens_to_command'])} ms in a run (",
        f"other queries at most {rest(first)} ms) and {_ms(second[0]['tokens_to_command'])} ms in v5's "
        f"second-demonstration run (`docs/results/main_job_second_demo_v5.json`, at most {rest(second)} ms",
    ]
    assert_quoted(" ".join(doc("README.md").split()), quoted)
    assert_quoted(
        " ".join(doc("docs/architecture.md").split()),
        [
            f"(frame -> tokens {_ms(queries[0]['frame_to_tokens'])} ms, tokens -> chunk "
            f"{_ms(queries[0]['tokens_to_command'])} ms)",
            f"between tokens and chunk ({_ms(first[0]['tokens_to_command'])} and {_ms(second[0]['tokens_to_command'])} ms)",
        ],
    )
