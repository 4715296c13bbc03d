"""The articles' own load tools as cross-checks (issue 30): hey (seed 000) and oha (seed 001),
built by `make setup`, send what the lab's scenario says, report what they measured in the
crosschecks table's vocabulary, and are audited like every generator. The fast tests read
reports recorded from the real tools; the harness tests run them against a real server."""
from __future__ import annotations

import json

import pytest

from sqlitelab.core import results
from sqlitelab.experiments.sweep import sweep
from sqlitelab.load import crosscheck, hey, oha, reference
from sqlitelab.report import analysis

# hey v0.1.5's report of `hey -c 8 -z 2.5s -t 30 -m POST <go-nethttp>/requests` (2026-11-25),
# cut where it repeats itself, with one error line added as hey prints them
HEY_REPORT = """
Summary:
  Total:\t2.5132 secs
  Slowest:\t0.0333 secs
  Fastest:\t0.0003 secs
  Average:\t0.0029 secs
  Requests/sec:\t2710.8829
  
  Total data:\t9472455 bytes
  Size/request:\t1390 bytes

Response time histogram:
  0.000 [1]\t|
  0.004 [5006]\t|■■■■■■■■■■■■■■■■■■■■■■■■■■■■■■■■■■■■■■■■

Latency distribution:
  10%% in 0.0008 secs
  50%% in 0.0015 secs
  90%% in 0.0062 secs
  95%% in 0.0081 secs
  99%% in 0.0218 secs

Details (average, fastest, slowest):
  DNS+dialup:\t0.0000 secs, 0.0000 secs, 0.0074 secs

Status code distribution:
  [200]\t6800 responses
  [503]\t10 responses

Error distribution:
  [3]\tPost "http://127.0.0.1:1/requests": context deadline exceeded (Client.Timeout exceeded while awaiting headers)
"""

# oha 1.16.0's JSON report (the fields the lab reads) of `-c 3 -z 3s -m POST --disable-keepalive
# --redirect 0` against ruby-puma's POST /metrics (2026-11-25), with one request aborted at -z's end
OHA_REPORT = {
    "summary": {"successRate": 1.0, "total": 3.001496312, "slowest": 0.032020292,
                "fastest": 0.000731091, "average": 0.004292102286602868,
                "requestsPerSec": 697.3188644717549, "totalData": 120343, "sizePerRequest": 57,
                "sizePerSec": 40094.335454908934},
    "latencyPercentiles": {"p10": 0.001, "p50": 0.003072131, "p90": 0.007464036, "p95": 0.01066571,
                           "p99": 0.025568033, "p99.9": 0.030757514, "p99.99": 0.032020292},
    "statusCodeDistribution": {"201": 2077, "503": 13},
    "errorDistribution": {"aborted due to deadline": 3},
}

RUN = reference.ClientRun(stdout="", gen_cpu_s=0.5, server_cpu_s=2.0, wall_s=2.5)


def test_hey_report_is_read_as_hey_counts():
    h = hey.parse(HEY_REPORT)
    assert h["total_s"] == 2.5132 and h["rps"] == 2710.8829 and h["bytes"] == 9472455
    assert h["pct"] == {10: 0.0008, 50: 0.0015, 90: 0.0062, 95: 0.0081, 99: 0.0218}
    assert h["status"] == {200: 6800, 503: 10} and sum(h["errors"].values()) == 3
    row = hey.summary(h, 8, RUN, "1", 2.5)
    assert row["requests"] == 6813 and row["ok_responses"] == row["acked_responses"] == 6800
    assert row["status_errors"] == 10 and row["timeouts"] == 3 and row["socket_errors"] == 0
    assert row["errors"] == 13 and row["unknown_outcomes"] == 3  # hey waits for the rest
    assert row["p99_ms"] == pytest.approx(21.8) and row["p999_ms"] is None
    assert row["gen_cpu_pct"] == pytest.approx(20.0) and row["server_cpu_pct"] == pytest.approx(80.0)
    with pytest.raises(Exception, match="no summary"):
        hey.parse("connection refused\n")


def test_oha_report_counts_the_aborted_as_unknown():
    row = oha.summary(OHA_REPORT, 3, RUN, "1", 3.0)
    assert row["requests"] == 2093 and row["rps"] == pytest.approx(697.3188644717549)
    assert row["ok_responses"] == row["acked_responses"] == 2077 and row["status_errors"] == 13
    assert row["unknown_outcomes"] == 3 and row["errors"] == 13  # aborted: unknown, not failed
    assert row["p999_ms"] == pytest.approx(30.757514) and row["max_ms"] == pytest.approx(32.020292)


def test_each_client_sends_the_scenario_as_the_article_did():
    r, why = reference.fixed_request("rails-writes", {"follow_redirects": 1})
    assert why is None
    cmd = hey.command("http://127.0.0.1:8000", r, 16, 10.0, keepalive=True)
    assert cmd[1:] == ["-c", "16", "-z", "10s", "-t", str(hey.TIMEOUT_S), "-m", "POST",
                       "http://127.0.0.1:8000/requests"]  # hey follows the 302, as the article's did
    m, why = reference.fixed_request("metrics-writes", None)
    cmd = oha.command("http://127.0.0.1:8000", m, 3, 5.0, keepalive=False)
    for flag in ("--latency-correction", "--disable-keepalive", "--no-tui"):
        assert flag in cmd
    assert cmd[cmd.index("--redirect") + 1] == "0" and cmd[cmd.index("-z") + 1] == "5s"
    # a scenario that draws ids or mixes requests is not one fixed request: skipped, with why
    assert "mixes several" in hey.expressible("mix", {"write_share": 0.5})
    assert "draws ids or payloads" in oha.expressible("user-read")
    with pytest.raises(ValueError, match="crosscheck_tool must be one of wrk, hey, oha"):
        crosscheck.tool("ab")


needs_tools = pytest.mark.skipif(not (hey.available() and oha.available()),
                                 reason="hey and oha are built by make setup")


@needs_tools
@pytest.mark.harness
@pytest.mark.parametrize("tool, scenario, keepalive", [("hey", "rails-writes", True),
                                                       ("oha", "metrics-writes", False)])
def test_a_sweep_crosschecks_with_an_articles_tool_and_audits_it(tool, scenario, keepalive, tmp_path):
    db = tmp_path / "results.db"
    df = sweep(notebook="test", servers=["go-nethttp"], profiles=["rails71"], scenario=scenario,
               levels=[1, 2], duration=1.0, warmup=0.3, keepalive=keepalive, crosscheck=[1, 2],
               crosscheck_tool=tool, progress=False, results_db=db, runs_dir=tmp_path / "runs")
    checks = results.load_table("crosschecks", df["run_id"].iloc[0], db)
    assert list(checks["generator"]) == [tool, tool] and list(checks["users"]) == [1, 2]
    assert checks["audit_ok"].all() and (checks["rows_written"] > 0).all()
    assert (checks["rps"] > 0).all() and (checks["requests"] >= checks["ok_responses"]).all()
    table = analysis.crosscheck_table(df["run_id"].iloc[0], db)
    ref = table[table["generator"] == tool]
    assert len(ref) == 2 and (ref["rps_vs_ref"] == 1.0).all()
    lab = table[table["generator"] != tool]
    assert len(lab) == 2 and lab["rps_vs_ref"].notna().all() and lab["error_pct"].notna().all()
    if tool == "hey":  # the lab's own rate counted as hey counts, beside hey's
        assert lab["hey_rps"].notna().all()
    stored = json.loads(results.load_table("runs", df["run_id"].iloc[0], db)["sweep"].iloc[0])
    assert stored["crosscheck"] == [1, 2] and stored["crosscheck_tool"] == tool
