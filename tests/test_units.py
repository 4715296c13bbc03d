"""Fast unit tests on synthetic data: no servers, no load."""
from __future__ import annotations

import json
import math
import sqlite3
import subprocess

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")

from sqlitelab.load.driver import writer_window
from sqlitelab.report import analysis, capacity, findings, plots
from sqlitelab.infra import databases, servers
from sqlitelab.core import intervals, layout, processes, vocabulary
from sqlitelab.core import machine as machines
from sqlitelab.load import calibrate
from sqlitelab import notebooks
from sqlitelab.studies import scales
from sqlitelab.core.failures import CONTRACT, LockRule, failure_kind
from sqlitelab.experiments import sweep
from sqlitelab.notebooks import (busy_errors, linear_writes, read_write_mix, single_machine, sqlite_as_buffer,
                                 sqlite_vs_postgres)


def test_knob_env_from_profile_with_overrides():
    env = servers.knob_env("rails8", threads=3, busy=None)
    assert env["LAB_TXN_MODE"] == "immediate" and env["LAB_THREADS"] == "3"
    assert "LAB_BUSY" not in env
    with pytest.raises(ValueError, match="unknown profile"):
        servers.knob_env("turbo")
    with pytest.raises(ValueError, match="unknown knob"):
        servers.knob_env("rails71", warp_speed=9)


def test_every_profile_names_only_known_knobs():
    for name, p in servers.load_profiles().items():
        assert p.get("description"), name
        assert set(p) - {"description", "title"} <= set(servers.KNOB_ENV) | set(servers.STACK_ONLY_KNOBS), name


def test_cpu_sets():
    cpus = layout.available_cpus()
    assert layout.parse_cpus(str(cpus[0])) == [cpus[0]]
    assert layout.parse_cpus(None) is None
    with pytest.raises(ValueError, match="CPU set"):
        layout.parse_cpus("4096")
    cmd, applied = processes.pin_command(["x"], str(cpus[0]))
    assert applied == str(cpus[0]) and cmd[-1] == "x"


def test_scales():
    s = scales.settings(notebooks.study("01-linear-writes"), "quick", duration=1.5, levels=None)
    assert s["duration"] == 1.5 and s["levels"] == notebooks.study("01-linear-writes").SCALES["quick"]["levels"]
    with pytest.raises(ValueError, match="scale must be one of"):
        scales.settings(notebooks.study("01-linear-writes"), "huge")


@pytest.mark.parametrize("status,exc,kind", [
    (503, None, "busy"), (500, None, "server_error"), (404, None, "client_error"),
    (0, ConnectionRefusedError("refused"), "connection"), (0, TimeoutError("timed out"), "timeout"),
    (200, None, None), (302, None, None)])
def test_failure_kinds(status, exc, kind):
    assert failure_kind(status, exc) == kind


def _live_lock_texts(tmp_path) -> dict[str, str]:
    """SQLITE_BUSY's text as drivers here raise it, recorded live: Python's sqlite3 and Ruby's
    sqlite3 gem (a second writer's BEGIN IMMEDIATE while the first holds the write lock)."""
    db = tmp_path / "busy.db"
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN IMMEDIATE")
    try:
        sqlite3.connect(db, timeout=0, isolation_level=None).execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as e:
        python = f"sqlite3.OperationalError: {e}"
    holder.execute("ROLLBACK")
    ruby = subprocess.run(["ruby", "-e", f"""
        require "sqlite3"
        a = SQLite3::Database.new({str(db)!r}); a.execute("BEGIN IMMEDIATE")
        b = SQLite3::Database.new({str(db)!r})
        begin; b.execute("BEGIN IMMEDIATE"); rescue => e; puts "#{{e.class}}: #{{e.message}}"; end"""],
        capture_output=True, text=True, timeout=30).stdout.strip()
    return {"Python sqlite3": python, "Ruby sqlite3 gem": ruby}


# Error bodies as apps send them when SQLite's lock reaches the request, from the libraries'
# own texts (each library's message for SQLITE_BUSY, wrapped as its framework shows an error).
RECORDED_LOCK_BODIES = {
    "the lab's servers (503)": '{"error": "database is locked"}',
    "Rails (ActiveRecord on the sqlite3 gem)":
        "<h1>ActiveRecord::StatementInvalid</h1><p>SQLite3::BusyException: database is locked</p>",
    "Django (debug page)": "<title>OperationalError at /orders/</title><pre>database is locked</pre>",
    "Laravel (PDO)": "SQLSTATE[HY000]: General error: 5 database is locked (Connection: sqlite)",
    "Go mattn/go-sqlite3": "insert failed: database is locked",
    "Go modernc.org/sqlite": "database is locked (5) (SQLITE_BUSY)",
    "Rust sqlx": '{"detail": "error returned from database: (code: 5) database is locked"}',
    "Java xerial sqlite-jdbc": "[SQLITE_BUSY] The database file is locked (database is locked)",
    ".NET Microsoft.Data.Sqlite": "SQLite Error 5: 'database is locked'.",
    "Elixir exqlite": "** (Exqlite.Error) Database busy",
    "Node better-sqlite3": "SqliteError: database is locked",
    "shared cache (SQLITE_LOCKED)": "database table is locked: orders",
}
NOT_LOCKS = {
    "another server error": '{"error": "division by zero"}',
    "a timeout of the app's own": "upstream request timeout",
    "empty": "",
}


def test_lock_errors_are_recognised_by_status_and_body_and_nothing_else(tmp_path):
    """The default rule (any 5xx whose body matches LOCK_PATTERN) on bodies recorded from the
    drivers here and from the texts of others; an unmatched 5xx is another error, never a lock;
    the lab's own servers' rule is a 503, body or not."""
    rule = LockRule()
    bodies = {**_live_lock_texts(tmp_path), **RECORDED_LOCK_BODIES}
    assert bodies["Python sqlite3"].endswith("database is locked")
    assert bodies["Ruby sqlite3 gem"] == "SQLite3::BusyException: database is locked"
    for origin, body in bodies.items():
        assert failure_kind(500, None, body, rule) == "busy", origin
        assert failure_kind(503, None, body, rule) == "busy", origin
        assert failure_kind(200, None, body, rule) is None, origin  # a page about locks is no lock
        assert failure_kind(409, None, body, rule) == "client_error", origin
    for origin, body in NOT_LOCKS.items():
        assert failure_kind(500, None, body, rule) == "server_error", origin
        assert failure_kind(503, None, body, rule) == "server_error", origin
    assert failure_kind(503, None, None, rule) == "server_error"
    assert failure_kind(503) == "busy" and failure_kind(500, None, bodies["Ruby sqlite3 gem"]) == "server_error"
    narrow = LockRule(503, 503, "locked")
    assert failure_kind(500, None, "database is locked", narrow) == "server_error"
    assert LockRule.from_env(narrow.env()) == narrow and LockRule.from_env({}) == CONTRACT
    assert LockRule.from_env(LockRule(500, 599, None).env()) == LockRule(500, 599, None)
    for bad in [dict(low=99), dict(low=503, high=500), dict(high=600), dict(pattern="(")]:
        with pytest.raises(ValueError):
            LockRule(**bad)


def synthetic_points() -> pd.DataFrame:
    rows = []
    for server, scale in (("python-fastapi", 1.0), ("rust-axum", 5.0)):
        for users, rps in ((1, 100), (2, 180), (4, 300), (8, 250)):
            for rep in (1, 2):
                rows.append({"server": server, "profile": "rails71", "users": users, "repeat": rep,
                             "rps": rps * scale + rep, "mean_ms": users / scale, "p50_ms": 1.0 * users,
                             "p90_ms": 2.0 * users, "p95_ms": 3.0 * users, "p99_ms": 4.0 * users,
                             "p999_ms": 5.0 * users, "max_ms": 9.0 * users + rep,
                             "errors": 3 if users == 8 else 0, "busy_errors": 0,
                             "generator_bound": server == "rust-axum" and users == 4,
                             "audit_ok": True, "status_counts": json.dumps({"200": 10}),
                             "machine": "test box", "server_pinning": "0",
                             "generator_pinning": "1", "txn_mode": "deferred",
                             "busy": "busy_timeout:5000", "write_path": "pool",
                             "server_processes": 1, "server_threads": 4})
    return pd.DataFrame(rows)


def test_seed_table_and_findings():
    df = synthetic_points()
    t = linear_writes.seed_table(df)
    py = t[(t.server == "python-fastapi") & (t.users == 4)].iloc[0]
    assert py["rps"] == pytest.approx(301.5) and py["max_ms"] == 38 and py["repeats"] == 2
    pk = linear_writes.peak(t).set_index("server")
    assert pk.loc["python-fastapi", "peak_users"] == 4
    assert pk.loc["python-fastapi", "errors_from_users"] == 8
    assert pk.loc["rust-axum", "peak_generator_bound"]
    text = linear_writes.linear_writes(t)
    assert "302 writes/s" in text and "begin at 8 users" in text and "generator-bound" in text
    # with the runs behind the table, a peak of two runs carries its interval over them
    runs = df[(df.server == "python-fastapi") & (df.users == 4)]["rps"].tolist()
    with_runs = linear_writes.linear_writes(t, df)
    line = next(x for x in with_runs.splitlines() if "Python · FastAPI" in x)
    assert len(runs) == 2 and f"peaks at **{intervals.shown(intervals.mean_interval(runs), ' writes/s')}**" in line
    assert "95 % interval" in line and "2 runs" in line


def test_reference_data_has_its_source():
    ref, meta = analysis.reference("seed000_linear_writes")
    assert list(ref["users"]) == [1, 2, 4, 8, 10, 16]
    assert ref.loc[ref.users == 10, "rps"].item() == 2730
    assert "M1 Max" in meta["hardware"] and meta["source"]


def test_a_level_with_no_completions_is_a_stall_not_a_success():
    df = synthetic_points()
    df.loc[(df.server == "python-fastapi") & (df.users == 8), ["rps", "errors"]] = [0.0, 0]
    df["max_overrun_ms"] = 0.0
    df.loc[(df.server == "rust-axum") & (df.users == 2), "max_overrun_ms"] = 4800.0
    t = linear_writes.seed_table(df)
    pk = linear_writes.peak(t).set_index("server")
    assert pk.loc["python-fastapi", "errors_from_users"] == 8
    assert pk.loc["rust-axum", "errors_from_users"] == 2


def test_findings_read_well_when_some_series_never_err():
    df = synthetic_points()
    df.loc[df.server == "rust-axum", "errors"] = 0
    text = linear_writes.linear_writes(linear_writes.seed_table(df))
    assert "nan" not in text.lower() and "+" not in text
    assert "no errors at any level" in text and "begin at 8 users" in text


def test_stack_ratios_mark_generator_bound_peaks_as_lower_bounds():
    df = synthetic_points()  # python peaks at 4 users (~301 rps); rust-axum's peak is generator-bound
    t = read_write_mix.mix_table(df)
    text = read_write_mix.stack_ratios(t)
    rust = t[t.server == "rust-axum"]["rps"].max() / t[t.server == "python-fastapi"]["rps"].max()
    assert f"Rust · Axum ≥ {rust:.1f}×" in text and "generator-bound" in text
    df["generator_bound"] = False
    assert "≥" not in read_write_mix.stack_ratios(read_write_mix.mix_table(df))


def _peaks(fastapi, axum):
    rows = [{"server": s, "users": u, "round": r, "rps": v, "notebook": read_write_mix.ID,
             "experiment": "peaks", "headline": True}
            for s, u, rates in (("python-fastapi", 4, fastapi), ("rust-axum", 8, axum))
            for r, v in enumerate(rates, start=1)]
    return pd.DataFrame(rows)


def test_the_article_peaks_run_again_at_each_stacks_best_level_and_their_ratio_carries_its_interval():
    df = synthetic_points()  # python peaks at 4 users, rust-axum at 4 too (its 8 has errors but more)
    df.loc[df.server == "rust-axum", "rps"] *= [1, 1, 1, 1, 1, 1, 2, 2]
    assert read_write_mix.peak_levels(df) == {"python-fastapi": [4], "rust-axum": [8]}
    assert read_write_mix.peak_levels(df[df.server == "rust-axum"]) == {}, "both stacks, or none"
    assert read_write_mix.peak_levels(df.assign(rps=0.0)) == {}, "a stack that never answered has no peak"
    settled = read_write_mix.peaks_again(_peaks([300, 302, 298], [1800, 1810, 1790]), 6, 0.05)
    assert settled["rounds"] == 3 and settled["stopped_by"] == "half-width"
    assert settled["ratio"].estimate == pytest.approx(6.0) and settled["ratio"].low < 6.0 < settled["ratio"].high
    text = read_write_mix.peaks_text(settled, 6.0)
    assert "3 interleaved rounds (stopped there: every interval within ±5 %)" in text
    assert "Rust · Axum ÷ Python · FastAPI: 6.0" in text and "the article's ratio" in text
    assert "not the article's ratio" in read_write_mix.peaks_text(settled, 2.0)
    wide = read_write_mix.peaks_again(_peaks([300, 200, 400], [1800, 900, 2700]), 3, 0.05)
    assert wide["stopped_by"] == "rounds"
    assert "all it may run; an interval was still wider than ±5 %" in read_write_mix.peaks_text(wide, 6.0)
    assert "too wide to tell" in read_write_mix.peaks_text(wide, 6.0)
    assert read_write_mix.peaks_again(pd.DataFrame(), 6, 0.05) == {}
    assert "not measured again" in read_write_mix.peaks_text({}, 6.0)


def test_the_readme_row_gives_the_ratio_with_its_interval_where_the_peaks_ran_again_and_says_one_run_where_not():
    article = synthetic_points().assign(notebook=read_write_mix.ID, experiment="article", window_s=10.0)
    runs = pd.DataFrame([{"notebook": read_write_mix.ID,
                          "parameters": json.dumps({"peak_rounds": 6, "peak_half_width": 0.05})}])
    again = _peaks([300, 302, 298], [1800, 1810, 1790])
    _, here = read_write_mix.summary(read_write_mix, {"points": pd.concat([article, again]), "runs": runs})
    assert "; the peaks again, 3 interleaved rounds (stopped there: every interval within ±5 %): Axum 6.0" in here
    assert "95 % interval" in here and "one run each" not in here
    _, alone = read_write_mix.summary(read_write_mix, {"points": article, "runs": runs})
    assert "(one run each: no interval)" in alone and "interleaved" not in alone


def test_the_share_line_takes_the_articles_share_from_its_sweep_only_where_the_share_sweep_lacks_it():
    df = synthetic_points()
    shares = pd.concat([df[df.users == 4].assign(write_share=w, rps=r) for w, r in ((0.0, 900.0), (1.0, 100.0))])
    line = read_write_mix.share_line(shares, df, 0.1, 4)
    assert sorted(line["write_share"].unique()) == [0.0, 0.1, 1.0]
    assert len(line) == len(shares) + len(df[df.users == 4])
    assert line[line.write_share == 0.1]["rps"].tolist() == df[df.users == 4].sort_values("server", kind="stable")["rps"].tolist()
    ran = pd.concat([shares, df[df.users == 4].assign(write_share=0.1, rps=5.0)])
    assert read_write_mix.share_line(ran, df, 0.1, 4) is ran, "a share the sweep ran is its own"


def test_a_tables_mean_rate_carries_its_interval_where_levels_repeat_and_no_columns_where_none_does():
    df = synthetic_points()  # every level twice
    t = analysis.over_repeats(df, ["server", "users"], ["rps", "p99_ms"])
    assert list(t.columns[:5]) == ["server", "users", "rps", "rps_low", "rps_high"]
    row = t[(t.server == "python-fastapi") & (t.users == 4)].iloc[0]
    iv = intervals.mean_interval(df[(df.server == "python-fastapi") & (df.users == 4)]["rps"].tolist())
    assert (row["rps_low"], row["rps_high"]) == pytest.approx((iv.low, iv.high)) and row["rps_low"] < row["rps"]
    once = analysis.over_repeats(df[df.repeat == 1], ["server", "users"], ["rps"])
    assert "rps_low" not in once and "rps_high" not in once
    mixed = analysis.over_repeats(df[(df.repeat == 1) | (df.users == 4)], ["server", "users"], ["rps"])
    assert mixed["rps_low"].notna().sum() == 2, "a level of one run has no interval beside those that repeat"
    assert "rps_low" not in analysis.over_repeats(df, ["server", "users"], ["rps"], rps="max")
    assert math.isnan(analysis.rate_interval([]).estimate) and math.isnan(analysis.rate_interval([5.0]).low)


def test_write_path_and_ceiling_and_single_machine_findings():
    paths = pd.DataFrame([{"server": "go-nethttp", "write_path": w, "rps": r, "window_s": 2.0,
                           "writer_transactions": tx, "writer_jobs": jobs, "writer_sizes": sizes}
                          for w, r, tx, jobs, sizes in (("pool", 100.0, None, None, None),
                                                        ("writer", 200.0, 40, 40, '{"1": 40}'),
                                                        ("batch", 500.0, 250, 1000, '{"1": 10, "4": 200, "25": 40}'))])
    text = read_write_mix.write_path(paths)
    assert ("**Go · net/http**: group commit 2.50× the single writer, 5.00× the pool (500 vs 200 vs 100 req/s; "
            "one run each: no interval)") in text
    repeated = pd.concat([paths, paths.assign(rps=paths["rps"] * [1.1, 0.9, 1.0])], ignore_index=True)
    said = read_write_mix.write_path(repeated)
    iv = intervals.ratio_interval([500.0, 500.0], [200.0, 180.0])
    assert f"group commit {intervals.shown(iv, '×')} the single writer" in said and "no interval" not in said
    assert "its transactions held 4.0 writes on average, 25 at most, 125 commits/s" in text
    t = linear_writes.seed_table(synthetic_points())
    raw = {"commits_per_s": 1000.0, "reads_per_s": 5000.0}
    limits = analysis.machine_limits(raw, "writes", http=(4000.0, "rust-axum"))
    assert list(limits.values()) == [1000.0, 4000.0]
    text = findings.ceiling(linear_writes.peak(t), limits)
    py = linear_writes.peak(t).set_index("server").loc["python-fastapi", "peak_rps"]
    assert "one-row commits (NORMAL) **1,000/s**" in text and "wrk on /hello (Rust · Axum) **4,000/s**" in text
    assert f"{py / 1000:.0%} of SQLite alone, {py / 4000:.0%} of HTTP alone" in text
    assert "≥ " in text  # rust-axum's peak is generator-bound: a lower bound
    lines = {line.split(" ")[3]: line for line in text.splitlines()[1:]}  # "- Python · FastAPI …"
    assert "no ceiling" not in lines["FastAPI"]  # below both limits
    assert "of SQLite alone (above it: no bound on this rate)" in lines["Axum"]
    assert findings._share_of_limit(99.0, 100.0, "x") == "99% of x"
    assert findings._share_of_limit(388.0, 126_833.0, "x") == "0.3% of x"  # not "0%" of a rate
    # FULL where the ceiling did not measure it: left out, never guessed; a bad kind is refused
    assert analysis.machine_limits(raw, "writes", "full") == {}
    assert list(analysis.machine_limits({**raw, "full_commits_per_s": 90.0}, "writes", "FULL").values()) == [90.0]
    assert list(analysis.machine_limits(raw, "reads").values()) == [5000.0]
    with pytest.raises(ValueError, match="kind must be one of"):
        analysis.machine_limits(raw, "disk")
    assert "none measured" in findings.ceiling(linear_writes.peak(t), {})
    sm = pd.DataFrame([{"server": "a", "scenario": "hello", "rps": 12000.0, "mbit_s": 8.0,
                        "server_rss_mb": 20.0, "generator_bound": True},
                       {"server": "b", "scenario": "hello", "rps": 3000.0, "mbit_s": 2.0,
                        "server_rss_mb": 30.0, "generator_bound": False}])
    text = single_machine.single_machine(sm, raw, yahoo_rps=single_machine.reference_loads()["Yahoo's visits"])
    assert "best a at 12,000 successful req/s (generator-bound" in text and "2.0× Twitter" in text
    assert "8.6× Yahoo's 1,388 req/s" in text and "5,000 point reads/s" in text


def test_health_warnings_say_what_went_wrong():
    df = synthetic_points()
    ok = findings.health(df)
    assert "Audit ok at all" in ok and "generator-bound" in ok and "FAILED" not in ok
    df.loc[0, "audit_ok"] = False
    df["generator_bound"] = False
    bad = findings.health(df)
    assert "AUDIT FAILED" in bad and "generator-bound" not in bad and "Audit ok" not in bad
    assert "slow core" not in bad  # no point probed slow (points from before the probes: no column)
    df["core_slowed"], df["core_slowdown"] = False, 1.0
    df.loc[1, ["core_slowed", "core_slowdown"]] = [True, 1.62]
    slow = findings.health(df)
    assert f"1 of {len(df)} point(s) met a **slow core**" in slow and "up to 1.6× the run's fastest" in slow
    assert "outlasted" not in slow
    df["outlasted"] = False
    df.loc[2, "outlasted"] = True
    assert f"At 1 of {len(df)} point(s) a request **outlasted the window**" in findings.health(df)


@pytest.mark.parametrize("point,says", [
    ({"window_s": 2.0, "max_ms": 2500.0, "time_drain_s": 0.01}, True),    # its slowest request: 2.5 s
    ({"window_s": 2.0, "max_ms": 40.0, "time_drain_s": 3.2}, True),       # in flight at the close: 3.2 s
    ({"window_s": 2.0, "max_ms": 1999.0, "time_drain_s": 0.5}, False),
    ({"window_s": 2.0, "max_ms": None, "time_drain_s": None}, False),     # nothing finished, nothing in flight
    ({"window_s": 2.0, "max_ms": 9000.0, "open_loop": True}, None),       # open loop: latency from due times
    ({"window_s": None, "max_ms": 9000.0}, None),
])
def test_a_request_that_outlasts_its_window_is_told_apart(point, says):
    from sqlitelab.load import verdicts
    assert verdicts.outlasted(point) is says


def test_seeded_templates_are_reused_and_pruned(tmp_path):
    a, cached = databases.seeded_template(users=10, items=3, payload_bytes=16, directory=tmp_path)
    assert not cached and databases.table_counts(a)["users"] == 10 and databases.table_counts(a)["items"] == 3
    again, cached = databases.seeded_template(users=10, items=3, payload_bytes=16, directory=tmp_path)
    assert cached and again == a
    for n in range(databases.TEMPLATES_KEPT + 1):
        other, cached = databases.seeded_template(users=n, directory=tmp_path)
        assert not cached
    assert not a.exists() and len(list(tmp_path.glob("*.db"))) == databases.TEMPLATES_KEPT
    assert not list(tmp_path.glob("*.part"))


def test_busy_summary_counts_stalls_and_busy_errors_outside_the_window():
    rows = []
    for mode, users, rep, requests, busy, overrun, run in [
            ("deferred", 3, 1, 1000, 30, 2.0, {"POST /metrics 201": 1500, "POST /metrics 503": 40}),
            ("immediate", 3, 1, 0, 0, 0.0, {"POST /metrics 201": 90, "POST /metrics 503": 2}),  # nothing completed
            ("immediate", 3, 2, 500, 0, 4800.0, {"POST /metrics 201": 700, "POST /metrics 503": 1}),
            ("immediate", 1, 1, 800, 0, 1.0, {"POST /metrics 201": 900})]:
        rows.append({"server": "ruby-puma", "profile": "rails71", "txn_mode": mode, "users": users,
                     "repeat": rep, "requests": requests, "busy_errors": busy, "errors": busy,
                     "rps": requests / 5, "p99_ms": 5.0, "max_ms": 9.0, "audit_ok": True,
                     "max_overrun_ms": overrun, "run_counts": json.dumps(run)})
    s = busy_errors.busy_summary(pd.DataFrame(rows)).set_index(["txn_mode", "users"])
    assert s.loc[("deferred", 3), "run_busy_errors"] == 40 and s.loc[("deferred", 3), "stalled_repeats"] == 0
    assert s.loc[("immediate", 3), "stalled_repeats"] == 2 and s.loc[("immediate", 3), "run_busy_errors"] == 3
    assert s.loc[("immediate", 1), "stalled_repeats"] == 0
    text = busy_errors.txn_mode(s.reset_index())
    assert "30 busy errors with deferred" in text and "0 with immediate" in text
    assert "stalled** in 2 of 3 repeats" in text and "3 busy errors came outside the windows" in text
    assert "stalls** from 3 users" in busy_errors.busy(s.reset_index())
    # the deferred-vs-immediate bars: every level's busy 503s together, the counts the words give
    # (a bar of the levels' mean read as their total: 207 drawn where the text said 414)
    more = busy_errors.busy_summary(pd.DataFrame(rows + [{**rows[0], "users": 16, "busy_errors": 12, "errors": 12}]))
    totals = busy_errors.busy_totals(more).set_index("txn_mode")["busy_errors"]
    assert totals.to_dict() == {"deferred": 42, "immediate": 0}
    assert "42 busy errors with deferred" in busy_errors.txn_mode(more)
    # a stack whose deferred profile ran without immediate beside it has no bars (a missing bar
    # read as a zero) and is named in the caption's words; with both modes, nothing is named
    alone = more.iloc[:1].assign(server="python-django", txn_mode="deferred", busy_errors=500)
    both = pd.concat([more, alone], ignore_index=True)
    drawn = busy_errors.deferred_vs_immediate(both)
    assert set(drawn["server"]) == {"ruby-puma"} and drawn.set_index("txn_mode")["busy_errors"].to_dict() == totals.to_dict()
    assert busy_errors.deferred_only(both).endswith(": Python · Django")
    assert busy_errors.deferred_only(more) == ""


def test_every_series_has_its_own_colour():
    # error bars and generator-bound rings must not advance the colour cycle (seed 000's
    # Go and Rust came out in the same blue)
    df = pd.concat([synthetic_points().assign(server=s) for s in
                    ("go-nethttp", "python-fastapi", "ruby-puma", "rust-axum")])
    df["generator_bound"] = True
    fig = plots.throughput_chart(df)
    ax = fig.axes[0]
    legend = ax.get_legend()
    lines = {t.get_text(): h.get_color() for h, t in zip(legend.legend_handles, legend.get_texts())
             if t.get_text() not in {m["label"] for m in plots.LIMIT_MARKS.values()}}
    assert len(lines) == 4 and len(set(lines.values())) == 4
    stacks = {servers.stack_title(s): s for s in plots.STACK_STYLES}  # legends in plain words
    assert lines == {t: plots.STACK_STYLES[stacks[t]]["color"] for t in lines}  # each its stack's own
    import matplotlib.pyplot as plt
    plt.close("all")


def test_seed003_groups_read_from_the_published_tables():
    ref, _ = analysis.reference("seed003_buffer")
    g = sqlite_as_buffer.article_groups(ref).set_index("records")
    assert list(g.index) == [1000, 10000, 100000, 1000000, 10000000]
    assert g.loc[1000, "same work"] and g.loc[10000, "same work"] and not g.loc[100000, "same work"]
    assert g.loc[1000000, "groups at 10 rows"] == 100 and g.loc[1000000, "groups at 25 rows"] == 40
    # seconds from records / records_per_s, not the rounded printed seconds
    assert g.loc[10000, "seconds at 25 rows"] == pytest.approx(10000 / 1213910)
    assert g.loc[1000000, "ms per group at 10 rows"] == pytest.approx(1000 * 1e6 / 49555 / 100)


def test_buffer_findings_name_the_variant_total_and_each_skip_once():
    ref, _ = analysis.reference("seed003_buffer")
    rows = []
    for total in (1000, 1_000_000):
        for variant in (["as_published"] if total == 1000 else ["as_published", "one_connection"]):
            for rpt, rate in ((10, 500_000.0), (25, 1_000_000.0)):
                rows.append({"method": "article", "variant": variant, "rows_per_txn": rpt, "total": total,
                             "records_per_s": rate * (1.5 if variant == "one_connection" else 1),
                             "close_checkpoints": total // 1000 // rpt, "peak_bytes_per_record": 565.0,
                             "audit_ok": True, "skipped": None, "error": None})
    for rpt in (10, 25):
        rows.append({"method": "article", "variant": "as_published", "rows_per_txn": rpt, "total": 50_000_000,
                     "skipped": f"needs ~30.8 GiB of memory, {rpt} GiB available", "error": None})
    text = sqlite_as_buffer.buffer(pd.DataFrame(rows), ref)
    assert "at 1,000,000 records (the article: ~0.05): as_published 0.50; one_connection 0.50" in text
    assert text.count("Not run:") == 1 and "(10, 25 rows per transaction)" in text
    assert "84× and 15× as long" in text
    assert "Every measured point's rows hold exactly its records." in text and "✅" not in text  # no emoji: no font for it here


def test_seed_scale_keeps_the_articles_settings():
    """What each article states stays at seed scale (issue 12 cut only the lab's own extras)."""
    s = {nb: scales.settings(notebooks.study(nb), "seed") for nb in notebooks.ids()}
    one = s["01-linear-writes"]
    assert {1, 2, 4, 8, 10, 16} <= set(one["levels"]) and one["duration"] == 10 and one["repeats"] == 3
    assert one["warmup"] == 0                                    # hey -z 10s: no warm-up
    two = s["02-busy-errors"]
    assert two["article_levels"] == [1, 3] and two["duration"] == 5 and two["repeats"] == 1
    assert two["warmup"] == 0                                    # oha -z 5s
    three = s["03-read-write-mix"]
    assert three["levels"] == [8, 32, 64, 128, 256] and three["requests"] == 50_000
    assert three["warmup"] == 0 and three["repeats"] == 1
    four = s["04-sqlite-as-buffer"]
    assert four["totals"] == [1_000, 10_000, 100_000, 1_000_000, 10_000_000, 50_000_000, 100_000_000]
    assert set(four["rows_per_txn"]) == {10, 25, 100}
    assert four["large"]["rows_per_txn"] == [25, 100] and four["large"]["synchronous"] == ["full"]
    assert scales.FINE_LEVELS[0] == 8 and len(scales.FINE_LEVELS) == 16


def test_sampler_waits_for_a_window_the_generator_opens():
    import os
    import time
    from types import SimpleNamespace
    from sqlitelab.load import sampler
    srv = SimpleNamespace(pid=os.getpid(), pids=[os.getpid()], runner=SimpleNamespace(kind="local"),
                          get_json=lambda path, timeout: {"requests_handled": 7})
    known = {}
    start = time.time()

    def window():
        if time.time() - start < 0.15:
            return None
        known.setdefault("w", (time.time() + 0.05, time.time() + 0.15))
        return known["w"]
    s = sampler.Sampler(srv, os.getpid(), None, None, every=0.05, window=window)
    s.start()
    time.sleep(0.5)
    s.stop()
    t0, t1 = known["w"]
    assert s.t0 == t0 and s.t1 == t1
    assert set(s.marks) == {"t0", "t1"}
    # a mark is never taken before its edge; how late it comes depends on the machine's load, and
    # a mark later than MARK_LATE_S counts nothing rather than a count read at the wrong time
    for name, due in (("t0", t0), ("t1", t1)):
        m = s.marks[name]
        assert due <= m["t"] and 0 <= m["late_s"] <= m["t"] - due  # the count read before the CPU
        assert m["handled"] == (7 if m["late_s"] <= sampler.MARK_LATE_S else None)
    assert len(s.samples) >= 2


def test_a_window_mark_taken_late_counts_nothing():
    import os
    import time
    from types import SimpleNamespace
    from sqlitelab.load import sampler
    srv = SimpleNamespace(pid=os.getpid(), pids=[os.getpid()], runner=SimpleNamespace(kind="local"),
                          get_json=lambda path, timeout: {"requests_handled": 7})
    s = sampler.Sampler(srv, os.getpid(), None, None)
    s.mark("t0", due=time.time() + 1)  # taken before its edge would be due: not late
    s.mark("t1", due=time.time() - 2 * sampler.MARK_LATE_S)
    assert s.marks["t0"]["handled"] == 7 and s.marks["t0"]["late_s"] == 0
    assert s.marks["t1"]["handled"] is None and s.marks["t1"]["late_s"] > sampler.MARK_LATE_S
    # the point: no count, and how late its mark was (a late mark, not a missing one)
    from sqlitelab.load import driver
    handled, late_ms, _ = driver._server_marks(s, None)
    assert handled is None and late_ms == 1000 * s.marks["t1"]["late_s"]
    s.mark("t1", due=time.time())
    handled, late_ms, _ = driver._server_marks(s, None)
    assert handled == 0 and late_ms <= 1000 * sampler.MARK_LATE_S


def test_timing_phases_sum_to_the_wall_time(tmp_path):
    from sqlitelab.core import results
    from sqlitelab.report import timing
    db = tmp_path / "results.db"
    pts = [{"run_id": "r1/a", "users": u, "generator": g, "time_startup_s": 0.5, "time_warmup_s": 0.0,
            "time_window_s": 10.0, "time_shutdown_s": 0.2, "time_merge_s": 0.05, "time_counts_s": 0.01,
            "time_cache_s": 0.01, "time_pause_s": 0.1, "time_level_s": 10.8, "time_point_s": 10.92}
           for u, g in ((1, "locust"), (2, "locust"), (2, "loadgen"))]
    pts[0]["time_drain_s"] = None  # a generator that does not record it
    pts[1]["time_drain_s"] = 0.0
    pts[2].update(time_drain_s=1.5, time_point_s=10.92 + 1.5)  # the server answered for 1.5 s more
    run = {"run_id": "r1/a", "notebook": "nb", "notebook_run": "r1", "experiment": "a",
           "calibration_seconds": 1.0, "seed_seconds": 0.5,
           "server_timing": [{"server": "s", "profile": "p", "scenario": "x", "copy_s": 2.0,
                              "start_s": 0.3, "prime_s": 0.01, "levels_s": 32.76, "crosscheck_s": 0.0,
                              "confirm_s": 0.0, "stop_s": 0.1, "integrity_s": 0.4}],
           "wall_seconds": 39.0}
    results.store_run(run, pts, db)
    b = timing.phases("r1", db).set_index("phase")
    assert b.loc["window", "seconds"] == 30 and b.loc["window", "points"] == 3
    assert b.loc["database copy", "seconds"] == 2 and b.loc["database copy", "points"] == 1
    assert b.loc["point bookkeeping", "seconds"] == pytest.approx(3 * (10.92 - 10.87))
    named = b.drop(index=["unaccounted", "sweeps' wall time"])["seconds"].sum()
    assert b.loc["unaccounted", "seconds"] == pytest.approx(39.0 - named)
    assert b.loc["sweeps' wall time", "share"] == 1
    assert timing.window_share("r1", db) == {"of wall time": pytest.approx(30 / 39.0),
                                             "of lab time": pytest.approx(30 / 37.5)}
    by = timing.phases("r1", db, by="generator")
    assert set(by["generator"].dropna()) == {"locust", "loadgen"}
    with pytest.raises(ValueError, match="no run"):
        timing.phases("nope", db)


def test_a_levels_shutdown_leaves_out_the_servers_answers_to_what_was_in_flight(tmp_path):
    """level_timing: after the window closed, the time until the run's last answer is the
    server's (`time_drain_s`), the rest until the level's file the generator's; the two add up to
    the close-to-exit span, and a run that answered nothing after the close drains in 0 s."""
    from sqlitelab.load.driver import level_timing
    launch, t0, t1, exited = 100.0, 100.5, 102.5, 110.0
    (tmp_path / "proc-1.json").write_text(json.dumps({"t0": t0, "t1": t1, "spawned_at": 100.2,
                                                      "run_last_end": 109.8}))
    t = level_timing(tmp_path, launch, t0, 0.3, exited, 110.1)
    assert t["time_window_s"] == pytest.approx(2.0) and t["time_drain_s"] == pytest.approx(7.3)
    assert t["time_shutdown_s"] == pytest.approx(0.2)
    assert t["time_drain_s"] + t["time_shutdown_s"] == pytest.approx(exited - t1)
    (tmp_path / "proc-1.json").write_text(json.dumps({"t0": t0, "t1": t1, "run_last_end": 102.4}))
    t = level_timing(tmp_path, launch, t0, 0.3, exited, 110.1)
    assert t["time_drain_s"] == 0 and t["time_shutdown_s"] == pytest.approx(exited - t1)


def test_only_one_local_generator_process_in_closed_loop_steps_through_the_levels(tmp_path):
    """Spec.steps_levels: a sweep's levels share one generator process (load.Session) only where
    run_level would run one local process in closed loop for a window of a duration."""
    def steps(**kw):
        return sweep.spec(notebook="scratch", servers=["go-nethttp"], levels=[1, 2],
                          runs_dir=tmp_path, **{"processes": 1, **kw}).steps_levels
    assert steps() and steps(generator="loadgen")
    assert not steps(processes=2)
    assert not steps(requests=100)
    assert not steps(rates=[100.0])
    assert not steps(link_delay_us=0)
    assert not steps(operation={"name": "checkpoint", "at_s": 0.5})


def test_an_experiment_is_checked_whole_before_any_sweep_starts(tmp_path):
    """spec() refuses what sweep would, naming it; sqlite_vs_postgres.specs checks every workload's sweep
    before returning, so a bad one stops the experiment before its first sweep; run() takes
    only checked specs."""
    one = sweep.spec(notebook="scratch", servers=["go-nethttp"], levels=[1, 2], runs_dir=tmp_path)
    assert isinstance(one, sweep.Spec) and one.levels == (1, 2) and one.servers == ("go-nethttp",)
    with pytest.raises(TypeError, match="no argument 'level'"):
        sweep.spec(notebook="scratch", level=[1])
    with pytest.raises(TypeError, match="needs 'notebook'"):
        sweep.spec(levels=[1])
    with pytest.raises(ValueError, match="duration"):
        sweep.spec(notebook="scratch", duration=0)
    common = dict(notebook="scratch", servers=["go-nethttp"], levels=[1], duration=1.0, warmup=0.0,
                  repeats=1, users_rows=10, user_bytes=10, runs_dir=tmp_path)
    specs = sqlite_vs_postgres.specs(workloads=["000-writes", "002-mix"], **common)
    assert [s.experiment for s in specs] == ["000-writes/sqlite", "000-writes/postgres",
                                             "002-mix/sqlite", "002-mix/postgres"]
    with pytest.raises(ValueError, match="repeats"):
        sqlite_vs_postgres.specs(workloads=["000-writes", "002-mix"], **{**common, "repeats": 0})
    users = sqlite_vs_postgres.specs(workloads=["004-users"], users_scenarios=["user-read"], **common)
    assert [s.scenarios for s in users] == [("user-read",), ("user-read",)]
    whole = sqlite_vs_postgres.specs(workloads=["004-users"], **common)
    assert whole[0].scenarios == sqlite_vs_postgres.WORKLOADS["004-users"].scenarios
    for bad in (["user-delete"], []):
        with pytest.raises(ValueError, match=r"users_scenarios must be a non-empty list of the endpoints of 004-users \(user-read"):
            sqlite_vs_postgres.specs(workloads=["004-users"], users_scenarios=bad, **common)
    with pytest.raises(TypeError, match="checked by spec"):
        sweep.run({"notebook": "scratch"})


def test_a_calibration_onset_stored_as_text_is_read_back_as_a_number(tmp_path):
    """A results.db whose calibrations.onset_util became TEXT (its first calibration saw no drift)
    keeps a later onset as "0.71"; calibrate reads it back as a number, so a sweep's influence
    check compares numbers (the quick run of 2026-11-25 stopped on that comparison)."""
    db = tmp_path / "results.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE calibrations (calib_id TEXT, generator TEXT, machine TEXT, method TEXT, "
                "started TEXT, onset_util TEXT)")
    con.execute("INSERT INTO calibrations VALUES ('c1', 'locust', ?, ?, '2026-11-25T13:39:48+00:00', '0.71')",
                (machines.machine_label(), calibrate.METHOD))
    con.execute("CREATE TABLE calibration_points (calib_id TEXT, users INTEGER)")
    con.commit()
    con.close()
    got = calibrate._newest("generator = ?", ("locust",), db)
    assert got["onset_util"] == 0.71 and isinstance(got["onset_util"], float)
    cal, _ = calibrate.load_calibrations(db)
    assert cal["onset_util"].tolist() == [0.71]


def test_the_writers_window_counts_are_the_difference_of_its_two_health_reads():
    """/health's `writer` at a window's two edges: transactions, writes and the batch sizes of
    the window alone; nothing where the server has no writer or an edge was read late."""
    m0 = {"writer": {"transactions": 8, "jobs": 26, "sizes": {"1": 4, "3": 2, "8": 2}}}
    m1 = {"writer": {"transactions": 13, "jobs": 61, "sizes": {"1": 4, "3": 3, "8": 6}}}
    w = writer_window(m0, m1)
    assert (w["writer_transactions"], w["writer_jobs"]) == (5, 35)
    sizes = json.loads(w["writer_sizes"])
    assert sizes == {"3": 1, "8": 4}  # the sizes of the window alone, none of the zeros
    assert sum(int(k) * v for k, v in sizes.items()) == w["writer_jobs"]
    for edge in (None, {"writer": None}, {"handled": None}):
        assert writer_window(m0, edge) == {"writer_transactions": None, "writer_jobs": None,
                                           "writer_sizes": None}


def test_group_commits_batches_are_arithmetic_on_stored_points_that_a_report_reads_without_the_driver():
    """writer_batches (load.verdicts, read by report.findings without the driver): commits per
    second, mean and largest batch over the points' windows."""
    from sqlitelab.load import verdicts
    pts = pd.DataFrame([{"writer_transactions": 5, "writer_jobs": 35, "writer_sizes": '{"3": 1, "8": 4}', "window_s": 2.0},
                        {"writer_transactions": 5, "writer_jobs": 15, "writer_sizes": '{"3": 5}', "window_s": 3.0},
                        {"writer_transactions": None, "writer_jobs": None, "writer_sizes": None, "window_s": 9.0}])
    assert verdicts.writer_batches(pts) == {"commits_per_s": 2.0, "mean_batch": 5.0, "largest_batch": 8}
    none = {"commits_per_s": None, "mean_batch": None, "largest_batch": None}
    assert verdicts.writer_batches(pd.DataFrame([{"rps": 1.0}])) == none
    assert verdicts.writer_batches(pts.iloc[2:]) == none


def test_a_level_is_chosen_and_quoted_on_its_successful_responses():
    """15,000 answers/s of which 30 % failed is 10,500 successful: below 12,000 without a failure,
    so the best level is the second; the failed share and every answer's rate stand beside."""
    pts = pd.DataFrame([{"server": "go-nethttp", "profile": "p", "scenario": "user-update", "users": u, "repeat": 1,
                         "rps": rps, "requests": rps * 10, "errors": rps * 10 * share, "server_rss_mb": 10.0,
                         "bytes_per_s": 1e6, "p99_ms": 5.0, "server_cpu_pct": 90.0}
                        for u, rps, share in ((16, 15000.0, 0.3), (64, 12000.0, 0.0))])
    t = analysis.single_machine_table(pts)
    assert len(t) == 1 and t.loc[0, "users"] == 64 and t.loc[0, "rps"] == pytest.approx(12000.0)
    both = analysis.single_machine_table(pts.assign(errors=0.0))
    assert both.loc[0, "users"] == 16 and both.loc[0, "all_rps"] == pytest.approx(15000.0)
    failing = analysis.single_machine_table(pts[pts["users"] == 16])
    assert failing.loc[0, "rps"] == pytest.approx(10500.0) and failing.loc[0, "all_rps"] == pytest.approx(15000.0)
    assert failing.loc[0, "error_pct"] == pytest.approx(30.0)
    idle = analysis.single_machine_table(pts.assign(requests=0.0, errors=0.0, rps=0.0))
    assert idle["rps"].tolist() == [0.0]  # a level with no request: no rate, not a division by zero


def test_the_clients_are_compared_both_ways_with_and_without_keep_alive():
    """02 at seed, 2026-11-29: with a new connection per request both clients met the lock alike
    (76 % of ~1,600); kept alive, oha 62 % and the lab's generator none — apart, and keep-alive
    moves both. Identical shares: within each other's interval, keep-alive moves neither."""
    from sqlitelab.notebooks import busy_errors
    rows = [("new-connection", "oha", 1612, 1230), ("new-connection", "locust", 1635, 1252),
            ("profiles", "oha", 1730, 1064), ("profiles", "locust", 1216, 0)]
    checks = pd.DataFrame([{"experiment": e, "server": "ruby-rails", "profile": "rails71", "users": 3,
                            "generator": g, "responses": n, "failed": k} for e, g, n, k in rows])
    text = busy_errors.clients(checks, "ruby-rails", [3])
    assert "a new connection per request: oha 76.3 %" in text and "— within each other's interval; connections kept alive" in text
    assert "the lab's generator 0.00 %" in text and "— apart." in text
    assert "Keep-alive moves oha's share beyond its interval; keep-alive moves the lab's generator's share" in text
    same = busy_errors.clients(checks.assign(failed=0), "ruby-rails", [3])
    assert same.endswith("Keep-alive moves neither client's share beyond its interval.")
    assert "not compared at this scale" in busy_errors.clients(checks, "ruby-rails", [])
    assert "no cross-check of Ruby · Rails at 16 users" in busy_errors.clients(checks, "ruby-rails", [16])


def test_the_audit_line_says_what_was_audited():
    """The health line's audit sentence names only what an audit checked: every point, some of
    them, or none (an app of yours without a writes rule or a database: nothing was audited)."""
    df = synthetic_points().assign(audit_rule="exact", integrity="ok")
    assert "Audit ok at all" in findings.health(df)
    none = df.assign(audit_rule=vocabulary.NOT_AUDITED, integrity=None)
    said = findings.health(none)
    assert f"Nothing was audited at any of the {len(df)} points" in said and "Audit ok" not in said
    some = none.copy()
    some.loc[0, "integrity"] = "ok"
    assert f"Audit ok at the 1 of {len(df)} points audited" in findings.health(some)


def app_points(rates: dict, p50: dict | None = None, cpu: float = 90.0, repeats: int = 1) -> pd.DataFrame:
    """Notebook 10's points of one app: `rates` per level (users → req/s), each repeat 4 % above
    the last; its median `p50` per level (default 2 ms), the app at `cpu` % of a core."""
    return pd.DataFrame([{
        "server": "notes", "users": u, "repeat": rep, "rps": r * (1 + 0.04 * (rep - 1)), "mean_ms": 2.0,
        "p50_ms": (p50 or {}).get(u, 2.0), "p99_ms": 8.0, "max_ms": 20.0, "requests": int(r * 1.5),
        "window_s": 1.5, "errors": 0, "busy_errors": 0, "server_errors": 0, "acked_writes": 0,
        "rows_written": 0, "server_cpu_pct": cpu, "gen_cpu_pct": 30.0, "db_cached_before": None,
        "db_cached_after": None, "generator_bound": False, "generator_influenced": False, "rate": None}
        for u, r in rates.items() for rep in range(1, repeats + 1)])


def test_your_apps_findings_are_as_strong_as_its_data():
    """Notebook 10: a curve still rising at its highest level has no peak (a lower bound), one
    that turned has; daily users at the precision the level's repeats support, with the requests
    behind them; a level where the app waits rather than works said so, and not where it works;
    plain Locust's p99 beside the lab's."""
    from sqlitelab.experiments.your_app import agreement
    from sqlitelab.notebooks import your_app

    def said(pts, plain=pd.DataFrame()):
        levels = your_app.app_levels(pts)
        cap = capacity.capacity_at_slo(pts, 100.0, by=("server",))
        return your_app.your_app(levels, cap, plain, 100.0, 35, 4, agreement, None, points=pts)

    rising = said(app_points({1: 157.0, 8: 300.0, 32: 389.0}))
    assert "the highest rate measured is **389 requests/s** at 32 users, the highest level" in rising
    assert "still rising, so no peak was reached — its peak lies beyond it" in rising and "naive peak" not in rising
    turned = said(app_points({1: 157.0, 8: 400.0, 32: 389.0}))
    assert "the naive peak is **400 requests/s** at 8 users" in turned and "still rising" not in turned
    # one run: its rate with no interval, daily users to three figures, the requests behind it
    assert "**389 requests/s (one run: no interval)** (32 users, from 583 requests in 1 window(s) of 1.5 s)" in rising
    dau = capacity.daily_active_users(389.0, 35, 4)
    assert f"about **{intervals.shown(intervals.Interval(dau, float('nan'), float('nan'), 1, 'one run: no interval'))}** daily active users" in rising
    assert f"{dau:,.0f}" not in rising  # not seven figures from one window
    twice = said(app_points({1: 157.0, 8: 300.0, 32: 389.0}, repeats=2))
    iv = intervals.mean_interval([389.0, 389.0 * 1.04])
    assert intervals.shown(iv, " requests/s") in twice and "2 window(s)" in twice
    assert intervals.shown(intervals.scaled(iv, capacity.daily_active_users(1.0, 35, 4))) in twice
    # waiting: 44 ms at 1 user with the app at 2 % of a core; working: the same median at 90 %
    waits = said(app_points({1: 22.0, 8: 150.0}, p50={1: 44.0}, cpu=2.0))
    assert "At 1 user the median request took 44.0 ms while notes used 2 % of a core: the app waits" in waits
    assert "the app waits" not in said(app_points({1: 22.0, 8: 150.0}, p50={1: 44.0}, cpu=90.0))
    assert "the app waits" not in said(app_points({1: 157.0, 8: 300.0}, cpu=2.0))  # fast: nothing to blame
    plain = pd.DataFrame([{"users": 8, "requests": 450, "rps": 290.0, "p99_ms": 64.0}])
    both = said(app_points({1: 157.0, 8: 300.0, 32: 389.0}), plain)
    assert "Its p99: 64.0 ms by Locust's count against the lab's 8.0 ms (8.00×)" in both


def test_your_apps_tables_in_plain_words_show_what_was_audited():
    """Notebook 10's levels as a reader sees them: plain column names, no row numbers, the audit
    in words — "ok", "nothing audited" (and no writes or rows where none were counted), "FAILED"."""
    from sqlitelab.notebooks import your_app
    pts = app_points({1: 22.0, 8: 150.0}).assign(audit_rule="exact", integrity="ok", audit_ok=True)
    pts.loc[pts["users"] == 8, "audit_ok"] = False
    t = your_app.shown(your_app.app_levels(pts), "levels").data
    assert list(t.columns[:3]) == ["users", "requests/s", "p50 ms"] and "rps" not in t.columns
    assert list(t["audit"]) == ["ok", "FAILED"] and list(t["rows gained"]) == [0, 0]
    none = pts.assign(audit_rule=vocabulary.NOT_AUDITED, integrity=None, audit_ok=True)
    t = your_app.shown(your_app.app_levels(none), "levels").data
    assert list(t["audit"]) == ["nothing audited"] * 2 and t["rows gained"].isna().all()
    html = your_app.shown(your_app.app_levels(none), "levels").to_html()
    assert "nothing audited" in html and "<th class=\"blank" not in html  # no row numbers


def test_the_napkin_math_is_printed_at_the_precision_of_its_peak():
    """Seed 000's napkin math on a peak of three runs (the README's 4,704, 1,994 and 4,499): the
    peak with its interval, writes/day and daily users rounded to what that interval supports —
    never seven figures from a mean that moved 2× between runs; one run keeps three figures."""
    runs = [4704.0, 1994.0, 4499.0]
    mean = sum(runs) / 3
    text = linear_writes.napkin(mean, runs=runs)
    at = intervals.mean_interval(runs)
    dau = intervals.scaled(at, capacity.daily_active_users(1.0))
    assert intervals.shown(at, " writes/s") in text and f"**{intervals.rounded(dau)} daily active users**" in text
    assert f"{capacity.daily_active_users(mean):,.0f}" not in text and intervals.rounded(dau).endswith("00,000")
    one = linear_writes.napkin(388.0, runs=[388.0])
    assert "388 writes/s (one run: no interval)" in one and "**160,000 daily active users**" in one


def test_a_curve_highest_at_its_last_level_has_no_peak_within_the_levels():
    """01's findings: a stack whose highest rate is at the highest level run has no peak within
    the levels (a lower bound on it); one that fell after its highest has its peak."""
    df = synthetic_points()  # python-fastapi: 100, 180, 300, 250 writes/s at 1, 2, 4, 8 users
    turned = linear_writes.linear_writes(linear_writes.seed_table(df), df)
    assert "**Python · FastAPI** (rails71): throughput peaks at **" in turned and "no peak within" not in turned
    rising = linear_writes.linear_writes(linear_writes.seed_table(df[df["users"] < 8]), df)
    assert "**Python · FastAPI** (rails71): its highest rate, **" in rising
    assert "at 4 users, the highest level run: no peak within the levels (a lower bound on it)" in rising
