"""Every column the lab stores in data/results.db, declared once, as data: what each table and
each column means (TABLES; SHARED holds the meanings several tables share), the type of the
columns whose type cannot be left to their first rows (TYPES), the columns every row describes
itself with (DESCRIBED) and what a `seconds` row repeats of its point (SECOND_KEYS).

results.store_rows applies TYPES; sqlitelab.browse shows the descriptions in Datasette and
fails (browse.undescribed) on a stored column this file does not describe; sweep stores
SECOND_KEYS. A new stored column: measure it where it is measured, and describe it here (in
its table, or in SHARED when several tables mean the same by it).

A description that names a constant declared above core (the stacks, the scenarios, the
generators, the load driver's CPU thresholds) is `Filled`: its `{NAME}` fields are filled by
browse (browse.FILLS), from the module that declares the constant.
"""
from __future__ import annotations

from sqlitelab.core import vocabulary


class Filled(str):
    """A description with `{NAME}` fields (str.format) for constants declared above core,
    which browse fills in."""


# What every row keyed by run_id says about itself (results.describe), and what rows stored
# before they did get from their run (results.migrate).
DESCRIBED = ("notebook", "notebook_run", "experiment", "scale", "machine", "git_commit")

# What each row of the `seconds` table repeats of its point: enough to join it back
# (run_id, server, profile, scenario, users, rate, repeat, generator) and to read it alone.
SECOND_KEYS = ("run_id", *DESCRIBED,
               "server", "profile", "scenario", "database", "users", "rate", "repeat", "generator",
               "headline", "operation", "operation_started_s", "operation_seconds")

# Numeric columns that a run's first rows may leave empty (a direct path has no link): declared,
# since a column first seen as None would be made TEXT and keep later numbers as text. By name,
# whatever the table (results.store_rows); in the order store_rows adds them to a table.
TYPES: dict[str, type] = {
    # the generator's delayed link (sqlitelab.infra.link), and the server's to its Postgres
    "link_delay_us": int, "link_connections": int, "link_chunks": int,
    "link_late_mean_us": float, "link_late_max_us": float,
    "db_link_delay_us": int, "db_link_late_mean_us": float, "db_link_late_max_us": float,
    # open loop (closed-loop points leave them empty), operations, and `seconds` rows
    "rate": float, "offered_rps": float, "offered": int, "late": int,
    "max_lag_ms": float, "backlog": int, "operation_started_s": float,
    "operation_seconds": float, "p50_ms": float, "p99_ms": float, "max_ms": float,
    "server_cpu_pct": float, "server_rss_mb": float, "wal_bytes": int, "server_mark_late_ms": float,
    # the audit of an app whose writes are not audited (notebook 10), and what only a locustfile's
    # level or only a scenario's has
    "rows_written": int, "expected_rows": int, "unacked_rows": int, "db_cached_before": float,
    "db_cached_after": float, "db_mib": float, "off_host": int,
    "writer_transactions": int, "writer_jobs": int,
    # a calibration's drift onset: empty when no drift was seen, which made the column TEXT in
    # results.db files made before it was typed here (calibrate reads such a value back as a number)
    "onset_util": float,
    # a point's copy of it, and Locust's own numbers (empty on loadgen's points, the first a run
    # stores when loadgen measures first): TEXT otherwise, and read back as text
    "gen_onset_util": float, "locust_avg_ms": float, "locust_window_avg_ms": float,
    "locust_window_requests": int, "locust_exit": int,
    # flags: stored as 0/1, read back as yes/no (results.typed), as a live point has them
    "audit_ok": bool, "headline": bool, "keepalive": bool, "generator_bound": bool,
    "generator_saturated": bool, "ramp_in_window": bool, "locust_cpu_warning": bool,
    "open_loop": bool, "generator_influenced": bool, "core_slowed": bool, "outlasted": bool,
    # the cores' speed beside a window (sqlitelab.core.probe; NaN where not pinned) and a cap
    "probe_server_before_ms": float, "probe_server_after_ms": float,
    "probe_generator_before_ms": float, "probe_generator_after_ms": float, "core_slowdown": float,
    "server_cpu_cap": float, "round": int, "run_right": bool, "readable": bool, "restarted": bool, "replica": bool,
    "checkpoint": int, "replica_lost": int, "replica_lost_seconds": float, "lost_span_s": float, "band": float, "others": int, "others_within": int,
}


# ----------------------------------------------------------------------------- shared meanings

# Meanings shared by several tables (a table says which of them it has, with `_shared`).
SHARED: dict[str, str] = {
    # the locked environment a run was set up from (results.lock)
    "lock_hash": "requirements.lock (every Python dependency, exact) the run was set up from: its "
                 "SHA-256, first 16 hex digits (results.lock); empty for runs from before it was "
                 "recorded.",
    "lock_ok": "1 when every pin of the lock that applies here was the installed version.",
    "lock_drift": "Installed packages that differ from the lock (JSON list, `name version "
                  "(locked v)`).",
    # which sweep, notebook run and experiment a row belongs to, and the machine
    "run_id": "The sweep or stored table (runs.run_id; results.sweep_id): its notebook run, "
              "plus `/<experiment>` for each sweep of a notebook run that makes several — a key "
              "only, its parts are the columns notebook_run and experiment. Raw files: "
              "data/runs/<run_id>/.",
    "notebook_run": "The notebook run the row belongs to (`<UTC start>-<notebook>-<4 hex>`, "
                    "results.new_run_id): what a notebook's `run_id` parameter holds, shared by "
                    "all its experiments.",
    "experiment": "The notebook's experiment (e.g. `article`, `share-10`, a scenario), empty for "
                  "a notebook run's single sweep or table.",
    "scale": "The scale the notebook ran at (quick or seed: each notebook's SCALES), empty for "
             "ad-hoc sweeps.",
    "notebook": "The notebook that made the run (its file name without .ipynb), or the tool: "
                "`generator-comparison` (python -m sqlitelab.calibrate compare); other names: "
                "ad-hoc sweeps.",
    "machine": "The measuring machine: cores, CPU model, memory (machine.machine_label()).",
    # what was measured: stack, profile, scenario, level, generator
    "server": Filled("The stack (servers/<stack>/): {STACKS}."),
    "profile": "The server profile (servers/profiles.toml): a bundle of knobs; `a+b` is profile a "
               "with overlay b.",
    "scenario": Filled("What every user sends (sqlitelab/load/scenarios.toml): {SCENARIOS}."),
    "users": "Concurrent closed-loop users (wrk: connections).",
    "repeat": "Which repeat of the same level (from 1; buffer points from 0).",
    "generator": Filled("The load generator: {GENERATORS} (loadgen: the lab's Go "
                        "generator), or a cross-check's client: wrk, the reference, or hey or oha, "
                        "the articles' own tools."),
    # when, and with which code
    "started": "UTC start, ISO 8601.",
    "finished": "UTC end, ISO 8601.",
    "git_commit": "`git rev-parse HEAD` of the lab when it ran, `-dirty` when tracked files had "
                  "uncommitted changes.",
    # the exact-window measurement
    "window_s": "Length of the measurement window, seconds.",
    "requests": "Requests counted: started and finished inside the window (wrk: every request of "
                "its measured run).",
    "rps": "Requests per second: `requests` over the window.",
    "mean_ms": "Mean latency of the counted requests, ms.",
    "p50_ms": "Median latency, ms.",
    "p90_ms": "90th-percentile latency, ms.",
    "p95_ms": "95th-percentile latency, ms.",
    "p99_ms": "99th-percentile latency, ms.",
    "p999_ms": "99.9th-percentile latency, ms.",
    "max_ms": "Slowest counted request, ms.",
    "errors": "Failed requests in the window (every kind: busy, other 5xx, 4xx, connection "
              "errors, timeouts).",
    "timeouts": "Requests that timed out.",
    "bytes_per_s": "Response bytes per second received by the generator.",
    # CPU of generator and server, their pinning and hosts
    "gen_cpu_pct": "The generator's CPU over the window, percent of one core (all its "
                   "processes; 200 = two cores busy).",
    "gen_cpus": "CPUs the generator was allowed to use (its pinning, else every CPU).",
    "server_cpu_pct": "The server's CPU over the window (its whole process tree), percent of one core.",
    "server_util": Filled("The server's CPU as a share of the cores it was pinned to (0–1); from "
                          "verdicts.SERVER_SATURATED_CPU = {SERVER_SATURATED_CPU:g} it counts as "
                          "saturated."),
    "generator_pinning": "CPU list the generator was pinned to (taskset), or empty when unpinned.",
    "server_pinning": "CPU list the server was pinned to, or empty when unpinned.",
    "layout_note": "Where the CPU layout the notebook asked for (e.g. its article's server "
                   "cores) did not fit this machine, and what the run did instead "
                   "(sqlitelab.core.layout); empty when it fitted.",
    "server_host": "Where the server ran (sqlitelab.infra.hosts): `local` (loopback) or "
                   "`netns:<name>` (a network namespace on this machine).",
    "generator_hosts": "The hosts of Locust's workers when it ran distributed (its master on "
                       "the notebook's machine), comma-separated; empty: Locust on this machine.",
    # the delayed link between generator and server (sqlitelab.infra.link)
    "link_delay_us": "Delay added in each direction between generator and server, µs "
                     "(sqlitelab.infra.link's delayproxy; 0: the proxy alone); empty: the generator reached the "
                     "server directly.",
    "link_connections": "TCP connections the delayed link carried during the level.",
    "link_chunks": "Chunks of bytes the link forwarded (both directions).",
    "link_late_mean_us": "How late past its due time the link forwarded a chunk, on average, µs "
                         "(the delay applied is link_delay_us plus this).",
    "link_late_max_us": "The latest chunk's lateness, µs.",
    # the generator flags (driver.run_level, verdicts.influence)
    "generator_bound": Filled("1 when the generator, not the server, was the limit: its CPU at or "
                              "above verdicts.GENERATOR_BOUND_CPU ({GENERATOR_BOUND_CPU:.0%}) of its "
                              "cores, or Locust's own CPU warning, while the server was below "
                              "verdicts.SERVER_SATURATED_CPU ({SERVER_SATURATED_CPU:.0%}) of its own "
                              "(driver.run_level). Throughput is then a lower bound for the server's."),
    "generator_influenced": Filled("1 when the generator plausibly set the pace without being "
                                   "bound (verdicts.influence: past its calibrated drift onset, or "
                                   "busy — {GENERATOR_BUSY_CPU:.0%} of its CPU or more — and busier "
                                   "than an unsaturated server with nothing else to explain it; "
                                   "sweep: more than calibrate.TOLERANCE short of wrk's rate at a "
                                   "cross-checked level)."),
    "influence": "Why the point is generator-influenced (one sentence), else empty.",
    # processes and threads, the write audit, a skipped point, SQLite's version
    "processes": "Processes (Locust --processes; loadgen and the server knobs: the server's "
                 "processes where said).",
    "threads": "Threads: wrk's threads, or the server's threads per process (from /health).",
    "rows_written": "Rows the level added to the table its scenario writes, counted in the file.",
    "audit_rule": "How written rows were checked against acknowledged writes (exact, partial, "
                  "or wrk's bounds; ', N unknown': N writes ended in a transport error and may "
                  "each have added their rows).",
    "audit_ok": "1 when the rows written match the acknowledged writes under audit_rule and "
                "`PRAGMA integrity_check` said ok; 0 is a failed audit; empty when not audited.",
    "integrity": "`PRAGMA integrity_check` of the server's database after it stopped (`ok`).",
    "skipped": "Why the point was not measured (one line), else empty.",
    "sqlite_version": "SQLite library version that wrote the data.",
    # the buffer notebook's points (sqlitelab.experiments.buffer)
    "seconds": "Timed seconds of the point.",
    "records_per_s": "Records written per second over the timed seconds.",
    "method": "`article` (the author's code, detail by detail) or `tuned` (the lab's writer); "
              "for calibrations: the calibration's settings (calibrate.METHOD).",
    "variant": "What changed from the method as published (buffer.VARIANTS); `lab` for tuned.",
    "rows_per_txn": "Rows per transaction (the article's batch_write_size).",
    "total": "Records the point writes.",
    "synchronous": "PRAGMA synchronous in effect on the writing connection (off, normal, full, extra).",
    "groups": "Transactions (groups of rows_per_txn rows) written.",
    "close_checkpoints": "Connection closes that checkpointed the whole WAL and deleted it "
                         "(seen from the files), empty when not probed.",
    "auto_checkpoints": "Checkpoints at a commit (the 1,000-page autocheckpoint), empty when not probed.",
    "db_mib": "Database size, MiB (buffer points: db + -wal + -shm, as the article's get_db_size_mb).",
    "rows": "Rows in the queue table after the point (the audit).",
    "rows_expected": "Rows there should be: total / records_per_row, rounded up.",
    "records_in_payloads": "Records counted inside the rows' payloads (should be total).",
    # the calibrations' key
    "calib_id": "The calibration (calibrations.calib_id): `<UTC start>-calibration-<generator>-<4 hex>`.",
}


def _shared(*names: str) -> dict[str, str]:
    return {n: SHARED[n] for n in names}


# ----------------------------------------------------------------------------- tables

# Per table: what a row is (`description`) and what each column means (`columns`: its own
# meanings, and the SHARED ones it has; DESCRIBED on every table keyed by run_id). A table whose
# rows carry an audit (`audit_ok`) names the columns that say which row failed (`audited`: those
# the stored table has; batch's summary and sweep's warning show them).
TABLES: dict[str, dict] = {
    "runs": {
        "description": "One row per sweep (a notebook run with several experiments has one row "
                       "each, `<run_id>/<experiment>`) or per stored table (buffer, comparison): "
                       "what ran, where, with which code and settings.",
        "columns": {
            **_shared("run_id", "notebook", "notebook_run", "experiment", "scale", "started",
                      "finished", "git_commit"),
            "parameters": "The notebook's parameters as it ran (JSON; `scale` is quick or seed).",
            "machine": SHARED["machine"],
            "machine_info": "The machine as JSON (machine.machine()): host, system, CPU model, "
                            "cores, memory GiB.",
            "versions": "Versions of Python, SQLite (Python's) and the lab's Python packages (JSON, "
                        "results.versions()). The servers' own versions are in points.server_versions.",
            "server_cpus": "CPU list the servers were pinned to (empty: unpinned).",
            "generator_cpus": "CPU list the generators were pinned to (empty: unpinned).",
            "scenario": SHARED["scenario"],
            "sweep": "The sweep's arguments (JSON): servers, profiles, levels, repeats, duration, "
                     "warm-up, generator, keep-alive, confirm, crosscheck, knobs, seed sizes.",
            "seed_cached": "1 when the seeded template database came from the cache.",
            "seed_seconds": "Seconds spent getting the seeded template (seeding or the cache).",
            "points": "Rows the run stored in its measurement table (points, or buffer_points etc.), "
                      "replaced points included.",
            "calibrations": "The generator calibrations the sweep's flags used (JSON: generator → "
                            "calibrations.calib_id); empty when the sweep skipped calibration.",
            **_shared("lock_hash", "lock_ok", "lock_drift"),
            "calibration_seconds": "Seconds the sweep spent finding (or measuring) its generator "
                                   "calibrations.",
            "server_timing": "Where the sweep's wall time went, per server and profile (JSON list: "
                             "copy_s, start_s, prime_s, levels_s, crosscheck_s, confirm_s, "
                             "confirmed_levels, stop_s, integrity_s, db_mib).",
            "wall_seconds": "The sweep's wall time, seconds.",
        },
    },
    "points": {
        "description": "One row per level and repeat of a sweep: the exact-window measurement, "
                       "the same run counted as `hey` counts it, CPU of server and generator, "
                       "the generator flags and the audit. results.load_points() reads it.",
        "audited": ("server", "profile", "scenario", "users", "repeat", "generator", "acked_writes",
                    "inflight_writes", "resent_writes", "rows_written", "audit_rule", "integrity"),
        "columns": {
            **_shared(*DESCRIBED),
            **_shared("run_id", "server", "profile", "scenario", "users", "repeat", "generator",
                      "machine", "window_s", "requests", "rps", "mean_ms", "p50_ms", "p90_ms",
                      "p95_ms", "p99_ms", "p999_ms", "max_ms", "errors", "timeouts",
                      "bytes_per_s", "gen_cpu_pct", "gen_cpus", "server_cpu_pct", "server_util",
                      "generator_pinning", "server_pinning", "layout_note", "server_host",
                      "generator_hosts", "link_delay_us", "link_connections", "link_chunks",
                      "link_late_mean_us", "link_late_max_us", "generator_bound", "generator_influenced", "influence", "rows_written", "audit_rule",
                      "audit_ok", "integrity", "sqlite_version"),
            "processes": "Locust processes driving the level (loadgen: 1).",
            "hist_mean_ms": "Mean latency from the merged HdrHistogram, ms (a check on mean_ms).",
            "min_ms": "Fastest counted request, ms.",
            "status_counts": "Responses in the window by HTTP status (JSON; 0: no response).",
            "busy_errors": "Failures reported as SQLITE_BUSY ('database is locked', a 503).",
            "server_errors": "Other 5xx responses.",
            "client_errors": "4xx responses.",
            "connection_errors": "Requests that failed on the connection (refused, reset…).",
            "overran_window": "Requests started in the window but unfinished at its close (not counted).",
            "off_host": "Requests of a user's own locustfile (notebook 10) to a host other than the "
                        "app's, refused before they were sent; any fails the point's audit.",
            "max_overrun_ms": "How long the longest of those ran past the close, ms (from "
                              f"vocabulary.STALL_MS = {vocabulary.STALL_MS:g} ms: a stall).",
            "server_rss_mb": "Peak resident memory of the server's process tree, MiB.",
            "locust_cpu_warning": "1 when Locust logged its own 'CPU usage above 90%' warning.",
            "server_requests": "Requests the server itself counted in the window (/health "
                               "requests_handled at both ends), empty for count-based levels and when an edge's mark was "
                               "taken late (the window known only after it passed).",
            "writer_transactions": "Transactions the server's one writer ran in the window (/health's "
                                   "`writer` at both edges; LAB_WRITE_PATH writer|batch, empty on the pool "
                                   "and when an edge was read late): its COMMITs, so its commits per "
                                   "second are this over window_s.",
            "writer_jobs": "Writes (jobs) in those transactions: writer_jobs / writer_transactions is "
                           "the mean group-commit batch (1 on the writer path).",
            "writer_sizes": "JSON: writes per transaction -> transactions that held that many, in the "
                            "window (the batch sizes' distribution).",
            "server_mark_late_ms": "How long after its edge the later of the two /health counts was "
                                   "read, ms: server_requests' window may end that much later than "
                                   "the generator's (load.verdicts.counts_agree); later than "
                                   "load.sampler.MARK_LATE_S, the server's count is not taken.",
            "ramp_in_window": "1 when a user spawned after the window opened (the window held a ramp).",
            "acked_writes": "Write requests the generator saw acknowledged (the scenario's success "
                            "statuses) over the whole run.",
            "inflight_writes": "Write requests sent and never answered when the generator stopped "
                               "(at its count, its window's close or a kill): each may have been "
                               "committed, so the audit allows that many rows more.",
            "resent_writes": "Write requests loadgen sent a second time on a new connection after "
                             "the kept-alive one dropped without an answer: the first sending may "
                             "have been committed too, so the audit allows that many rows more.",
            "run_counts": "Every finished request of the whole run by `<request> <status>` (JSON; "
                          "status 0: transport error) — hey's accounting.",
            "locust_avg_ms": "Locust's own average over the whole run, ms (its CSV's Aggregated row).",
            "locust_window_avg_ms": "Locust's own average over the window, ms (its stats reset at the "
                                    "window's open).",
            "locust_window_requests": "Locust's own request count over the window.",
            "histogram": "The merged HdrHistogram of the window's latencies in µs (base64, "
                         "HdrHistogram.decode).",
            "locust_exit": "The generator process's exit code (None for a level of a session "
                           "of levels, whose process ran on: driver.Session).",
            "keepalive": "1: each user kept one connection; 0: a new connection per request "
                         "(oha --disable-keepalive).",
            "hey_seconds": "hey's Total: from the run's first request start to its last end, s.",
            "hey_rps": "hey's Requests/sec: every finished request of the run (any status, "
                       "transport errors too) over hey_seconds.",
            "hey_mean_ms": "hey's Average: mean latency of the run's requests with an HTTP status, ms.",
            "hey_max_ms": "hey's Slowest: the slowest of them, ms.",
            "hey_results": "hey's numRes: every request that finished during the run.",
            "expected_rows": "Rows the acknowledged writes should have added (acked_writes × "
                             "rows per acknowledgement).",
            "unacked_rows": "rows_written − expected_rows (0 when exact; > 0: rows committed "
                            "without an acknowledgement).",
            "db_mib": "Size of the server's database file before the level, MiB.",
            "database": "The database the server ran on: sqlite (the file) or postgres (a real Postgres the sweep started beside it; its CPU and RSS are counted in server_cpu_pct / server_rss_mb).",
            "db_link_delay_us": "µs each way of the link between the server and its Postgres (sweep's db_link_delay_us: a database on a host of its own); empty: the unix socket, or SQLite.",
            "db_link_late_mean_us": "How late past its delay the server-to-Postgres link forwarded chunks, mean µs, from its start to this point.",
            "db_link_late_max_us": "The latest single chunk of the server-to-Postgres link so far, µs past its delay.",
            "database_version": "SQLite's version, or Postgres' server_version, as the server's /health reported it.",
            "postgres_settings": "JSON: every setting the sweep's Postgres was started with (sqlitelab.infra.postgres.settings: fixed, memory sized to the machine, durability matched to the profile's synchronous).",
            "db_cached_before": "Share of the database file in the OS page cache before the level "
                                "(fincore; 0–1).",
            "db_cached_after": "Share of the database file in the OS page cache after the level.",
            "knobs": "The server's effective knobs as its /health reported them (JSON: pragmas, "
                     "transaction mode, busy handling, write path, processes, threads…).",
            "emulated": "Knobs emulated in application code where the driver lacks a native hook "
                        "(JSON: knob → how; {} when none).",
            "server_versions": "The server's language, framework and driver versions (JSON, /health).",
            "sqlite_options": "The SQLite library's `PRAGMA compile_options` as the server's /health "
                              "reported them (JSON list); empty where a server does not report them.",
            "server_processes": "Server processes (from /health knobs).",
            "server_threads": "Threads per server process (from /health knobs).",
            "write_path": "How the server writes: pool, writer (a single writer thread) or batch "
                          "(group commit).",
            "txn_mode": "Write transactions: deferred or immediate.",
            "busy": "Busy handling (e.g. busy_timeout:5000, retries:1000, sleep_poll…).",
            "generator_saturated": Filled("1 when the generator's CPU reached "
                                          "verdicts.GENERATOR_BOUND_CPU ({GENERATOR_BOUND_CPU:.0%}) "
                                          "of its cores, bound or not."),
            "gen_onset_util": "The generator's calibrated drift onset (share of its CPU) used for "
                              "the influence flag; empty: no drift seen, or not calibrated.",
            "headline": "1 (or empty, for points from before the flag) when the point is its "
                        "level's headline; 0 when a confirming generator re-measured the level.",
            "replaced_by": "The generator that re-measured this level (sweep's confirm), else empty.",
            "replaced_generator": "On a confirming point: the generator whose point it replaces.",
            "replaced_rps": "On a confirming point: the replaced point's rps.",
            "replaced_p99_ms": "On a confirming point: the replaced point's p99, ms.",
            "replaced_gen_cpu_pct": "On a confirming point: the replaced generator's CPU, percent "
                                    "of one core.",
            "replaced_reason": "On a confirming point: why the replaced point was flagged.",
            "cpu_span_s": "The span CPU shares are averaged over, s (at least the window).",
            "time_spawn_s": "Level timing: from the generator's launch until its last user ran, s.",
            "time_startup_s": "Level timing: the start-up allowance the window waited for, s.",
            "time_warmup_s": "Level timing: the warm-up, s.",
            "time_window_s": "Level timing: the measurement window, s.",
            "time_drain_s": "Level timing: after the window closed, until the server had answered the "
                            "last request in flight (the server's time: a stalled request holds it), s.",
            "time_shutdown_s": "Level timing: the generator's exit after the window closed and its last "
                               "request in flight was answered (before time_drain_s: from the close), s.",
            "time_merge_s": "Level timing: reading and merging the generator's files, s.",
            "time_level_s": "Level timing: the whole level, launch to merged, s.",
            "time_counts_s": "Point timing: counting rows before and after (the audit), s.",
            "time_cache_s": "Point timing: the page-cache probes (fincore) before and after, s.",
            "time_pause_s": "Point timing: the pause after the level (none after a server's last), s.",
            "time_point_s": "Point timing: the whole point, counts to pause, s.",
            "time_probe_s": "Point timing: the cores' speed probes before and after the window, s.",
            "round": "Which round of the sweep measured it (sweep's `rounds`: each round every stack, "
                     "profile and level once, in an order shuffled per round; 1 in a sweep of one).",
            "probe_server_before_ms": "The server core's speed just before the window: ms a fixed "
                                      "piece of CPU work took on its first CPU (sqlitelab.core.probe); "
                                      "empty where the server was not pinned.",
            "probe_server_after_ms": "The same just after the window.",
            "probe_generator_before_ms": "The generator core's speed just before the window (the "
                                         "same probe on its first CPU).",
            "probe_generator_after_ms": "The same just after the window.",
            "core_slowdown": "The slower of the server core's two probes over the fastest probe of "
                             "its sweep on that core (1: as fast as the sweep's best minute).",
            "outlasted": "1 when a request outlasted the window (its slowest answer, or the server's "
                         "answer to what was in flight at the close, took the whole window or longer: "
                         "a stall longer than the window, whose rate is what the stall let through; "
                         "verdicts.outlasted); empty in open loop.",
            "core_slowed": "1 when core_slowdown was above probe.SLOWED (1.25): the machine's speed, "
                           "not the server, may have set the point's pace.",
            "server_cpu_cap": "The share of its CPUs the server was held to (a cgroup's CPU quota: "
                              "the lab's injected slowdown); empty: not held.",
            "open_loop": "1: requests were due on a schedule whatever the server answered (open loop, "
                         "`rate`), latencies and percentiles from each request's due time; 0: closed loop.",
            "rate": "Open loop: the requests/s the sweep offered (over every generator process); "
                    "empty in closed loop.",
            "arrivals": "Open loop: constant (even spacing) or poisson arrivals.",
            "offered": "Open loop: requests due in the window.",
            "offered_rps": "Open loop: requests due in the window per second of it (the offered load).",
            "late": "Open loop: requests of the window sent more than 5 ms after they were due (every "
                    "user busy, or the generator behind); their wait is in their latency.",
            "max_lag_ms": "Open loop: the longest a request of the window waited past its due time to be sent, ms.",
            "backlog": "Open loop: requests due before the window closed that were never sent (0: the "
                       "server kept up).",
            "operation": "The operation run during the level (sqlitelab.infra.operations), empty for none.",
            "operation_started_s": "When the operation started, seconds after the window opened.",
            "operation_seconds": "How long the operation took, s.",
            "operation_result": "What the operation reported (JSON: its timing, sizes and details; `copies`: each copy it made, with its size, integrity_check, whether it was verified and whether it was kept — removed once verified unless keep_copies).",
        },
    },
    "seconds": {
        "description": "Every point's window second by second (driver.series): completions, errors, "
                       "late sends, the second's own percentiles, and the server's CPU, RSS and WAL. "
                       "Join to points on run_id, server, profile, scenario, users, rate, repeat, generator.",
        "columns": {
            **_shared(*DESCRIBED),
            **_shared("run_id", "server", "profile", "scenario", "users", "repeat", "generator"),
            "database": "sqlite, or postgres.",
            "rate": "Open loop: the rate offered, requests/s (empty: closed loop).",
            "headline": "1 when the point is a headline point (not replaced by a confirmation).",
            "operation": "The operation run during the level, empty for none.",
            "operation_started_s": "When the operation started, seconds after the window opened.",
            "operation_seconds": "How long the operation took, s.",
            "second": "Seconds since the window opened (0, 1, ...).",
            "t": "The second's start, epoch seconds.",
            "span_s": "Its length, s (the window's last second may be partial).",
            "completed": "Requests of the window that finished in this second.",
            "errors": "Those that failed (any kind).",
            "failures": "Failures by kind (JSON).",
            "late": "Open loop: those sent more than 5 ms after they were due.",
            "p50_ms": "Median latency of the second's requests, ms (open loop: from due time).",
            "p99_ms": "p99 of the second's requests, ms (open loop: from due time).",
            "max_ms": "Slowest request of the second, ms.",
            "server_cpu_pct": "Server CPU over the second, % of one core (its samples bracketing it).",
            "server_rss_mb": "Server resident memory, peak sampled in the second, MiB.",
            "wal_bytes": "The SQLite WAL file's size, largest sampled in the second, bytes (empty: "
                         "Postgres, or a server on another host).",
        },
    },
    "noise": {
        "description": "This machine's run-to-run spread per scenario family and metric "
                       "(sqlitelab.experiments.noise, `python -m sqlitelab.compare --noise`): one level "
                       "measured by several sweeps back to back; a comparison of two runs takes its "
                       "noise band from here where a point has no repeats (sqlitelab.report.compare).",
        "columns": {
            **_shared("machine", "notebook_run", "server", "profile", "scenario", "users", "generator"),
            "family": "The scenario family (scenarios.toml's `family`: no-database, reads, writes, mix).",
            "metric": "rps or p99_ms.",
            "spread": "(max − min) / mean of the metric over the runs.",
            "runs": "How many sweeps measured it (each a fresh copy of the file and fresh starts).",
            "mean": "The metric's mean over the runs.",
            "duration_s": "Each run's window, s.",
            "measured": "When (UTC, ISO 8601).",
            "values": "The metric in each run (JSON list).",
            "how": "How the spread was made, in words.",
        },
    },
    "power": {
        "description": "The lab's power on this machine (sqlitelab.report.power, `python -m "
                       "sqlitelab.compare --power NN`): a notebook run three times, the third with "
                       "every server held back; per check and metric, the share of points `compare` "
                       "judged as it should (A/A: within noise; held back: slower).",
        "columns": {
            **_shared("machine", "notebook", "scale"),
            "check": "aa (the same code twice: every point should be within noise) or held (the second "
                     "run's servers held to `cap` of their CPUs: every point should be slower).",
            "metric": "rps or p99_ms.",
            "cap": "held: the share of its CPUs every server of the second run was held to.",
            "points": "aa: points both runs have; held: those of them the hold slows (the unheld "
                      "server used more CPU than the cap leaves, by enough to lose half the injected "
                      "share: report.power.slowed_points).",
            "wanted": "The verdict each point should get.",
            "hits": "Points that got it.",
            "share": "hits / points.",
            "goal": "The share the lab aims for: 95 % within noise, 90 % flagged.",
            "verdicts": "Every verdict and its count (JSON).",
            "band": "The band of a point with no spread of its own: the A/A pair's points' scatter "
                    "(compare.own_band; the held pair is judged against it, and so is any comparison "
                    "on this machine, notebook and scale: compare.aa_band_of).",
            "band_from": "Where the noise bands came from, and how many points each (JSON).",
            "others": "held: the points the hold does not slow (their servers not busy enough to meet it).",
            "others_within": "held: how many of those compare judged within noise.",
            "run_ratio": "The run as a whole: the median of the points' ratios (b / a).",
            "run_low": "Its 95 % interval's low end (order statistics: intervals.median_interval).",
            "run_high": "Its high end.",
            "run_verdict": "What compare said of the run as a whole (within noise, faster, slower).",
            "run_right": "1 when that is the verdict the check wants.",
            "interleaved": "1 when the three runs took turns server by server (sqlitelab.core.turns: a slow "
                           "minute falls on all three), 0 or empty when they ran one after the other.",
            "parameters": "The notebook parameters the three runs were given (`-p` NAME VALUE pairs as "
                          "typed, JSON; {}: none).",
            "in_rounds": "Of `points`, those judged by their ratio's 95 % interval over interleaved "
                         "rounds (both runs measured them in compare.ROUNDS rounds or more: `-p rounds N`); "
                         "the others by a band.",
            "run_a": "The first run compared (its notebook run id, in the power folder's results.db).",
            "run_b": "The second run compared.",
            "measured": "When (UTC, ISO 8601).",
        },
    },
    "crosschecks": {
        "description": "One point of a reference client — wrk, or an article's own tool, hey or "
                       "oha (`generator`) — per server, profile and cross-checked level of a sweep "
                       "(sweep's crosscheck), audited like any write; analysis.crosscheck_table "
                       "shows it beside the lab's generators.",
        "audited": ("server", "profile", "scenario", "users", "acked_responses",
                    "unknown_outcomes", "rows_written", "integrity"),
        "columns": {
            **_shared(*DESCRIBED),
            **_shared("run_id", "server", "profile", "machine", "scenario", "users", "skipped",
                      "generator", "threads", "window_s", "requests", "rps", "mean_ms", "p50_ms",
                      "p90_ms", "p95_ms", "p99_ms", "p999_ms", "max_ms", "timeouts", "errors",
                      "bytes_per_s", "gen_cpu_pct", "gen_cpus", "server_cpu_pct",
                      "generator_pinning", "rows_written", "audit_rule", "audit_ok", "integrity"),
            "status_errors": "Non-2xx/3xx responses.",
            "socket_errors": "Connect, read and write errors.",
            "ok_responses": "2xx and 3xx responses in the measured run.",
            "acked_responses": "2xx and 3xx responses of the warm-up and measured runs: the writes "
                               "the client saw acknowledged.",
            "unknown_outcomes": "Requests whose outcome the client never learnt (in flight at a "
                                "run's stop — wrk drops them, oha aborts them, hey waits for them — "
                                "or failed on the socket or by timeout after being sent).",
            "duration_s": "The client's measured run, s (hey and oha: warm-up and window in one "
                          "run, as the articles ran them).",
            "warmup_s": "wrk's unmeasured warm-up run before it, s (hey, oha: 0).",
        },
    },
    "calibrations": {
        "description": "One row per calibration of a generator against wrk on this machine "
                       "(sqlitelab.load.calibrate): its /hello ceiling and the CPU share from which "
                       "its rate or p99 drifts from wrk's.",
        "columns": {
            **_shared("calib_id", "generator", "machine", "method", "started", "finished",
                      "git_commit", "server_pinning", "generator_pinning", "lock_hash", "lock_ok",
                      "lock_drift"),
            "version": "What the calibration holds for: Locust's version + the locustfile's hash, or "
                       "loadgen's source hash.",
            "reference": "The reference client's version (wrk).",
            "target": "The server measured against (the fastest compiled stack on /hello).",
            "target_choice": "wrk's /hello rate per candidate stack, when it was chosen here (JSON).",
            "delay_ms": "The delay endpoint's wait, ms.",
            "tolerance": "A level drifts when its rate is more than this share below wrk's.",
            "p99_tolerance": "… or its p99 more than this share above wrk's.",
            "onset_util": "Drift onset: the generator's CPU share (0–1) from which every level "
                          "drifts; empty: none drifts.",
            "max_clean_util": "Highest generator CPU share of a level that did not drift.",
            "max_clean_rps": "Highest rate of a level that did not drift.",
            "hello_rps": "The generator's rate on GET /hello at 64 users.",
            "hello_wrk_rps": "wrk's rate on the same.",
            "hello_ratio": "hello_rps / hello_wrk_rps.",
            "hello_gen_util": "The generator's CPU share on /hello.",
            "delay_levels": "Levels measured on the delay endpoint.",
        },
    },
    "calibration_points": {
        "description": "The levels of each calibration: the generator and wrk in turn on the same "
                       "server, and how far the generator drifts from wrk.",
        "columns": {
            **_shared("calib_id", "generator", "users", "rps", "p50_ms", "p99_ms", "errors",
                      "gen_cpu_pct", "server_cpu_pct", "generator_bound"),
            "endpoint": "hello (the ceiling) or delay (GET /delay/<delay_ms>).",
            "gen_util": "The generator's CPU as a share of its cores (0–1).",
            "wrk_rps": "wrk's rate at the same level.",
            "wrk_p50_ms": "wrk's median latency, ms.",
            "wrk_p99_ms": "wrk's p99 latency, ms.",
            "wrk_errors": "wrk's failed requests.",
            "wrk_cpu_pct": "wrk's CPU, percent of one core.",
            "wrk_server_cpu_pct": "The server's CPU under wrk, percent of one core.",
            "rps_ratio": "rps / wrk_rps.",
            "p99_ratio": "p99_ms / wrk_p99_ms.",
            "p50_added_ms": "p50_ms − wrk_p50_ms.",
            "p99_added_ms": "p99_ms − wrk_p99_ms.",
            "drift": "1 when the level drifts (calibrate.drift: rate or p99 beyond the tolerances).",
        },
    },
    "generator_comparison": {
        "description": "wrk, loadgen and Locust on the same level, each on a fresh database and "
                       "server, in shuffled order (python -m sqlitelab.calibrate compare).",
        "columns": {
            **_shared(*DESCRIBED),
            **_shared("run_id", "server", "generator", "repeat", "scenario", "users", "rps",
                      "p50_ms", "p99_ms", "errors", "gen_cpu_pct", "server_cpu_pct",
                      "server_util", "generator_bound", "generator_influenced", "influence"),
            "order": "Position in the shuffled run order (from 1).",
            "processes": "Server processes (from /health knobs).",
            "threads": "Threads per server process (from /health knobs).",
        },
    },
    "buffer_points": {
        "description": "Notebook 04 (seed 003, SQLite as a write buffer): one row per point, each "
                       "in a fresh process — the author's method, its one-change variants and the "
                       "lab's writer (sqlitelab.experiments.buffer).",
        "audited": ("method", "variant", "rows_per_txn", "synchronous", "total", "repeat",
                    "rows", "rows_expected", "records_in_payloads", "journal_mode"),
        "columns": {
            **_shared(*DESCRIBED),
            **_shared("run_id", "method", "variant", "rows_per_txn", "synchronous", "total",
                      "repeat", "seconds", "records_per_s", "db_mib", "audit_ok", "skipped",
                      "machine", "started", "groups", "close_checkpoints", "auto_checkpoints",
                      "sqlite_version", "rows", "rows_expected", "records_in_payloads"),
            "records_per_row": "Records serialised into one row's JSON payload (the article: 1,000).",
            "peak_rss_mib": "Peak resident memory of the point's process, MiB.",
            "synchronous_requested": "The synchronous level asked for (tuned), empty for the "
                                     "article's default.",
            "projected_peak_gib": "Memory the point was projected to need before it ran, GiB.",
            "projected_disk_gib": "Disk it was projected to need, GiB.",
            "mem_available_gib": "Memory available when it was planned, GiB.",
            "db_bytes": "db + -wal + -shm, bytes.",
            "wal_mib": "The -wal file at the end, MiB.",
            "wal_max_mib": "Largest -wal file seen during the point, MiB.",
            "page_size": "PRAGMA page_size read back on the writing connection.",
            "synchronous_level": "PRAGMA synchronous as a number (0 off, 1 normal, 2 full, 3 extra).",
            "serialise_seconds": "Timed seconds building the rows (json.dumps of each chunk).",
            "write_seconds": "Timed seconds writing them.",
            "close_seconds": "Timed seconds closing the last connection.",
            "connections": "Connections opened inside the timing.",
            "group_ms_median": "Median time of one transaction, ms.",
            "group_ms_max": "Slowest transaction, ms.",
            "probe_seconds": "Time spent probing the -wal/-shm files, s (excluded from seconds).",
            "gc_collections": "Cyclic-GC collections inside the timing.",
            "gc_full_collections": "Of which full (generation 2).",
            "gc_seconds": "Seconds the GC took inside the timing.",
            "timed_cpu_seconds": "CPU seconds (user + system) of the timed part.",
            "timed_minor_faults": "Minor page faults in the timed part.",
            "timed_voluntary_switches": "Voluntary context switches in the timed part (waits, e.g. fsync).",
            "generate_seconds": "Untimed seconds generating the records.",
            "rss_start_mib": "RSS of the point's process at its start, MiB.",
            "rss_before_gen_mib": "RSS before generating the records, MiB.",
            "rss_after_gen_mib": "RSS after generating them, MiB.",
            "records_bytes_per_record": "Memory the generated records hold, bytes per record.",
            "peak_bytes_per_record": "Peak memory above the start, bytes per record.",
            "journal_mode": "PRAGMA journal_mode read back after the point (should be wal).",
            "python": "Python version of the point's process.",
            "loadavg_start": "1-minute load average when the point started.",
            "loadavg_end": "1-minute load average when it ended.",
            "error": "Why the point failed (timeout, memory, crash), else empty.",
            "consumed": "Records the consumer read back (tuned, with consume).",
            "consume_seconds": "Seconds the consumer took.",
            "consume_records_per_s": "Records consumed per second.",
            "rows_left": "Rows left in the queue after the consumer (should be 0).",
            "audit_seconds": "Seconds the audit of the rows took (after the timing).",
            "worker_seconds": "Seconds the point's process spent measuring (start to result).",
            "process_start_seconds": "Start-up of the point's fresh process (a new interpreter "
                                     "importing sqlitelab.experiments.buffer_point), s.",
            "process_seconds": "The point's process from launch to result, s.",
            "remove_seconds": "Removing the point's database files afterwards, s.",
            "point_wall_seconds": "The whole point in the sweep, launch to files removed, s.",
        },
    },
    "ceilings": {
        "description": "The raw-SQLite ceiling a notebook run measured on its server's core, "
                       "without HTTP (baseline.ceiling): one-row write transactions per second at "
                       "NORMAL and at FULL, primary-key point reads per second, through Python's "
                       "sqlite3, and the disk's fsync and fdatasync rates — what notebooks 01 and "
                       "05 compare their servers with.",
        "columns": {
            **_shared(*DESCRIBED),
            **_shared("run_id", "sqlite_version", "synchronous"),
            "commits_per_s": "BEGIN IMMEDIATE; INSERT one row; COMMIT — per second (WAL, "
                             "synchronous NORMAL).",
            "full_commits_per_s": "The same at synchronous FULL (every commit waits for an fsync of "
                                  "the WAL: the drivers' default).",
            "fsync_per_s": "fsync calls per second after an 8 KiB write, on the file system of the "
                           "sweeps' databases (pg_test_fsync's way; baseline.disk_syncs).",
            "fdatasync_per_s": "The same with fdatasync (what SQLite calls on Linux).",
            "reads_per_s": "SELECT of one row by primary key — per second.",
            "rows": "Rows the commit half wrote (the table the read half reads).",
            "cpus": "CPU list the measuring process was pinned to (the server's), or empty.",
            "seconds": "Seconds of each half (the notebook's ceiling_seconds; the sync loops half that).",
        },
    },
    "cuts": {
        "description": "Notebook 12: one power cut each (sqlitelab.experiments.power_cut) — a server "
                       "writing under load to a file on the lab's lazy filesystem (sqlitelab.infra.lazyfs), "
                       "the power cut at a drawn moment, and what the file then held against every write "
                       "the server had acknowledged.",
        "columns": {
            **_shared(*DESCRIBED),
            **_shared("run_id", "server", "users", "synchronous", "integrity"),
            "round": "Which round of the cuts it was (each round cuts every stack, write path, mode and level once).",
            "write_path": "How the server writes: pool, writer (a single writer thread) or batch "
                          "(group commit).",
            "mode": "The journal and synchronous setting, e.g. wal-normal (journal_mode=wal, synchronous=normal).",
            "journal": "PRAGMA journal_mode of the file: wal or delete (the rollback journal).",
            "seed": "The cut's own seed (its moment, and the dirty pages a partial write-back keeps).",
            "writeback": "The share of dirty pages the cut wrote back (0: none, the worst case).",
            "cut_after_s": "Seconds from the load's start to the cut.",
            "acked": "Writes the server answered 201 before the server was gone (the ledger).",
            "acked_after_cut": "Of them, answers that arrived after the cut's moment (committed before it).",
            "acked_per_s": "Acknowledged writes per second on the mount up to the cut (its rate, not a "
                           "throughput: the mount answers from one Python thread).",
            "other_answers": "Answers other than 201.",
            "failed_requests": "Requests that got no answer (the cut among them).",
            "readable": "1 when SQLite could read the file the cut left.",
            "rows": "Items in the file after the cut (its WAL recovered, as a restart would).",
            "lost": "Acknowledged writes the file does not hold.",
            "kept": "Acknowledged writes it holds.",
            "unacked_rows": "Rows it holds that no client was told of (committed, the answer cut off).",
            "lost_seconds": "Seconds of acknowledged writes lost: from the oldest lost acknowledgement to the cut.",
            "restarted": "1 when the server started again on the file (on the real disk) and took a write.",
            "restart_error": "Why it did not, in one line.",
            "lost_span_s": "Seconds between the first and the last answer of the writes lost (empty: none lost).",
            "rate": "The writes per second the writers offered together at most (empty: each wrote as soon "
                    "as it was answered).",
            "checkpoint": "PRAGMA wal_autocheckpoint, pages (empty: SQLite's default, 1,000; WAL modes only).",
            "replica": "1 when Litestream replicated the file to the real disk during the load (cut with the "
                       "server); its replica was then restored and audited.",
            "replica_lost": "Acknowledged writes the restored replica does not hold (its recovery point).",
            "replica_lost_seconds": "Seconds of acknowledged writes the replica lost, as `lost_seconds`.",
            "replica_integrity": "`PRAGMA integrity_check` of the restored replica.",
            "replica_error": "Why nothing could be restored, in one line.",
        },
    },
    "buffer_slow_sync": {
        "description": "Notebook 04: the author's method on emulated slow storage — every "
                       "fsync/fdatasync delayed under strace (buffer.syscall_counts) — with the "
                       "system calls each point made.",
        "audited": ("method", "variant", "rows_per_txn", "total", "sync_delay_ms", "rows",
                    "rows_expected", "records_in_payloads"),
        "columns": {
            **_shared(*DESCRIBED),
            **_shared("run_id", "method", "variant", "rows_per_txn", "total", "seconds",
                      "records_per_s", "groups", "close_checkpoints", "auto_checkpoints",
                      "synchronous", "audit_ok", "rows", "rows_expected", "records_in_payloads"),
            "sync_delay_ms": "Delay added to every fsync/fdatasync, ms.",
            "fsync_calls": "fsync calls made by the point's process.",
            "fdatasync_calls": "fdatasync calls.",
            "unlink_calls": "unlink calls (e.g. -wal/-shm deleted at a close).",
            "unlinkat_calls": "unlinkat calls.",
            "ftruncate_calls": "ftruncate calls.",
        },
    },
}


def audited() -> dict[str, tuple[str, ...]]:
    """{table: the columns naming a row whose audit failed}, for every audited table."""
    return {name: t["audited"] for name, t in TABLES.items() if "audited" in t}


def assemble(*parts: dict) -> dict:
    """One point from the parts that measured it — the generator's window (load.merge_level),
    the level around it (run_level: link, hosts, timing), the operation run during it, the
    audit, the server and database it ran on, the verdicts and the sweep's timing
    (sweep._one_scenario's `measure`). Each column comes from one part: a column two parts
    both set is an error, never a silent overwrite. (What is known only later is set by name
    afterwards: the file's `integrity` after its last scenario, `headline` and the influence
    after the cross-check and the confirmation, the run's identity columns when it is stored.)"""
    out: dict = {}
    for part in parts:
        both = out.keys() & part.keys()
        if both:
            raise ValueError(f"a point's column set by two of its parts: {', '.join(sorted(both))}")
        out.update(part)
    return out
