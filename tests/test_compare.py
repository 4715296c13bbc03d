"""Two runs compared point by point (sqlitelab.report.compare, `python -m sqlitelab.compare`):
aligned on what identifies a point, each metric's ratio judged against a noise band made of the
runs' own repeats or the machine's stored spread, and a clear refusal for what cannot be compared.
Runs stored in a real results.db, as sweeps store them."""
from __future__ import annotations

import json
import sqlite3

import pandas as pd

import pytest

from sqlitelab.notebooks import studies
from sqlitelab import browse, compare as command
from sqlitelab.core import results
from sqlitelab.experiments import noise
from sqlitelab.report import compare, plots, reference_tables

MACHINE = "2 cores (test), 1 GiB"


def store(path, run_id: str, notebook: str = "03-read-write-mix", *, rps: dict, p99: dict | None = None,
          commit: str = "aaaa", machine: str = MACHINE, window: dict | None = None,
          parameters: dict | None = None, stacks=("go-nethttp",), probe: dict | None = None,
          outlasted: tuple = (), cpu: dict | None = None, rounds: bool = False) -> None:
    """A notebook run of one stack (or of each of `stacks`, alike): `rps` maps users to a list of
    repeats' rates (with `rounds`, each repeat a round of its own); at the levels of `outlasted` a
    request outlasted the window; `cpu` maps users to the server's CPU %."""
    points = []
    for (users, rates), stack in ((u, st) for u in rps.items() for st in stacks):
        for rep, r in enumerate(rates, 1):
            points.append({"run_id": run_id, "server": stack, "profile": "single-writer",
                           "scenario": "mix", "database": "sqlite", "users": users, "rate": None,
                           "repeat": rep, "rps": r, "p99_ms": (p99 or {}).get(users, 10.0),
                           "generator": "loadgen", "headline": True, "audit_ok": True,
                           "outlasted": users in outlasted, "round": rep if rounds else 1,
                           **({"server_cpu_pct": cpu[users]} if cpu else {}),
                           **({"window_s": window[users]} if window else {}),
                           **({"probe_server_before_ms": probe[users], "probe_server_after_ms": probe[users]}
                              if probe else {})})
    results.store_run({"run_id": run_id, "notebook": notebook, "notebook_run": run_id, "scale": "quick",
                       "machine": machine, "git_commit": commit, "started": results.now_iso(),
                       "server_cpus": "0", "generator_cpus": "1",
                       **({"parameters": json.dumps(parameters)} if parameters else {})}, points, path)


def test_points_are_judged_against_the_band_of_their_repeats(tmp_path):
    db = tmp_path / "results.db"
    store(db, "run-a", rps={8: [1000, 1050, 1100], 32: [2000, 2050, 2100]})
    store(db, "run-b", rps={8: [1020, 1060, 1080], 32: [3000, 3050, 3100]}, p99={32: 40.0}, commit="bbbb")
    c = compare.compare(compare.side("run-a", db), compare.side("run-b", db))
    t = c.table.set_index("users")
    assert list(t.index) == ["8", "32"]
    assert t.loc["8", "rps_verdict"] == "within noise" and t.loc["32", "rps_verdict"] == "faster"
    assert t.loc["32", "p99_ms_verdict"] == "slower"  # 4x the p99, its repeats no spread at all
    assert t.loc["32", "rps_ratio"] == pytest.approx(3050 / 2050)
    band = ((100 / 1050) ** 2 + (60 / (3160 / 3)) ** 2) ** 0.5  # (max - min) / mean of each side
    assert t.loc["8", "rps_band"] == pytest.approx(band, rel=1e-3)
    assert c.provenance.iloc[0]["what"] == "git_commit" and not c.provenance.iloc[0]["same"]
    said = compare.summary(c)
    assert "git_commit differs: aaaa | bbbb" in said and "rps: 1 within noise, 1 faster of 2 points" in said


def test_without_repeats_the_machines_stored_spread_is_the_band_and_without_one_no_verdict(tmp_path):
    db = tmp_path / "results.db"
    store(db, "run-a", rps={8: [1000]}, p99={8: 10.0})
    store(db, "run-b", rps={8: [1300]}, p99={8: 10.5})
    c = compare.compare(compare.side("run-a", db), compare.side("run-b", db))
    assert c.table["rps_verdict"].tolist() == ["no noise band"]
    results.store_rows("noise", [{"machine": MACHINE, "family": "mix", "metric": "rps", "spread": 0.12,
                                  "measured": "x"},
                                 {"machine": MACHINE, "family": "writes", "metric": "p99_ms", "spread": 0.2,
                                  "measured": "x"}], db)  # mix's p99: none, so the widest family's
    c = compare.compare(compare.side("run-a", db), compare.side("run-b", db))
    row = c.table.iloc[0]
    assert row["rps_band"] == pytest.approx((2 * 0.12 ** 2) ** 0.5)
    assert row["rps_verdict"] == "faster" and row["p99_ms_verdict"] == "within noise"
    assert compare.verdict(0.5, 0.1, -1) == "faster" and compare.verdict(1.5, 0.1, -1) == "slower"


def test_points_only_one_side_has_are_listed_and_no_overlap_is_an_explained_empty_result(tmp_path, capsys):
    db = tmp_path / "results.db"
    store(db, "run-a", rps={8: [1000], 32: [2000]})
    store(db, "run-b", rps={32: [2100], 128: [2500]})
    c = compare.compare(compare.side("run-a", db), compare.side("run-b", db))
    assert c.only_a["users"].tolist() == ["8"] and c.only_b["users"].tolist() == ["128"]
    store(db, "run-c", rps={256: [1]})
    assert command.main(["run-a", "run-c", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "no point in common: nothing to compare" in out and "only in a:" in out and "only in b:" in out


def test_b_may_come_from_another_results_database(tmp_path, capsys):
    """Another checkout's or machine's results.db (`--db-b`): B is read from it, A from --db."""
    mine, theirs = tmp_path / "mine.db", tmp_path / "theirs.db"
    store(mine, "run-a", rps={8: [1000, 1010]})
    store(theirs, "run-b", rps={8: [2000, 2020]}, commit="bbbb")
    assert command.main(["run-a", "run-b", "--db", str(mine)]) == 2  # not in A's database
    assert "no run 'run-b' with points" in capsys.readouterr().err
    assert command.main(["run-a", "run-b", "--db", str(mine), "--db-b", str(theirs)]) == 0
    out = capsys.readouterr().out
    assert "faster" in out and "bbbb" in out


@pytest.mark.parametrize("a,b,says", [
    ("run-a", "no-such-run", "no run 'no-such-run' with points"),
    ("run-a", "run-other", "compare runs of one notebook"),
    ("run-a", "newest:quick:09", "no 'quick' run of notebook '09' on this machine"),
    ("run-a", "reference:99", "the reference run has no points of notebook '99'"),
    ("run-a", "", "a run is its id"),
])
def test_what_cannot_be_compared_is_refused_in_one_line(tmp_path, capsys, a, b, says):
    db = tmp_path / "results.db"
    store(db, "run-a", rps={8: [1000]})
    store(db, "run-other", notebook="01-linear-writes", rps={8: [1000]})
    assert command.main([a, b, "--db", str(db)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and says in err, err


def test_a_run_against_the_committed_reference_run_aligns_its_points(tmp_path):
    """The reference run's 03 against a run holding the same points (read back from the export):
    every point aligned, each ratio 1."""
    ref = reference_tables.load()["points"]
    ref03 = ref[ref["notebook"] == "03-read-write-mix"]
    db = tmp_path / "results.db"
    keep = ["run_id", "server", "profile", "scenario", "database", "users", "rate", "repeat", "rps",
            "p99_ms", "generator", "headline", "experiment"]
    points = [{**{k: (None if v != v else v) for k, v in p.items()}, "run_id": "mine"}
              for p in ref03[keep].to_dict("records")]
    results.store_run({"run_id": "mine", "notebook": "03-read-write-mix", "notebook_run": "mine",
                       "scale": "seed", "started": results.now_iso()}, points, db)
    c = compare.compare(compare.side("reference:03"), compare.side("mine", db))
    assert len(c.table) == ref03.groupby(["experiment", "server", "users"]).ngroups
    assert c.table["rps_ratio"].round(9).eq(1).all() and c.only_a.empty and c.only_b.empty
    con = sqlite3.connect(db)
    assert con.execute("SELECT count(*) FROM points").fetchone()[0] == len(ref03)


@pytest.mark.harness
def test_the_machines_spread_is_measured_stored_and_used_for_a_point_without_repeats(tmp_path):
    """Two sweeps of the writes family back to back (each a fresh file, server and generator):
    a spread per metric stored with how it was made, and the band a single-repeat point then gets."""
    db, runs = tmp_path / "results.db", tmp_path / "runs"
    rows = noise.measure(runs=2, users=4, duration=0.5, warmup=0.2, families=["writes"],
                         results_db=db, runs_dir=runs, progress=False)
    assert rows["metric"].tolist() == ["rps", "p99_ms"] and (rows["runs"] == 2).all()
    assert rows["spread"].between(0, 2).all() and "2 sweeps back to back" in rows["how"].iloc[0]
    stored = results.read_sql("SELECT * FROM noise", (), db)
    assert len(stored) == 2 and set(stored["family"]) == {"writes"}
    pts = results.load_points(db)
    assert sorted(pts["experiment"]) == ["writes-1", "writes-2"] and pts["audit_ok"].all()
    from_machine = compare.machine_spread(compare._machine_noise(pts, db), "rails-writes", "rps")
    assert from_machine == pytest.approx(rows.loc[rows["metric"] == "rps", "spread"].iloc[0])


def test_the_canned_query_gives_the_same_verdicts_as_compare(tmp_path):
    """browse's compare_runs, run by SQLite on the same file: the same points, ratios and verdicts,
    with repeats, with the machine's stored spread and without either."""
    db = tmp_path / "results.db"
    # 16 and 128 users: a side where no request finished (rate 0, a stall) has no ratio
    # and 256 users: a request outlasted b's window (a stall; its rate is no throughput): no ratio either
    store(db, "run-a", rps={8: [1000, 1050, 1100], 16: [0], 32: [2000], 64: [500], 128: [700], 256: [600]},
          p99={32: 10.0})
    store(db, "run-b", rps={8: [1500, 1550, 1600], 16: [900], 32: [2100], 64: [520], 128: [0], 256: [5000]},
          p99={32: 30.0}, outlasted=(256,))
    for with_noise in (False, True):
        if with_noise:
            results.store_rows("noise", [{"machine": MACHINE, "family": "mix", "metric": "rps",
                                          "spread": 0.1, "measured": "x"}], db)
        c = compare.compare(compare.side("run-a", db), compare.side("run-b", db))
        sql = browse.QUERIES["compare_runs"]["sql"](browse.schema(db))
        con = sqlite3.connect(db)
        got = [dict(zip([d[0] for d in cur.description], row)) for cur in [con.execute(sql, {"a": "run-a", "b": "run-b"})]
               for row in cur.fetchall()]
        con.close()
        want = c.table.assign(users=c.table["users"].astype(int)).sort_values("users")
        got = sorted(got, key=lambda r: r["users"])
        assert [r["users"] for r in got] == want["users"].tolist()
        for r, w in zip(got, want.to_dict("records")):
            assert (r["rps_ratio"] is None) if w["rps_ratio"] != w["rps_ratio"] else r["rps_ratio"] == pytest.approx(w["rps_ratio"])
            assert (r["rps_verdict"], r["p99_ms_verdict"]) == (w["rps_verdict"], w["p99_ms_verdict"]), (with_noise, r)
        assert [w["rps_verdict"] for w in want.to_dict("records") if w["users"] in (16, 128, 256)] == \
            [compare.NONE_FINISHED["a"], compare.NONE_FINISHED["b"], compare.OUTLASTED["b"]]


def test_the_band_is_the_spread_measured_over_the_windows_nearest_the_points(tmp_path, capsys):
    """Spreads stored for 0.5-s and 5-s windows: a 1-s point takes the 0.5-s one (twice its window,
    against five times), a 4-s point the 5-s one, in compare and in the canned query alike; the
    table says where each band came from."""
    db = tmp_path / "results.db"
    store(db, "run-a", rps={8: [1000], 32: [2000]}, window={8: 1.0, 32: 4.0})
    store(db, "run-b", rps={8: [1200], 32: [2400]}, window={8: 1.0, 32: 4.0})
    results.store_rows("noise", [
        {"machine": MACHINE, "family": "mix", "metric": m, "spread": spread, "duration_s": window,
         "measured": f"2026-01-0{day}"}
        for day, (window, spread) in enumerate([(0.5, 0.25), (5.0, 0.05), (0.5, 0.2)], 1)
        for m in ("rps", "p99_ms")], db)  # the 0.5-s windows measured twice: the newer, 0.2, counts
    c = compare.compare(compare.side("run-a", db), compare.side("run-b", db))
    t = c.table.set_index("users")
    assert t.loc["8", "rps_spread_a"] == pytest.approx(0.2) and t.loc["32", "rps_spread_a"] == pytest.approx(0.05)
    assert t.loc["8", "rps_spread_from_a"] == "the machine's 0.5-s windows"
    assert t.loc["32", "rps_spread_from_b"] == "the machine's 5-s windows"
    # 1.2× is within a band of sqrt(2) * 0.2 = 0.28, beyond one of sqrt(2) * 0.05 = 0.07
    assert (t.loc["8", "rps_verdict"], t.loc["32", "rps_verdict"]) == ("within noise", "faster")
    sql = browse.QUERIES["compare_runs"]["sql"](browse.schema(db))
    con = sqlite3.connect(db)
    cur = con.execute(sql, {"a": "run-a", "b": "run-b"})
    got = {r["users"]: r for r in (dict(zip([d[0] for d in cur.description], row)) for row in cur.fetchall())}
    con.close()
    assert (got[8]["rps_verdict"], got[32]["rps_verdict"]) == ("within noise", "faster")


def test_a_stack_measured_for_itself_is_judged_by_its_own_spread(tmp_path):
    """Spreads stored for the machine (measured on noise.STACK) and for Ruby · Puma, which spreads
    more: Ruby's points take its own, a stack measured for nothing but the machine takes the
    machine's, in compare and in the canned query alike, and the table says which."""
    db = tmp_path / "results.db"
    stacks = ("go-nethttp", "python-fastapi", "ruby-puma")
    store(db, "run-a", rps={32: [1000]}, window={32: 1.5}, stacks=stacks)
    store(db, "run-b", rps={32: [1250]}, window={32: 1.5}, stacks=stacks)
    results.store_rows("noise", [
        {"machine": MACHINE, "family": "mix", "metric": m, "spread": spread, "duration_s": 1.5,
         "server": stack, "measured": "2026-01-01"}
        for stack, spread in ((noise.STACK, 0.05), ("ruby-puma", 0.3)) for m in ("rps", "p99_ms")], db)
    c = compare.compare(compare.side("run-a", db), compare.side("run-b", db))
    t = c.table.set_index("server")
    assert t.loc["ruby-puma", "rps_spread_a"] == pytest.approx(0.3)
    assert t.loc["ruby-puma", "rps_spread_from_a"] == "its stack's 1.5-s windows"
    assert t.loc["python-fastapi", "rps_spread_a"] == pytest.approx(0.05)
    assert t.loc["python-fastapi", "rps_spread_from_b"] == "the machine's 1.5-s windows (on Go · net/http)"
    assert t.loc["go-nethttp", "rps_spread_from_a"] == "its stack's 1.5-s windows"
    # 1.25× is within sqrt(2) * 0.3 = 0.42, beyond sqrt(2) * 0.05 = 0.07
    want = {"go-nethttp": "faster", "python-fastapi": "faster", "ruby-puma": "within noise"}
    assert t["rps_verdict"].to_dict() == want
    sql = browse.QUERIES["compare_runs"]["sql"](browse.schema(db))
    con = sqlite3.connect(db)
    cur = con.execute(sql, {"a": "run-a", "b": "run-b"})
    got = {r[2]: r for r in cur.fetchall()}
    names = [d[0] for d in cur.description]
    con.close()
    assert {k: dict(zip(names, r))["rps_verdict"] for k, r in got.items()} == want


def test_parameters_set_differently_head_the_provenance(tmp_path, capsys):
    """A knob changed between two runs (03 at FULL, then NORMAL) is named first; a parameter both
    set alike, one that only names the run, or one only the newer notebook has, at its default
    (None), is not."""
    db = tmp_path / "results.db"
    store(db, "run-a", rps={8: [1000]}, parameters={"synchronous": None, "levels": [8], "run_id": "run-a"})
    store(db, "run-b", rps={8: [3000]}, parameters={"synchronous": "normal", "levels": [8], "run_id": "run-b",
                                                     "duration": None})  # new, at its default: no difference
    c = compare.compare(compare.side("run-a", db), compare.side("run-b", db))
    moved = c.provenance[~c.provenance["same"]]
    assert moved["what"].tolist() == ["parameter synchronous"]
    assert (moved["a"].iloc[0], moved["b"].iloc[0]) == ("None", "normal")
    assert command.main(["run-a", "run-b", "--db", str(db)]) == 0
    assert "parameter synchronous differs: None | normal" in capsys.readouterr().out


def test_the_comparison_figure_keeps_the_vocabulary(tmp_path):
    """A dumbbell per point and metric, the band shaded where there is one: no stack in another
    colour, no internal id in a text, nothing hidden (plots.problems)."""
    db = tmp_path / "results.db"
    store(db, "run-a", rps={1: [1000, 1050], 8: [2000], 32: [2500]}, p99={32: 30.0})
    store(db, "run-b", rps={1: [1500, 1550], 8: [2100], 32: [1200]}, p99={32: 10.0})
    c = compare.compare(compare.side("run-a", db), compare.side("run-b", db))
    fig = plots.comparison_chart(c.table, "Two runs of the read/write mix", studies(), caption="a test")
    assert plots.problems(plots.lay_out(fig)) == []
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == ["Go · net/http, 1 user", "Go · net/http, 8 users", "Go · net/http, 32 users"]
    keys = [t.get_text() for t in fig.legends[0].get_texts()] if fig.legends else \
        [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
    banded = c.table[["rps_band", "p99_ms_band"]].notna().to_numpy().any()
    assert ("noise band (both runs' spread)" in keys) == banded  # a shade the figure draws, or why none
    assert any(k.startswith("no noise band") for k in keys) == (not banded)
    assert banded  # run a's repeats at 1 user give that point a band
    store(db, "run-c", rps={8: [2000]})
    store(db, "run-d", rps={8: [2200]})
    c = compare.compare(compare.side("run-c", db), compare.side("run-d", db))
    fig = plots.comparison_chart(c.table, "Two runs of the read/write mix", studies(), caption="a test")
    keys = [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
    keys += [t.get_text() for lg in fig.legends for t in lg.get_texts()]
    assert "no noise band: neither run's spread was measured" in keys


def test_the_machines_own_speed_heads_the_provenance_when_the_runs_measured_it(tmp_path):
    """Each run's raw-SQLite ceiling (baseline.ceiling's row): a machine 4× faster underneath
    is named before any point, with the ratio; within CEILING_SAME it is the same speed."""
    db = tmp_path / "results.db"
    store(db, "run-a", rps={8: [1000]})
    store(db, "run-b", rps={8: [4000]})
    for run_id, commits in (("run-a", 20_000.0), ("run-b", 80_000.0)):
        results.store_table(run_id, "03-read-write-mix", "ceilings",
                            pd.DataFrame([{"commits_per_s": commits, "reads_per_s": 90_000.0}]),
                            path=db, experiment="ceiling")
    c = compare.compare(compare.side("run-a", db), compare.side("run-b", db))
    p = c.provenance.set_index("what")
    row = p.loc["SQLite alone, one-row commits (NORMAL) (b ÷ a 4.00×)"]
    assert (row["a"], row["b"], bool(row["same"])) == ("20,000/s", "80,000/s", False)
    assert bool(p.loc["SQLite alone, point reads (b ÷ a 1.00×)", "same"])
    assert "one-row commits (NORMAL) (b ÷ a 4.00×) differs: 20,000/s | 80,000/s" in compare.summary(c)


def test_the_noise_stack_is_declared_once_and_the_comparison_imports_no_runner():
    """The stack this machine's noise is measured on lives in sqlitelab.core.vocabulary: the
    measurement (noise.STACK, `--noise`'s default) and the comparison (measured_on, the canned
    query) read the same one, and report.compare reads it without importing an experiment."""
    import ast
    from sqlitelab.core import vocabulary
    from sqlitelab.infra import servers
    assert noise.STACK == vocabulary.NOISE_STACK == "go-nethttp"
    assert vocabulary.NOISE_STACK in servers.STACKS
    assert compare.measured_on({None: [], vocabulary.NOISE_STACK: [], "ruby-puma": []}, "python-fastapi") \
        == vocabulary.NOISE_STACK
    tree = ast.parse(open(compare.__file__, encoding="utf-8").read())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    imported |= {f"{n.module}.{a.name}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
                 for a in n.names}
    assert not {m for m in imported if m.startswith("sqlitelab.experiments")}, imported


# ten points' rates, and a scatter of a few per cent around them (what the same code gives twice)
RATES = {u: 1000.0 * u ** 0.5 for u in range(1, 11)}
SCATTER = [1.03, 0.97, 1.01, 0.99, 1.04, 0.96, 1.02, 0.98, 1.0, 1.01]


def test_without_any_band_the_comparisons_own_points_judge_it_both_ways(tmp_path):
    """Runs that neither repeated a point nor found a stored spread: the points' own scatter is the
    band. The same code twice is within noise; every point a fifth slower is flagged slower; a
    change of a few points stands out of the others' scatter."""
    db = tmp_path / "results.db"
    store(db, "a", rps={u: [r] for u, r in RATES.items()})
    store(db, "same", rps={u: [r * k] for (u, r), k in zip(RATES.items(), SCATTER)})
    store(db, "held", rps={u: [0.8 * r * k] for (u, r), k in zip(RATES.items(), SCATTER)})
    store(db, "two", rps={u: [r * k * (1.5 if u in (3, 7) else 1)] for (u, r), k in zip(RATES.items(), SCATTER)})
    verdicts = {b: compare.compare(compare.side("a", db), compare.side(b, db)).table
                for b in ("same", "held", "two")}
    assert set(verdicts["same"]["rps_verdict"]) == {"within noise"}
    assert set(verdicts["held"]["rps_verdict"]) == {"slower"}
    two = verdicts["two"].set_index("users")["rps_verdict"]
    assert set(two[["3", "7"]]) == {"faster"} and set(two.drop(["3", "7"])) == {"within noise"}
    said = verdicts["same"]["rps_spread_from_a"].iloc[0]
    assert said == "the comparison's own 10 points (their scatter)"


def test_the_run_as_a_whole_is_judged_by_its_points_median_both_ways(tmp_path):
    """The same code twice: the median ratio's interval holds 1, within noise. Every point a fifth
    slower: slower, the interval around 0.8. The cores' probes are shown beside each point
    (core_speed) and change no verdict."""
    db = tmp_path / "results.db"
    store(db, "a", rps={u: [r] for u, r in RATES.items()}, probe={u: 5.0 for u in RATES})
    store(db, "same", rps={u: [r * k] for (u, r), k in zip(RATES.items(), SCATTER)}, probe={u: 6.25 for u in RATES})
    store(db, "held", rps={u: [0.8 * r * k] for (u, r), k in zip(RATES.items(), SCATTER)},
          probe={u: 6.25 for u in RATES})
    same = compare.compare(compare.side("a", db), compare.side("same", db))
    held = compare.compare(compare.side("a", db), compare.side("held", db))
    assert same.overall["rps"].verdict == "within noise" and same.overall["rps"].low < 1 < same.overall["rps"].high
    assert held.overall["rps"].verdict == "slower" and 0.75 < held.overall["rps"].low < held.overall["rps"].high < 0.85
    assert held.table["core_speed"].tolist() == pytest.approx([0.8] * 10)
    assert set(held.table["rps_verdict"]) == {"slower"}  # the probes explain nothing away
    assert "rps: 10 slower of 10 points; the run as a whole: 0.80× (median of 10 points, 95 % interval" \
        in compare.summary(held)
    few = compare.overall(held.table.head(5), "rps", +1)
    assert few.verdict == "too few points" and "too few points (5 points)" in few.words("rps")


def test_too_few_points_give_no_own_band_and_say_so(tmp_path):
    db = tmp_path / "results.db"
    few = dict(list(RATES.items())[:compare.OWN_POINTS - 1])
    store(db, "a", rps={u: [r] for u, r in few.items()})
    store(db, "b", rps={u: [r * 0.5] for u, r in few.items()})
    assert set(compare.compare(compare.side("a", db), compare.side("b", db)).table["rps_verdict"]) == {"no noise band"}


def test_repeats_give_the_ratio_its_interval(tmp_path):
    from sqlitelab.core import intervals
    db = tmp_path / "results.db"
    store(db, "a", rps={8: [1000, 1050, 1100]})
    store(db, "b", rps={8: [1500, 1550, 1600], 16: [700]})
    t = compare.compare(compare.side("a", db), compare.side("b", db)).table.iloc[0]
    want = intervals.ratio_interval([1500, 1550, 1600], [1000, 1050, 1100])
    assert (t["rps_low"], t["rps_high"]) == pytest.approx((want.low, want.high))
    assert t["rps_low"] > 1


def test_points_measured_in_rounds_are_judged_by_their_ratios_interval_both_ways(tmp_path):
    """The same rates as four interleaved rounds: 1.2x is beyond the ratio's interval (faster),
    where four repeats within one round, judged by their band (range over mean of each side), call
    it within noise; the same code twice stays within noise either way; fewer rounds than
    compare.ROUNDS: the band again."""
    db = tmp_path / "results.db"
    a, b = {8: [1000, 1200, 1000, 1200], 16: [1000, 1200, 1000, 1200]}, {8: [1220, 1420, 1220, 1420],
                                                                          16: [1050, 1150, 1100, 1000]}
    for tag, rounds in (("rounds", True), ("one", False)):
        store(db, f"a-{tag}", rps=a, rounds=rounds)
        store(db, f"b-{tag}", rps=b, rounds=rounds)
    t = compare.compare(compare.side("a-rounds", db), compare.side("b-rounds", db)).table.set_index("users")
    assert t.loc["8", "rps_low"] > 1 and t.loc["8", "rps_verdict"] == "faster"
    assert t.loc["16", "rps_verdict"] == "within noise"
    assert t.loc["8", "rps_spread_from_a"] == "its 4 interleaved rounds (the ratio's 95 % interval)"
    one = compare.compare(compare.side("a-one", db), compare.side("b-one", db)).table.set_index("users")
    assert one.loc["8", "rps_band"] > 0.2 and one.loc["8", "rps_verdict"] == "within noise"
    assert one.loc["8", "rps_spread_from_a"] == "its 4 repeats"
    assert compare.in_rounds(compare.ROUNDS, compare.ROUNDS) and not compare.in_rounds(compare.ROUNDS - 1, 9)
    assert compare.interval_verdict(0.8, 0.7, 0.9, None, -1) == "faster"
    assert compare.interval_verdict(1.2, 1.1, 1.3, None, -1) == "slower"
    assert compare.interval_verdict(1.0, float("-inf"), float("inf"), None, 1) == "within noise"


def test_a_point_in_rounds_moves_only_beyond_its_interval_and_the_machines_band_together(tmp_path):
    """4 % faster with a tight interval (1.02-1.06): a move by the interval alone, within noise
    against a band of ±10 % (what the same code moved between two runs); 30 % faster moves
    against both; the band and the interval are combined in quadrature on the log scale."""
    import math
    db = tmp_path / "results.db"
    base = [1000, 1010, 990, 1000]
    store(db, "a", rps={8: base, 16: base}, rounds=True)
    store(db, "b", rps={8: [1.04 * v for v in base], 16: [1.3 * v for v in base]}, rounds=True)
    alone = compare.compare(compare.side("a", db), compare.side("b", db), band={}).table.set_index("users")
    assert alone.loc["8", "rps_low"] > 1 and alone.loc["8", "rps_verdict"] == "faster"
    banded = compare.compare(compare.side("a", db), compare.side("b", db),
                             band={"rps": (0.10, "the same code twice here")}).table.set_index("users")
    assert banded.loc["8", "rps_verdict"] == "within noise" and banded.loc["16", "rps_verdict"] == "faster"
    r, lo, hi = (banded.loc["8", k] for k in ("rps_ratio", "rps_low", "rps_high"))
    assert banded.loc["8", "rps_band"] == pytest.approx(math.exp(math.hypot(math.log(r / lo), math.log(1.1))) - 1)
    assert banded.loc["8", "rps_spread_from_a"] == ("its 4 interleaved rounds (the ratio's 95 % interval) "
                                                    "and the same code twice here")


def test_the_power_rows_count_what_compare_got_right(tmp_path):
    """A/A: every point within the band of its own scatter. Held: of the points whose server was
    busy enough to be held (CPU 99 % of one core against a cap of 80 %), every one flagged slower;
    the one that was not (50 %) counted apart, within noise."""
    from sqlitelab.report import power
    db = tmp_path / "results.db"
    busy = {u: 50.0 if u == 1 else 99.0 for u in RATES}
    store(db, "a", rps={u: [r] for u, r in RATES.items()}, cpu=busy)
    store(db, "a2", rps={u: [r * k] for (u, r), k in zip(RATES.items(), SCATTER)}, cpu=busy)
    # held back: every point but one a fifth slower (one was not busy enough to meet the quota)
    store(db, "held", rps={u: [r * k * (1 if u == 1 else 0.8)] for (u, r), k in zip(RATES.items(), SCATTER)},
          cpu={u: min(c, 80.0) for u, c in busy.items()})
    rows = {(r["check"], r["metric"]): r for r in power.rows("03-read-write-mix", "quick", 0.8, "a", "a2", "held", db=db)}
    aa, held = rows[("aa", "rps")], rows[("held", "rps")]
    assert aa["hits"] == 10 and aa["share"] == 1.0 and 0 < aa["band"] < 0.1
    assert held["points"] == 9 and held["hits"] == 9 and held["others"] == 1 and held["others_within"] == 1
    assert held["band"] == aa["band"]
    assert ("held to 80 % of its CPUs (one run after the other): flagged slower (a point's band ±"
            in power.said(held))
    assert aa["interleaved"] == 0 and "A/A (the same code twice, one run after the other)" in power.said(aa)
    turned = power.rows("03-read-write-mix", "quick", 0.8, "a", "a2", "held", db=db, interleaved=True)
    assert all(r["interleaved"] == 1 for r in turned)
    assert "A/A (the same code twice, taking turns server by server)" in power.said(turned[0])
    # a row stored before checks said how their runs ran: one after the other, as they all did
    assert "one run after the other" in power.said({k: v for k, v in aa.items() if k != "interleaved"})
    assert ("9 of 9 points the hold slows (100 %), goal 90 %; of the other 1 (their servers not busy enough "
            "to be held), 1 within noise; the run as a whole 0.80× (95 % interval 0.80–0.80×): slower, "
            "beyond the A/A drift") in power.said(held)
    assert held["run_right"] and aa["run_verdict"] == "the machine's drift"
    assert "10 of 10 points (100 %)" in power.said(aa)
    assert "the run as a whole moved 1.00× (95 % interval 0.97–1.03×): the machine's drift" in power.said(aa)
    unmoved = {**held, "run_verdict": "within noise"}  # a hold the servers never met
    assert power.said(unmoved).endswith(": within noise (within the A/A drift or its points' scatter)")


def test_a_power_check_in_rounds_counts_the_points_its_intervals_judged_and_says_its_parameters(tmp_path):
    """Every point measured in four interleaved rounds in each run: the A/A pair within noise by
    the ratios' intervals, the held run a fifth slower flagged by them; the rows keep the `-p`
    parameters the runs were given and say both."""
    from sqlitelab.report import power
    db = tmp_path / "results.db"
    wobble = [1.0, 1.06, 0.95, 1.02]
    busy = {u: 99.0 for u in RATES}
    store(db, "a", rps={u: [r * w for w in wobble] for u, r in RATES.items()}, cpu=busy, rounds=True)
    store(db, "a2", rps={u: [r * w for w in wobble[::-1]] for u, r in RATES.items()}, cpu=busy, rounds=True)
    store(db, "held", rps={u: [0.8 * r * w for w in wobble] for u, r in RATES.items()}, cpu=busy, rounds=True)
    rows = {(r["check"], r["metric"]): r for r in power.rows(
        "03-read-write-mix", "quick", 0.8, "a", "a2", "held", db=db, interleaved=True,
        parameters={"rounds": "4", "order_seed": "1"})}
    aa, held = rows[("aa", "rps")], rows[("held", "rps")]
    assert aa["share"] == 1.0 and aa["in_rounds"] == len(RATES)
    assert held["hits"] == held["points"] == held["in_rounds"] == len(RATES)
    said = power.said(held)
    assert "taking turns server by server, order_seed 1, rounds 4" in said
    assert f"({len(RATES)} of them judged by their ratio's interval over interleaved rounds)" in said
    plain = power.rows("03-read-write-mix", "quick", 0.8, "a", "a2", "held", db=db)[0]
    assert plain["parameters"] == "{}" and ", rounds" not in power.said(plain)


def test_a_point_counts_as_slowed_when_its_server_would_lose_half_the_injected_share():
    """At a cap of 0.8 of one CPU: 99 % busy loses a fifth (slowed), 89 % loses 10 % (slowed, just),
    85 % loses 6 % (not), an unmeasured CPU is not counted; on two CPUs the cap leaves 160 %."""
    from sqlitelab.report import power
    t = pd.DataFrame({"server_cpu_pct_a": [99.0, 89.0, 85.0, float("nan"), 170.0, 190.0]})
    assert power.slowed_points(t.head(4), 0.8, 1).tolist() == [True, True, False, False]
    assert power.slowed_points(t.tail(2), 0.8, 2).tolist() == [False, True]
    assert power.slowed_points(t.iloc[0:0], 0.8, 1).empty


def test_a_change_that_moves_some_points_is_judged_by_the_same_code_twice(tmp_path):
    """Half the points a quarter slower, half unmoved: against the comparison's own scatter (which
    that very change widens) the slowed points hide within noise; against the band the same code
    twice gave on this machine, notebook and scale (a stored A/A check), every slowed point is
    flagged and every unmoved one is not; another scale's A/A is not used."""
    from sqlitelab.report import power
    db = tmp_path / "results.db"
    store(db, "a", rps={u: [r] for u, r in RATES.items()})
    store(db, "b", rps={u: [r * k * (0.75 if u % 2 else 1)] for (u, r), k in zip(RATES.items(), SCATTER)})
    own = compare.compare(compare.side("a", db), compare.side("b", db)).table
    assert (own["rps_verdict"] == "slower").sum() < 5
    assert own["rps_spread_from_a"].iloc[0].startswith("the comparison's own")
    results.store_rows("power", [{"machine": MACHINE, "notebook": "03-read-write-mix", "scale": "seed",
                                  "check": "aa", "metric": "rps", "band": 0.08, "measured": "x"}], db)
    assert compare.compare(compare.side("a", db), compare.side("b", db)).table["rps_spread_from_a"].iloc[0] \
        .startswith("the comparison's own")  # the stored A/A is of another scale
    results.store_rows("power", [{"machine": MACHINE, "notebook": "03-read-write-mix", "scale": "quick",
                                  "check": "aa", "metric": "rps", "band": 0.08, "measured": "x"}], db)
    t = compare.compare(compare.side("a", db), compare.side("b", db)).table.set_index("users")
    odd = [str(u) for u in RATES if u % 2]
    assert set(t.loc[odd, "rps_verdict"]) == {"slower"}
    assert set(t.drop(odd)["rps_verdict"]) == {"within noise"}
    assert (t["rps_band"] == 0.08).all()
    assert t["rps_spread_from_a"].iloc[0] == "the same code twice here (1 A/A check(s) of 03 at quick: their points' scatter)"
    assert power.table(db)["band"].notna().all()


def test_a_run_wide_move_counts_only_beyond_the_machines_drift_between_two_runs(tmp_path):
    """Every point 3 % faster: faster where the machine's drift is unknown; within noise where
    the same code twice moved a whole run by 5 % here (a stored A/A check, read for b's machine)."""
    from sqlitelab.report import power
    db = tmp_path / "results.db"
    store(db, "a", rps={u: [r] for u, r in RATES.items()})
    store(db, "b", rps={u: [1.03 * r * (1 + (k - 1) / 10)] for (u, r), k in zip(RATES.items(), SCATTER)})
    unknown = compare.compare(compare.side("a", db), compare.side("b", db)).overall["rps"]
    assert unknown.verdict == "faster" and unknown.drift == 0 and "no A/A run of this machine" in unknown.words("rps")
    results.store_rows("power", [{"machine": MACHINE, "notebook": "03-read-write-mix", "scale": "quick", "check": "aa",
                                  "metric": "rps", "run_ratio": 1 / 1.05, "measured": "x"}], db)
    known = compare.compare(compare.side("a", db), compare.side("b", db)).overall["rps"]
    assert known.verdict == "within noise" and known.drift == pytest.approx(0.05)
    assert "the machine's drift ±5 %: the largest of 1 A/A check(s) stored here (03 at quick)" in known.words("rps")
    assert compare.overall(compare.compare(compare.side("a", db), compare.side("b", db)).table, "rps", +1,
                           (0.01, "given")).verdict == "faster"


def test_the_comparison_figure_says_where_its_bands_came_from(tmp_path):
    """Bands drawn from the comparison's own points are named so in the legend, not as the runs'
    spread."""
    db = tmp_path / "results.db"
    store(db, "a", rps={u: [r] for u, r in RATES.items()})
    store(db, "b", rps={u: [r * k] for (u, r), k in zip(RATES.items(), SCATTER)})
    c = compare.compare(compare.side("a", db), compare.side("b", db))
    fig = plots.comparison_chart(c.table, "Two runs of the read/write mix", studies(), caption="a test")
    keys = [t.get_text() for t in fig.legends[0].get_texts()] if fig.legends else \
        [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
    assert "noise band (the points' own scatter)" in keys and "noise band (both runs' spread)" not in keys


def test_the_comparison_figure_names_the_same_code_twice_as_its_band(tmp_path):
    db = tmp_path / "results.db"
    store(db, "a", rps={u: [r] for u, r in RATES.items()})
    store(db, "b", rps={u: [r * k] for (u, r), k in zip(RATES.items(), SCATTER)})
    results.store_rows("power", [{"machine": MACHINE, "notebook": "03-read-write-mix", "scale": "quick",
                                  "check": "aa", "metric": m, "band": 0.08, "measured": "x"} for m in compare.METRICS], db)
    c = compare.compare(compare.side("a", db), compare.side("b", db))
    fig = plots.comparison_chart(c.table, "Two runs of the read/write mix", studies(), caption="a test")
    keys = [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()] + \
        [t.get_text() for lg in fig.legends for t in lg.get_texts()]
    assert "noise band (the same code run twice)" in keys


def test_a_power_check_with_a_parameter_its_notebook_does_not_have_stops_before_anything_runs(tmp_path):
    """`compare --power NN -p NAME VALUE` hands the parameter to each of its three runs; one the
    notebook does not declare is refused by each, in one line, and the check exits 2, judging nothing."""
    import os
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-m", "sqlitelab.compare", "--power", "03", "-p", "no_such_knob", "1"],
                          env={**os.environ, "LAB_DATA_DIR": str(tmp_path)}, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout.count("unknown parameter 'no_such_knob' for notebook 03") == 3
    assert not (next((tmp_path / "power").iterdir()) / "results.db").exists()
