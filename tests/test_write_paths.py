"""Group commit measured (sqlitelab.experiments.write_paths): the sweeps it builds, its table,
and a real run whose points carry the server's own writer counts."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from sqlitelab.experiments import write_paths


@pytest.mark.parametrize("kw,says", [
    ({"paths": ["pool", "group"]}, "path must be one of"),
    ({"syncs": ["extra"]}, "synchronous must be one of"),
    ({"puma_threads": 0}, "puma_threads must be an integer >= 1"),
])
def test_bad_choices_are_refused_in_one_line(kw, says):
    with pytest.raises(ValueError, match=says):
        write_paths.specs(**kw)


def test_one_sweep_per_setting_and_path_each_at_its_synchronous():
    sweeps = write_paths.specs(servers=["go-nethttp"], syncs=["full", "normal"], levels=[8])
    assert [s.experiment for s in sweeps] == ["full-pool", "full-writer", "full-batch",
                                              "normal-pool", "normal-writer", "normal-batch"]
    assert all("synchronous=full" in s.knobs["pragmas"] for s in sweeps[:3])
    assert all("synchronous=normal" in s.knobs["pragmas"] for s in sweeps[3:])
    assert [s.knobs["write_path"] for s in sweeps[:3]] == ["pool", "writer", "batch"]
    assert len({s.run_id(s.scenarios[0]).split("/")[0] for s in sweeps}) == 1  # one notebook run


def test_the_table_sets_the_paths_side_by_side_with_the_writers_counts():
    def pt(path, rps, tx=None, jobs=None, sizes=None):
        return {"server": "go-nethttp", "experiment": f"full-{path}", "users": 64, "rps": rps,
                "p99_ms": 10.0, "window_s": 2.0, "audit_ok": True, "writer_transactions": tx,
                "writer_jobs": jobs, "writer_sizes": json.dumps(sizes) if sizes else None}
    t = write_paths.table(pd.DataFrame([pt("pool", 1000.0), pt("writer", 1200.0, 2400, 2400, {"1": 2400}),
                                        pt("batch", 6000.0, 400, 12000, {"20": 200, "40": 200})]))
    r = t.iloc[0]
    assert r["batch ÷ writer"] == pytest.approx(5.0) and r["batch ÷ pool"] == pytest.approx(6.0)
    assert r["batch mean batch"] == pytest.approx(30.0) and r["batch largest batch"] == 40
    assert r["batch commits/s"] == pytest.approx(200.0) and r["writer mean batch"] == pytest.approx(1.0)
    assert r["audit ok"]


@pytest.mark.harness
def test_a_run_carries_the_writers_own_counts_into_every_point(tmp_path):
    """Writer and batch at one level on one stack: every acknowledged write is one of the
    writer's jobs in the window, the sizes add up to them, and the writer path's are all 1."""
    pts = write_paths.measure(servers=["go-nethttp"], paths=["writer", "batch"], syncs=["normal"],
                              levels=[8], duration=0.8, warmup=0.2, results_db=tmp_path / "r.db",
                              runs_dir=tmp_path / "runs", progress=False)
    assert pts["audit_ok"].all() and len(pts) == 2
    for p in pts.to_dict("records"):
        sizes = {int(k): v for k, v in json.loads(p["writer_sizes"]).items()}
        assert p["writer_jobs"] == sum(k * v for k, v in sizes.items()) > 0
        assert p["writer_transactions"] == sum(sizes.values())
        if p["experiment"].endswith("writer"):
            assert set(sizes) == {1}
    t = write_paths.table(pts)
    assert {"writer rps", "batch rps", "batch ÷ writer", "batch mean batch"} <= set(t.columns)
