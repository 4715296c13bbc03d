"""The seeds' phenomena, reproduced on real servers (behaviour, not speed)."""
from __future__ import annotations

import pytest

from sqlitelab.infra import databases, servers
from sqlitelab.load import driver as load

pytestmark = pytest.mark.harness


@pytest.mark.parametrize("profile,busy_expected", [("rails71-retries", True), ("rails8", False)])
def test_seed001_retries_vs_immediate_on_puma(profile, busy_expected, tmp_path):
    """Seed 001: `retries: 1000` (a handler that never sleeps) with deferred transactions
    yields 'database is locked'; Rails 8's immediate transactions with a sleeping handler
    yield none. Either way the database holds exactly the acknowledged writes."""
    db = databases.prepare_database(tmp_path / "m.db")
    with servers.start_server("ruby-puma", db, profile=profile, processes=4, threads=3,
                              cpus="0") as srv:
        p = load.run_level(srv, "metrics-writes", 16, tmp_path / "level", duration=5,
                           warmup=0.5, cpus="1")
        acked = p["acked_writes"]
    rows = databases.table_counts(db)["metrics"]
    assert acked > 0
    assert rows == 5 * acked, (rows, acked)
    assert databases.integrity_check(db) == "ok"
    if busy_expected:
        assert p["busy_errors"] > 0, p["status_counts"]
    else:
        assert p["busy_errors"] == 0, p["status_counts"]
    assert p["server_errors"] == 0 and p["connection_errors"] == 0, p["status_counts"]
