"""The committed reference run's export: every row of the exported runs and nothing else, no
histograms, the same files from the same rows, read back with the columns the lab's functions use."""
import pandas as pd
import pytest

from sqlitelab.core import results
from sqlitelab.report import publish, reference_run, reference_tables
from test_publish import NOTEBOOK, _executed

RUNS = ("20261125T100000Z-05-single-machine-aaaa", "20261125T110000Z-05-single-machine-bbbb")


def _store(tmp_path, **run):
    db, runs_dir = tmp_path / "results.db", tmp_path / "runs"
    for i, nb_run in enumerate(RUNS):
        run_id = f"{nb_run}/hello"
        results.store_run(
            {"run_id": run_id, **results.describe(NOTEBOOK, nb_run, "hello", {"scale": "quick"}),
             "started": f"2026-11-25T1{i}:00:00+00:00", "finished": f"2026-11-25T1{i}:05:00+00:00", **run},
            [{"run_id": run_id, "server": s, "profile": "default", "scenario": "hello", "users": u,
              "repeat": 1, "generator": "loadgen", "rps": 1000.0 * u + i, "p99_ms": 2.5, "headline": h,
              "histogram": "HISTFAAA", "audit_ok": 1}
             for s in ("go-nethttp", "rust-axum") for u in (16, 64) for h in (0, 1)], db)
        _executed(runs_dir / nb_run / f"{NOTEBOOK}.ipynb", nb_run)
        (runs_dir / nb_run / "method.csv").write_text("aspect,article,this run,verdict\nmachine,M1,here,differs\n")
    return db, runs_dir


def test_the_export_holds_the_runs_rows_and_reads_back(tmp_path):
    db, runs_dir = _store(tmp_path)
    runs = publish.newest("quick", runs_dir=runs_dir, db=db)
    assert [r.run_id for r in runs] == [RUNS[1]]
    out = tmp_path / "export"
    written = reference_run.export(runs, out, db, runs_dir)
    assert {"runs", "points", "manifest"} <= set(written)
    text = (out / "points.csv").read_text()
    rows = text.splitlines()
    assert "histogram" not in rows[0] and RUNS[0] not in text and len(rows) == 1 + 8
    assert all(RUNS[1] in r for r in rows[1:])
    assert (out / "methods" / f"{NOTEBOOK}.csv").exists()
    assert (out / "reports" / f"{NOTEBOOK}.md").exists() and (out / "reports" / "index.md").exists()
    about = (out / "README.md").read_text()
    assert RUNS[1] in about and "| `points.csv` | 8 |" in about
    assert "the CSV files of `data/reference-run/`" in (out / "reports" / f"{NOTEBOOK}.md").read_text()
    x = reference_tables.load(out)
    assert x["manifest"]["runs"][0]["run_id"] == RUNS[1]
    pts = x["points"]
    assert len(pts) == 4 and set(pts["headline"]) == {1}  # the replaced points stay in the CSV only
    assert pts["started"].notna().all() and sorted(pts["rps"]) == [16001.0, 16001.0, 64001.0, 64001.0]
    before = {p.name: p.read_bytes() for p in out.glob("*.csv")}
    reference_run.export(runs, out, db, runs_dir)  # the same rows make the same files
    assert before == {p.name: p.read_bytes() for p in out.glob("*.csv")}


def test_nothing_to_export_or_load_is_a_clear_error(tmp_path, capsys):
    with pytest.raises(ValueError, match="make seed"):
        reference_run.export([], tmp_path / "export")
    with pytest.raises(FileNotFoundError, match="no reference run"):
        reference_tables.load(tmp_path / "nothing")
    assert reference_run.main(["--scale", "seed", "--runs-dir", str(tmp_path / "none"),
                               "--db", str(tmp_path / "none.db"), "--out", str(tmp_path / "x")]) == 2
    assert "make seed" in capsys.readouterr().err


def test_the_power_checks_of_the_runs_machine_go_beside_them_and_into_the_readme(tmp_path):
    """The export carries the machine's power checks judged with a band (the newest judgement of
    each pair, another machine's left out); the README's block prints those at the run's scale and
    counts the others; notebook 11 shows them where this machine stored none."""
    from sqlitelab import readme
    from sqlitelab.core import machine
    from sqlitelab.notebooks import compare_runs
    import pandas as pd
    db, runs_dir = _store(tmp_path)
    here = machine.machine_label()
    row = {"notebook": "03-read-write-mix", "metric": "rps", "points": 10, "wanted": "within noise",
           "hits": 9, "share": 0.9, "goal": 0.95, "band": 0.1, "run_ratio": 1.0, "run_low": 0.98,
           "run_high": 1.02, "run_verdict": "the machine's drift", "run_a": "a", "run_b": "a2"}
    held = {**row, "check": "held", "cap": 0.8, "wanted": "slower", "hits": 7, "share": 0.7, "goal": 0.9,
            "others": 3, "others_within": 2, "run_ratio": 0.85, "run_verdict": "slower", "run_a": "a2", "run_b": "h"}
    results.store_rows("power", [
        {**row, "machine": here, "scale": "quick", "check": "aa", "hits": 5, "measured": "2026-11-25T09"},
        {**row, "machine": here, "scale": "quick", "check": "aa", "measured": "2026-11-25T10"},  # judged again
        {**held, "machine": here, "scale": "quick", "measured": "2026-11-25T10"},
        {**row, "machine": here, "scale": "seed", "check": "aa", "run_a": "s", "run_b": "s2", "measured": "2026-11-25T11"},
        {**row, "machine": "another machine", "scale": "quick", "check": "aa", "measured": "2026-11-25T12"},
        {**row, "machine": here, "scale": "quick", "check": "aa", "band": None, "run_a": "old", "measured": "2026-11-24"},
    ], db)
    out = tmp_path / "export"
    reference_run.export(publish.newest("quick", runs_dir=runs_dir, db=db), out, db, runs_dir)
    x = reference_tables.load(out)
    power = x["power"]
    assert list(zip(power["scale"], power["check"], power["hits"])) == [("quick", "aa", 9), ("quick", "held", 7),
                                                                         ("seed", "aa", 9)]
    assert "| `power.csv` | 3 |" in (out / "README.md").read_text()
    again, again_runs = _store(tmp_path / "later")  # the run exported again from a store with no check
    reference_run.export(publish.newest("quick", runs_dir=again_runs, db=again), out, again, again_runs)
    assert reference_tables.load(out)["power"].equals(power)  # the checks exported before are kept
    block = "\n".join(readme.lab_power(x))
    assert "1 check at seed among them" in block
    assert ("- notebook 03 at quick · throughput · held to 80 % of its CPUs (one run after the other): flagged "
            "slower (a point's band ±10 %: "
            "the A/A points' scatter): 7 of 10 points the hold slows (70 %), goal 90 %; of the other 3") in block
    assert block.count("\n- notebook 03") == 2
    shown = compare_runs.lab_power(pd.DataFrame(), out)
    assert "No power check is stored on this machine" in shown and "On the reference machine" in shown
    assert shown.count("\n- notebook 03") == 3
    assert "On the reference machine" not in compare_runs.lab_power(pd.DataFrame(), tmp_path / "nothing")


def test_a_power_check_measured_after_the_export_joins_it_and_nothing_else_changes(tmp_path):
    """`--power`: the checks stored in a results.db are added to the export's power.csv beside
    those it had (a pair judged again: its newest judgement), another machine's too, which the
    README's block names; the manifest and the export's README count them, and no other file of
    the export changes."""
    from sqlitelab import readme
    from sqlitelab.core import machine
    db, runs_dir = _store(tmp_path)
    here = machine.machine_label()
    row = {"machine": here, "notebook": "03-read-write-mix", "scale": "seed", "check": "aa", "metric": "rps",
           "points": 10, "wanted": "within noise", "hits": 8, "share": 0.8, "goal": 0.95, "band": 0.1,
           "run_ratio": 1.0, "run_low": 0.98, "run_high": 1.02, "run_verdict": "the machine's drift",
           "run_a": "a", "run_b": "a2", "measured": "2026-11-25T09"}
    results.store_rows("power", [row], db)
    out = tmp_path / "export"
    reference_run.export(publish.newest("quick", runs_dir=runs_dir, db=db), out, db, runs_dir)
    others = {p.name: p.read_bytes() for p in out.glob("*.csv") if p.name != "power.csv"}
    later = tmp_path / "later.db"  # another checkout's results.db: the old check judged again, a new one
    results.store_rows("power", [{**row, "hits": 9, "measured": "2026-11-26T09"},
                                 {**row, "run_a": "t", "run_b": "t2", "interleaved": 1, "hits": 10,
                                  "measured": "2026-11-26T10"},
                                 {**row, "machine": "another machine", "run_a": "x", "measured": "2026-11-26T11"}],
                       later)
    assert reference_run.main(["--power", "--out", str(out), "--db", str(later)]) == 0
    x = reference_tables.load(out)
    power = x["power"]
    assert list(zip(power["run_a"], power["hits"])) == [("a", 9), ("t", 10), ("x", 8)]
    assert "| `power.csv` | 3 |" in (out / "README.md").read_text()
    assert x["manifest"]["tables"]["power"] == 3
    x["manifest"]["scale"] = ["seed"]  # the block prints the checks at the run's scale
    lines = [line for line in readme.lab_power(x) if line.startswith("- ")]
    assert len(lines) == 3 and sum("on another machine (another machine)" in line for line in lines) == 1
    assert "taking turns server by server" in lines[1] and "one run after the other" in lines[0]
    assert others == {p.name: p.read_bytes() for p in out.glob("*.csv") if p.name != "power.csv"}


def test_the_calibrations_the_runs_used_go_beside_them(tmp_path):
    """HTTP alone (wrk on /hello) and the generator flags' thresholds come from the calibrations
    the exported runs name: those rows are exported, no other; a run naming none exports none."""
    for named, want in (({}, []), ({"calibrations": '{"loadgen": "used"}'}, ["used"])):
        db, runs_dir = _store(tmp_path / str(len(want)), **named)
        results.store_rows("calibrations", [
            {"calib_id": c, "generator": "loadgen", "machine": "m", "started": f"2026-11-25T0{i}:00:00+00:00",
             "hello_wrk_rps": 1000.0 * (i + 1), "target": "rust-axum"} for i, c in enumerate(("used", "other"))], db)
        out = tmp_path / str(len(want)) / "export"
        reference_run.export(publish.newest("quick", runs_dir=runs_dir, db=db), out, db, runs_dir)
        cal = reference_tables.load(out)["calibrations"]
        assert (out / "calibrations.csv").exists() == bool(want)
        assert list(cal.get("calib_id", [])) == want and list(cal.get("hello_wrk_rps", [])) == [1000.0] * len(want)
    assert "| `calibrations.csv` | 1 |" in (out / "README.md").read_text()


def test_the_timings_are_papermills_of_each_newest_run_and_a_re_making_is_refused(tmp_path, capsys):
    """timings.csv holds how long the newest run of each notebook took by papermill's clock,
    survives the export that follows it, and is refused from a re-made notebook (its time is
    the re-making's)."""
    db, runs_dir = _store(tmp_path)
    for nb_run, seconds in zip(RUNS, (60.0, 61.34)):
        _executed(runs_dir / nb_run / f"{NOTEBOOK}.ipynb", nb_run, duration=seconds)
    out = tmp_path / "export"
    assert reference_run.main(["--timings", "--scale", "quick", "--out", str(out), "--db", str(db),
                               "--runs-dir", str(runs_dir)]) == 0
    t = pd.read_csv(out / "timings.csv")
    assert list(t["run_id"]) == [RUNS[1]] and list(t["seconds"]) == [61.3] and list(t["notebook"]) == [NOTEBOOK]
    reference_run.export(publish.newest("quick", runs_dir=runs_dir, db=db), out, db, runs_dir)
    x = reference_tables.load(out)
    assert x["manifest"]["tables"]["timings"] == 1 and len(x["timings"]) == 1
    assert "| `timings.csv` | 1 | How long the newest run" in (out / "README.md").read_text()
    _executed(runs_dir / RUNS[1] / f"{NOTEBOOK}.ipynb", RUNS[1], replay=True, duration=5.0)
    with pytest.raises(ValueError, match="re-making"):
        reference_run.timings("quick", runs_dir, db)
    assert reference_run.main(["--timings", "--scale", "quick", "--out", str(out), "--db", str(db),
                               "--runs-dir", str(runs_dir)]) == 2
    assert "before the pages are re-made" in capsys.readouterr().err
