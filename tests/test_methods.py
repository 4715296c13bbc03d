"""Method tables (each notebook's method against its article's), profile overlays and the
write audit: fast unit tests on synthetic points."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from sqlitelab.load import driver as load
from sqlitelab.report import methods
from sqlitelab.infra import servers
from sqlitelab.notebooks import studies, study
from sqlitelab.studies import method
from sqlitelab.batch import notebooks
from sqlitelab.experiments.sweep import audit


def points(**over) -> pd.DataFrame:
    """Two levels of a ruby-rails run (the article's stack in 01 and 02) as sweep() records them."""
    knobs = {"pragmas": {"journal_mode": "wal", "synchronous": "1"}, "txn_mode": "deferred",
             "busy": "busy_timeout:5000", "write_path": "pool", "processes": 10, "threads": 3,
             "metrics_txn": "request", "cache": "private", "yjit": "on"}
    knobs.update(over.pop("knobs", {}))
    row = {"server": "ruby-rails", "profile": "rails71", "scenario": "rails-writes",
           "machine": "2 cores (test CPU), 23.5 GiB", "server_pinning": "0", "generator_pinning": "1",
           "generator": "locust", "keepalive": True, "server_processes": knobs["processes"],
           "server_threads": knobs["threads"], "knobs": json.dumps(knobs), "hey_rps": 100.0,
           "hey_max_ms": 5.0, "run_counts": "{}", "mean_ms": 2.0, "p99_ms": 3.0,
           "server_versions": json.dumps({"ruby": "3.1.2", "rails": "6.1.7.10", "puma": "5.6.5",
                                          "sqlite3-ruby": "1.4.2"}),
           "sqlite_version": "3.40.1"}
    row.update(over)
    return pd.DataFrame([{**row, "users": 1}, {**row, "users": 16}])


PARAMS = {"levels": [1, 2, 4, 8, 16, 32], "duration": 10.0, "warmup": 2.0, "repeats": 3,
          "beyond_repeats": 1, "crosscheck_users": [1, 4, 16], "crosscheck_tool": "hey"}


def verdicts(table: pd.DataFrame) -> dict[str, str]:
    return dict(zip(table["aspect"], table["verdict"]))


def test_every_notebook_declares_its_article_and_every_difference_says_why():
    articles = [s.ARTICLE for s in studies().values() if s.ARTICLE is not None]
    assert {p.stem for p in notebooks()} <= {a.notebook for a in articles}
    for s in studies().values():
        assert s.ARTICLE is None or s.ARTICLE.notebook == s.ID, s.ID
    for a in articles:
        assert a.details, a.notebook
        for d in a.details:
            assert d.aspect and d.article, (a.notebook, d)
            if d.expect is not methods.NOT_STATED:
                assert d.why, f"{a.notebook}: '{d.aspect}' can differ but does not say why"
            assert d.compare in ("eq", "superset", "in")


def test_table_reads_the_run_and_judges_each_detail():
    t = methods.table(study("01-linear-writes").ARTICLE, points(), PARAMS)
    v = verdicts(t)
    assert v["Puma workers × threads"] == "same"
    assert v["journal mode"] == v["synchronous"] == v["transactions"] == v["busy handling"] == "same"
    assert v["concurrency levels"] == "differs: the run's levels do not include all of the article's"
    assert v["duration"] == "same" and v["repeats"] == "same"
    assert v["warm-up"].startswith("differs: the lab warms up")
    assert v["machine"].startswith("differs: another machine")
    row = t.set_index("aspect").loc["Puma workers × threads"]
    assert row["this run"] == "10 × 3"
    assert v["YJIT"].startswith("differs: Ruby 3.1's YJIT here")  # an earlier YJIT than the article's 3.2
    rows = t.set_index("aspect")
    # the software row as printed: the article's versions beside this run's, read from /health
    assert rows.loc["software", "article"] == "Ruby 3.2.2, Rails 7.1.2, sqlite3-ruby gem 1.6.9, SQLite 3.44.2"
    # SQLite 3.40.1 (Debian's) is inside the WAL-reset bug's range: flagged, with what triggers it
    said = rows.loc["software", "this run"]
    assert said.startswith("ruby 3.1.2, rails 6.1.7.10, puma 5.6.5, sqlite3-ruby 1.4.2, SQLite 3.40.1 ⚠ inside "
                           "the WAL-reset bug's range (3.7.0–3.51.2, fixed in 3.51.3, and in 3.44.6 and 3.50.7; ")
    assert "two or more connections to one database" in said
    assert rows.loc["the article's tool, here", "this run"] == "hey at 1, 4, 16 users"
    assert methods.unrecorded(t) == []
    # a fixed SQLite is not flagged; the compile options that bear on durability are named
    options = json.dumps(["COMPILER=gcc-12.2.0", "DEFAULT_WAL_SYNCHRONOUS=1", "ENABLE_FTS5", "THREADSAFE=1"])
    fixed = methods.table(study("01-linear-writes").ARTICLE,
                          points(sqlite_version="3.51.3", sqlite_options=options), PARAMS)
    assert fixed.set_index("aspect").loc["software", "this run"] == (
        "ruby 3.1.2, rails 6.1.7.10, puma 5.6.5, sqlite3-ruby 1.4.2, SQLite 3.51.3 "
        "(THREADSAFE=1, DEFAULT_WAL_SYNCHRONOUS=1)")


def test_yjit_off_is_a_named_difference():
    t = methods.table(study("01-linear-writes").ARTICLE, points(knobs={"yjit": "off"}), PARAMS)
    assert t.set_index("aspect").loc["YJIT", "this run"] == "off"
    assert verdicts(t)["YJIT"].endswith("the notebook's `yjit` parameter turns it off")


def test_levels_superset_and_knobs_read_back_from_health():
    t = methods.table(study("01-linear-writes").ARTICLE, points(knobs={"busy": "retries:1000"}),
                      {**PARAMS, "levels": [1, 2, 4, 8, 10, 16, 32, 64]})
    v = verdicts(t)
    assert v["concurrency levels"] == "same"
    assert v["busy handling"] == "differs: the profile sets another"
    assert t.set_index("aspect").loc["busy handling", "this run"] == "retries:1000"


def test_what_the_run_did_not_record_is_named_and_listed():
    pts = points().drop(columns=["hey_rps", "keepalive"])
    t = methods.table(study("01-linear-writes").ARTICLE, pts, {k: v for k, v in PARAMS.items() if k != "warmup"})
    assert set(methods.unrecorded(t)) == {"keep-alive", "warm-up", "throughput"}
    assert (t.set_index("aspect").loc["warm-up", "verdict"]) == "not recorded (param:warmup)"


def test_a_stack_the_run_did_not_include_is_not_a_recording_gap():
    pts = points(server="go-nethttp")
    t = methods.table(study("01-linear-writes").ARTICLE, pts, PARAMS)
    assert "Puma workers × threads" not in methods.unrecorded(t)
    assert verdicts(t)["Puma workers × threads"].startswith("differs: the run has no points")


def test_a_named_stack_that_cannot_run_the_profile_is_said_in_a_row_of_its_own():
    """05 runs seed 004's shared cache on every stack; node-sqlite's driver has none, the sweep
    left it out, and the method table says so (a stack that simply has no points is not)."""
    pts = points(server="go-nethttp", profile="go-seed004")
    named = {**PARAMS, "servers": ["go-nethttp", "node-sqlite"]}
    rows = methods.table(study("05-single-machine").ARTICLE, pts, named).set_index("aspect")
    assert rows.loc["stacks left out", "this run"] == (
        "Node · better-sqlite3 cannot run LAB_CACHE=shared: better-sqlite3 bundles an SQLite built "
        "without shared cache (SQLITE_OMIT_SHARED_CACHE)")
    assert rows.loc["stacks left out", "verdict"].startswith("differs: the stack cannot run")
    for params in ({**PARAMS, "servers": ["go-nethttp", "python-django"]}, PARAMS):
        assert "stacks left out" not in set(methods.table(study("05-single-machine").ARTICLE, pts, params)["aspect"])
    assert methods.left_out(points(server="go-nethttp", profile="rails71"),
                            {"servers": ["go-nethttp", "node-sqlite"]}) == []


def test_synchronous_reads_as_a_name_and_the_seed002_default_is_full():
    pts = points(server="python-fastapi", knobs={"pragmas": {"journal_mode": "wal", "synchronous": "2"},
                                                 "write_path": "writer"})
    t = methods.table(study("03-read-write-mix").ARTICLE, pts, {"write_share": 0.1})
    row = t.set_index("aspect").loc["synchronous"]
    assert row["this run"] == "full" and row["verdict"] == "same"
    assert method.profile_pragma("single-writer", "synchronous") == "full"


@pytest.mark.parametrize("value, expect, compare, ok", [
    ([1, 2, 4], [1, 2, 4], "eq", True), ([1, 2], [1, 2, 4], "eq", False),
    ([1, 2, 4, 8], [1, 2, 4], "superset", True), ([1, 2], [1, 2, 4], "superset", False),
    (["WAL"], "wal", "eq", True), (10.0, 10, "eq", True), ([True], True, "eq", True),
    (["a", "b"], "a", "in", True), (["b"], "a", "in", False),
])
def test_matches(value, expect, compare, ok):
    assert methods.matches(value, expect, compare) is ok


def test_a_bad_key_kind_or_comparison_is_refused():
    with pytest.raises(ValueError, match="unknown key kind"):
        methods.RunView(points()).get("nope:x")
    with pytest.raises(ValueError, match="compare must be"):
        methods.matches(1, 1, "roughly")


def test_profile_overlays_merge_left_to_right():
    env = servers.knob_env("rails71-retries+rails-dev")
    assert env["LAB_BUSY"] == "retries:1000" and env["LAB_TXN_MODE"] == "deferred"
    assert env["LAB_PROCESSES"] == "1" and env["LAB_THREADS"] == "5"
    assert env["LAB_METRICS_TXN"] == "record"
    assert servers.knob_env("rails71-retries+rails-dev", threads=7)["LAB_THREADS"] == "7"
    with pytest.raises(ValueError, match="unknown profile 'nope'"):
        servers.knob_env("rails8+nope")
    assert servers.pragmas_with("single-writer", synchronous="normal") == "journal_mode=wal,synchronous=normal"


def test_seed001_reference_names_profiles_that_exist():
    from sqlitelab.report import analysis
    ref, _ = analysis.reference("seed001_busy_errors")
    for profile in ref["profile"]:
        servers.profile_knobs(profile)  # raises on an unknown name
    last = ref.iloc[-1]
    assert last["profile"].startswith("rails8") and last["status_500"] == 0


def _point(acked: int, counts: dict) -> dict:
    return {"acked_writes": acked, "run_counts": json.dumps(counts)}


def test_audit_is_exact_unless_records_commit_separately():
    sc = load.SCENARIOS["metrics-writes"]
    ok = {"POST POST /metrics 201": 10, "POST POST /metrics 503": 2}
    exact = audit(sc.writes, _point(10, ok), 50, {"metrics_txn": "request"})
    assert exact["audit_ok"] and exact["audit_rule"] == "exact"
    assert not audit(sc.writes, _point(10, ok), 51, {"metrics_txn": "request"})["audit_ok"]
    # one transaction per record: two failed requests may have left up to 4 rows each
    for written, good in ((50, True), (58, True), (59, False), (49, False)):
        a = audit(sc.writes, _point(10, ok), written, {"metrics_txn": "record"})
        assert a["audit_ok"] is good and a["audit_rule"] == "partial", written
    # a single-row scenario stays exact whatever the knob says
    items = load.SCENARIOS["mix"]
    assert not audit(items.writes, _point(3, {"POST POST /items 503": 1}), 4, {"metrics_txn": "record"})["audit_ok"]


def test_audit_allows_each_write_of_unknown_outcome_its_rows_and_no_more():
    """A write that ended in a transport error (status 0: reset or timed out) may have been
    committed: seen in 01's seed, ruby-puma at 64 users, 720 rows for 719 acknowledgements and
    6 writes that timed out. Each may add its rows or not; acknowledged rows must all be there."""
    items = load.SCENARIOS["mix"]
    counts = {"POST POST /items 201": 719, "POST POST /items 0": 6, "GET GET /items/[id] 0": 9}
    for written, good in ((719, True), (720, True), (725, True), (726, False), (718, False)):
        a = audit(items.writes, _point(719, counts), written, {})
        assert a["audit_ok"] is good and a["audit_rule"] == "exact, 6 unknown", written
    sc = load.SCENARIOS["metrics-writes"]  # 5 rows a request, one transaction per record
    counts = {"POST POST /metrics 201": 10, "POST POST /metrics 503": 2, "POST POST /metrics 0": 1}
    for written, good in ((50, True), (63, True), (64, False)):
        a = audit(sc.writes, _point(10, counts), written, {"metrics_txn": "record"})
        assert a["audit_ok"] is good and a["audit_rule"] == "partial, 1 unknown", written
    # one transaction per request: a 503 added nothing, the unknown one all or nothing
    assert audit(sc.writes, _point(10, counts), 55, {"metrics_txn": "request"})["audit_ok"]
    assert not audit(sc.writes, _point(10, counts), 56, {"metrics_txn": "request"})["audit_ok"]


def test_audit_allows_a_write_sent_twice_one_more_row_and_no_more():
    """loadgen sends a request again on a new connection when the kept-alive one dropped before
    any answer (as geventhttpclient does); a write's first sending may have reached the server
    and been committed, so 129 rows for 128 acknowledged writes, none in flight, is no loss and
    no double-count either (a possible false alarm of stop 44: ruby-puma's pool at FULL, 128
    users). Every acknowledged row must still be there."""
    items = load.SCENARIOS["mix"]
    point = {**_point(128, {"POST POST /items 201": 128}), "inflight_writes": 0, "resent_writes": 1}
    for written, good in ((128, True), (129, True), (130, False), (127, False)):
        a = audit(items.writes, point, written, {})
        assert a["audit_ok"] is good and a["audit_rule"] == "exact, 1 sent twice", written
    assert not audit(items.writes, {**point, "resent_writes": 0}, 129, {})["audit_ok"]


def test_seed_scale_keeps_the_articles_settings_and_says_what_it_leaves_out():
    """The seed scale (issue 12): each article's own settings read `same`; what the lab runs less
    of than before is named in the table with its reason."""
    from sqlitelab.studies import scales
    cfg = scales.settings(study("01-linear-writes"), "seed")
    v = verdicts(methods.table(study("01-linear-writes").ARTICLE, points(), cfg))
    assert v["warm-up"] == v["repeats"] == v["duration"] == v["concurrency levels"] == "same"
    assert v["repeats, the stacks the article did not run"].startswith("differs: the lab's own stacks")
    v = verdicts(methods.table(study("02-busy-errors").ARTICLE, points(), scales.settings(study("02-busy-errors"), "seed")))
    assert v["warm-up"] == v["repeats"] == v["duration"] == "same"
    pts = points(server="python-fastapi", knobs={"pragmas": {"journal_mode": "wal", "synchronous": "2"},
                                                 "write_path": "writer"})
    v = verdicts(methods.table(study("03-read-write-mix").ARTICLE, pts, {**scales.settings(study("03-read-write-mix"), "seed"),
                                                          "write_share": 0.1}))
    assert v["warm-up"] == v["requests per level"] == v["repeats"] == "same"
    v = verdicts(methods.table(study("05-single-machine").ARTICLE, points(), scales.settings(study("05-single-machine"), "seed")))
    assert v["warm-up"] == v["repeats"] == "not stated by the article"


def buffer_points(large=((25, "full"), (100, "full")), consumed_to=10_000_000) -> pd.DataFrame:
    rows = [{"method": "article", "variant": "as_published", "rows_per_txn": r, "total": t,
             "synchronous": "full", "records_bytes_per_record": 427.0, "skipped": None}
            for r in (10, 25, 100) for t in (1_000_000, 10_000_000)]
    for t in (1_000_000, 10_000_000):
        for r in (10, 25, 100):
            for sync in ("normal", "full"):
                rows.append({"method": "tuned", "variant": "lab", "rows_per_txn": r, "total": t,
                             "synchronous": sync, "skipped": None,
                             "consumed": t if t <= consumed_to else None})
    for t in (50_000_000, 100_000_000):
        for r, sync in large:
            rows.append({"method": "tuned", "variant": "lab", "rows_per_txn": r, "total": t,
                         "synchronous": sync, "skipped": None, "consumed": None})
    return pd.DataFrame(rows)


def test_buffer_table_names_the_writers_large_totals_and_the_consumer():
    v = verdicts(methods.table(study("04-sqlite-as-buffer").ARTICLE, buffer_points(), {"repeats": 1}))
    assert v["beyond 10 M records"] == "same"
    assert v["consumer"].startswith("differs: the lab's addition")
    t = methods.table(study("04-sqlite-as-buffer").ARTICLE, buffer_points(large=((10, "normal"), (25, "full"))), {"repeats": 1})
    row = t.set_index("aspect").loc["beyond 10 M records"]
    assert row["this run"] == "10 rows · normal, 25 rows · full" and row["verdict"].startswith("differs")
    row = t.set_index("aspect").loc["consumer"]
    assert row["this run"] == "after the lab's writer, up to 10,000,000 records"
    assert "lab's generator" in t.set_index("aspect").loc["records", "this run"]


def test_the_cross_check_row_says_when_a_run_had_none():
    run = methods.RunView(points(), {"crosscheck_users": [1, 3], "crosscheck_tool": "oha"})
    assert method.crosscheck_client(run) == "oha at 1, 3 users"
    run = methods.RunView(points(), {"crosscheck_users": None, "crosscheck_tool": "oha"})
    assert method.crosscheck_client(run).startswith("not run (crosscheck_users None)")
    with pytest.raises(method.NotRecorded):  # an older run that stored no such parameter
        method.crosscheck_client(methods.RunView(points(), {}))


def test_puma_parameters_reach_the_puma_stacks_alone_and_the_readme_reads_the_runs_article_stack():
    """01's and 02's Puma workers × threads and YJIT go to the stacks Puma runs (the article's Rails
    and the Rack app beside it), and the README's row names the stack the run stored as the
    article's (a run before ruby-rails stored ruby-puma)."""
    from sqlitelab.report import summaries
    from sqlitelab.studies import method
    knobs = method.puma_knobs(["go-nethttp", "ruby-rails", "ruby-puma"], processes=2, yjit="on")
    assert knobs == {"ruby-rails": {"processes": 2, "yjit": "on"}, "ruby-puma": {"processes": 2, "yjit": "on"}}
    assert method.puma_knobs(["rust-axum"], processes=2) == {}
    runs = pd.DataFrame([{"notebook": "01-linear-writes", "parameters": json.dumps({"article_server": "ruby-puma"})},
                         {"notebook": "02-busy-errors", "parameters": json.dumps({"article_server": "x"})}])
    one = study("01-linear-writes")
    assert summaries.parameter(one, {"runs": runs}, "article_server", "ruby-rails") == "ruby-puma"
    assert summaries.parameter(one, {"runs": runs.iloc[1:]}, "article_server", "ruby-rails") == "ruby-rails"
    assert summaries.parameter(one, {}, "article_server") is None
