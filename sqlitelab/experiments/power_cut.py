"""What a power cut takes: a server writing to a SQLite file on the lazy filesystem
(sqlitelab.infra.lazyfs), the power cut at a random moment under load, and what the file holds
afterwards against every write the server acknowledged.

    rows = power_cut.cuts(stacks, write_paths, modes, levels, rounds, seconds, seed=...)

One cut: a fresh file (its schema, its journal mode set on the real disk before the mount, as a
deployed file has it) under a fresh mount; the server started on the mount with the mode's
pragmas and the write path; `users` client threads POST /items on keep-alive connections, each
201's id and time kept (the ledger); at a moment drawn from the round's seed the power goes
(`Mount.cut`: nothing more is written back, the server and the mount are gone). Then, on the
real disk: `PRAGMA integrity_check` of the file as the cut left it, the acknowledged ids that
are not in it (lost, and the seconds of acknowledged writes they span), and whether the server
starts again on the file and takes a write.

The throughput each mode buys is measured apart, on the real disk, by the lab's sweep (the
notebook's); the mount serves every operation from one Python thread and is no measure of speed.
"""
from __future__ import annotations

import http.client
import json
import random
import shutil
import sqlite3
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pandas as pd

from sqlitelab.core import config, processes, results
from sqlitelab.core.vocabulary import JOURNAL_MODES as JOURNALS, SYNCHRONOUS
from sqlitelab.infra import databases, lazyfs, operations, servers

SYNCHRONOUS_MODES = tuple(SYNCHRONOUS.values())  # weakest first
WRITE_PATHS = tuple(servers.KNOBS["write_path"]["values"])
PROFILE = "rails71"       # the stacks' base knobs: a pool, deferred transactions, busy_timeout 5000 ms
PAYLOAD_BYTES = 512       # each write's payload: one row, several of them to a 4-KiB page
START_TIMEOUT_S = 60.0    # a server's start on the mount (Ruby's Rails loads for seconds)
WRITE_TIMEOUT_S = 5.0     # one request's answer; a stalled writer is a lost ack, never a hang
REPLICA_START_S = 15.0    # Litestream's first snapshot of the file, before any load
SETTLE_S = 0.2            # load before the cut's window opens: the server's connections warmed


def mode(journal: str, synchronous: str) -> str:
    """A mode's name, e.g. "wal-normal": journal_mode and synchronous; either unknown is refused."""
    if journal not in JOURNALS:
        raise ValueError(f"journal must be one of {', '.join(JOURNALS)}, not {journal!r}")
    if synchronous not in SYNCHRONOUS_MODES:
        raise ValueError(f"synchronous must be one of {', '.join(SYNCHRONOUS_MODES)}, not {synchronous!r}")
    return f"{journal}-{synchronous}"


def parse_mode(name: str) -> tuple[str, str]:
    """"wal-normal" -> ("wal", "normal"); anything else is refused in one line."""
    journal, _, synchronous = str(name).partition("-")
    mode(journal, synchronous)
    return journal, synchronous


def pragmas(name: str, checkpoint: int | None = None) -> str:
    """LAB_PRAGMAS of a mode: the profile's pragmas with its journal mode and synchronous, and
    `checkpoint` as wal_autocheckpoint (None: SQLite's default, 1,000 pages)."""
    journal, synchronous = parse_mode(name)
    extra = {} if checkpoint is None else {"wal_autocheckpoint": int(checkpoint)}
    return servers.pragmas_with(PROFILE, journal_mode=journal, synchronous=synchronous, **extra)


class Ledger:
    """What the clients were told: every acknowledged id with the moment of its 201, and every
    other answer counted."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acked: dict[int, float] = {}
        self.other = 0
        self.failed = 0


def _writer(host: str, port: int, ledger: Ledger, stop: threading.Event, deadline: float,
            interval: float = 0.0) -> None:
    """POST /items on one keep-alive connection until stopped or the deadline, one request every
    `interval` seconds at most (0: each as soon as the last is answered); every 201's id goes
    into the ledger with its time."""
    body = json.dumps({"payload": "p" * PAYLOAD_BYTES}).encode()
    conn = None
    due = time.monotonic()
    while not stop.is_set() and time.monotonic() < deadline:
        if interval:
            due += interval
            wait = due - time.monotonic()
            if wait > 0 and stop.wait(wait):
                break
        try:
            if conn is None:
                conn = http.client.HTTPConnection(host, port, timeout=WRITE_TIMEOUT_S)
            conn.request("POST", "/items", body=body, headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            answer = r.read()
            at = time.monotonic()
        except (OSError, http.client.HTTPException):
            if conn is not None:
                conn.close()
                conn = None
            with ledger.lock:
                ledger.failed += 1
            time.sleep(0.01)
            continue
        with ledger.lock:
            if r.status == 201:
                ledger.acked[int(json.loads(answer)["id"])] = at
            else:
                ledger.other += 1
    if conn is not None:
        conn.close()


def fresh_file(path: Path, journal: str) -> Path:
    """A file with the lab's schema and no rows, in `journal` mode, written to the real disk (a
    WAL file's mode is in its header: set before the mount, as a deployed file has it)."""
    databases.prepare_database(path)
    con = sqlite3.connect(path)
    try:
        con.execute(f"PRAGMA journal_mode={journal}").fetchone()
    finally:
        con.close()
    for suffix in ("-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    return path


def audit(path: Path, acked: dict[int, float], cut_at: float) -> dict:
    """What the file the cut left holds (a copy of it, opened read-write so that a WAL is
    recovered, or a hot journal rolled back, as a restart would): its integrity, the acknowledged
    ids it lacks, and the seconds of acknowledged writes they span (from the oldest lost
    acknowledgement to the cut; 0 when each answer came as the power went), and between the
    first and the last lost answer (`lost_span_s`)."""
    copy = path.parent / "audit" / path.name
    copy.parent.mkdir(exist_ok=True)
    for suffix in ("", "-wal", "-journal"):
        src = Path(str(path) + suffix)
        if src.exists():
            shutil.copyfile(src, str(copy) + suffix)
    con = sqlite3.connect(copy)
    try:
        integrity = ";".join(r[0] for r in con.execute("PRAGMA integrity_check"))[:500]
        ids = {r[0] for r in con.execute("SELECT id FROM items")}
        readable = True
    except sqlite3.DatabaseError as e:  # not a database any more: nothing of it can be read
        integrity, ids, readable = f"unreadable: {e}", set(), False
    finally:
        con.close()
    lost = [i for i in acked if i not in ids]
    oldest = min((acked[i] for i in lost), default=None)
    newest = max((acked[i] for i in lost), default=None)
    return {"integrity": integrity, "readable": readable, "rows": len(ids),
            "lost": len(lost), "kept": len(acked) - len(lost),
            "unacked_rows": len(ids - set(acked)),
            "lost_seconds": round(max(0.0, cut_at - oldest), 4) if oldest is not None else 0.0,
            "lost_span_s": round(newest - oldest, 4) if lost else None}


def restarts(stack: str, path: Path, knobs: dict, log: Path) -> tuple[bool, str]:
    """Whether the server starts on the file the cut left (on the real disk) and takes a write;
    with the reason when it does not."""
    try:
        with servers.start_server(stack, path, profile=PROFILE, log_path=log, timeout=START_TIMEOUT_S,
                                  **knobs) as srv:
            conn = http.client.HTTPConnection(srv.host, srv.port, timeout=WRITE_TIMEOUT_S)
            try:
                conn.request("POST", "/items", body=json.dumps({"payload": "after"}).encode(),
                             headers={"Content-Type": "application/json"})
                r = conn.getresponse()
                r.read()
            finally:
                conn.close()
            return (r.status == 201, "" if r.status == 201 else f"a write after the restart answered {r.status}")
    except (servers.ServerStartError, OSError, http.client.HTTPException) as e:
        lines = [line for line in str(e).splitlines() if line.strip()]
        return False, " | ".join(lines[:1] + lines[-1:] if len(lines) > 1 else lines)[:400]  # what, and its log's last word


def replicate(db: Path, replica: Path, log: Path):
    """Litestream replicating `db` (on the mount) to a file replica on the real disk — another
    machine's disk, which the cut leaves — with its defaults (a sync of the WAL every second):
    its process, started to die with this one."""
    if not operations.LITESTREAM.exists():
        raise RuntimeError(f"litestream is not built ({operations.LITESTREAM}): run make setup")
    with open(log, "wb") as out:
        proc = processes.spawn([str(operations.LITESTREAM), "replicate", str(db), f"file://{replica}"],
                               "litestream", stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + REPLICA_START_S  # its first snapshot, before the load (as deployed)
    while not any(replica.glob("generations/*/snapshots/*")):
        if proc.poll() is not None or time.monotonic() > deadline:
            processes.stop(proc)
            raise RuntimeError(f"litestream made no snapshot of {db} within {REPLICA_START_S:g} s: "
                               + " | ".join(log.read_text(errors="replace").strip().splitlines()[-2:]))
        time.sleep(0.05)
    return proc


def restored(replica: Path, into: Path, log: Path, acked: dict[int, float], cut_at: float) -> dict:
    """The replica restored after the cut (`litestream restore`) and audited against the ledger:
    what the replica lost (its recovery point), or why nothing could be restored."""
    with open(log, "ab") as out:
        r = subprocess.run([str(operations.LITESTREAM), "restore", "-o", str(into), f"file://{replica}"],
                           stdout=out, stderr=subprocess.STDOUT, timeout=120)
    if r.returncode != 0 or not into.exists():
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] or [""]
        return {"replica_lost": len(acked), "replica_lost_seconds": None, "replica_integrity": None,
                "replica_error": f"litestream restore exited {r.returncode}: {tail[0][:200]}"}
    found = audit(into, acked, cut_at)
    return {"replica_lost": found["lost"], "replica_lost_seconds": found["lost_seconds"],
            "replica_integrity": found["integrity"], "replica_error": ""}


def cut_once(stack: str, write_path: str, name: str, users: int, window: tuple[float, float], seed: int,
             work: Path, *, writeback: float = 0.0, ignore_fsync: bool = False, replica: bool = False,
             rate: float | None = None, checkpoint: int | None = None) -> dict:
    """One cut (the module's doc): the row of what it found. `ignore_fsync`: the mount keeps
    nothing a client syncs (a broken filesystem: what the audit must catch). `replica` (WAL
    only): Litestream replicates the file to the real disk during the load, is cut with the
    server, and its replica is restored and audited too. `rate`: the writes per second the
    `users` threads offer together at most (None: each writes as soon as it is answered).
    `checkpoint`: wal_autocheckpoint in pages (None: SQLite's default)."""
    journal, synchronous = parse_mode(name)
    if replica and journal != "wal":
        raise ValueError(f"Litestream replicates a WAL database, not {name!r}")
    rng = random.Random(seed)
    after = rng.uniform(*window)
    disk, mnt = work / "disk", work / "mnt"
    shutil.rmtree(work, ignore_errors=True)
    disk.mkdir(parents=True)
    db = fresh_file(disk / "lab.db", journal)
    knobs = {"pragmas": pragmas(name, checkpoint), "write_path": write_path}
    ledger, stop = Ledger(), threading.Event()
    with lazyfs.Mount(disk, mnt, writeback=writeback, seed=seed, ignore_fsync=ignore_fsync) as m:
        srv = servers.start_server(stack, mnt / "lab.db", profile=PROFILE, log_path=work / "server.log",
                                   timeout=START_TIMEOUT_S, **knobs)
        stream = replicate(mnt / "lab.db", work / "replica", work / "litestream.log") if replica else None
        try:
            deadline = time.monotonic() + SETTLE_S + window[1] + 10
            interval = users / rate if rate else 0.0
            threads = [threading.Thread(target=_writer, args=(srv.host, srv.port, ledger, stop, deadline, interval),
                                        daemon=True) for _ in range(users)]
            t0 = time.monotonic()
            for t in threads:
                t.start()
            time.sleep(SETTLE_S + after)
            cut_at = m.cut(clients=[srv.pid] + ([stream.pid] if stream else []))
        finally:
            stop.set()
            srv.stop()
            if stream is not None:
                processes.stop(stream)
        for t in threads:
            t.join(WRITE_TIMEOUT_S + 1)
    with ledger.lock:
        acked = dict(ledger.acked)
        other, failed = ledger.other, ledger.failed
    found = audit(db, acked, cut_at)
    if stream is not None:
        found.update(restored(work / "replica", work / "restored.db", work / "litestream.log", acked, cut_at))
    ok, why = restarts(stack, db, knobs, work / "restart.log")
    return cut_row(stack, write_path, name, users, seed, writeback, cut_at - t0, acked, cut_at,
                   other, failed, found, ok, why, replica=replica, rate=rate, checkpoint=checkpoint)


def cut_row(stack: str, write_path: str, name: str, users: int, seed: int, writeback: float,
            after_s: float, acked: dict[int, float], cut_at: float, other: int, failed: int,
            found: dict, restarted: bool, restart_error: str, *, replica: bool = False,
            rate: float | None = None, checkpoint: int | None = None) -> dict:
    """A cut's stored row (schema's `cuts`): what was cut, what the ledger says, what the file
    held (audit) and whether the server came back (restarts)."""
    journal, synchronous = parse_mode(name)
    return {"server": stack, "write_path": write_path, "mode": name, "journal": journal,
            "synchronous": synchronous, "users": users, "seed": seed, "writeback": writeback,
            "replica": replica, "rate": rate, "checkpoint": checkpoint,
            "cut_after_s": round(after_s, 3), "acked": len(acked),
            "acked_after_cut": sum(1 for at in acked.values() if at > cut_at),
            "acked_per_s": round(len(acked) / max(after_s, 1e-9), 1),
            "other_answers": other, "failed_requests": failed, **found,
            "restarted": restarted, "restart_error": restart_error}


def plan(stacks, write_paths, modes, levels, rounds: int, *, writebacks=(0.0,), rates=(None,),
         checkpoints=(None,), litestream: bool = False) -> list[dict]:
    """Every cut to make, each a dict of cut_once's settings and its `round`: each stack × write
    path × mode × level × share of dirty pages written back at the cut (`writebacks`: 0, the
    worst case for what is lost; a share between, a torn state for the file's integrity) ×
    offered write rate (`rates`; None: as fast as answered) — a WAL mode's at each
    wal_autocheckpoint of `checkpoints` (None: SQLite's default), and with `litestream` again with
    Litestream replicating — `rounds` times. Anything unknown is refused before any cut."""
    for name in modes:
        parse_mode(name)
    for w in write_paths:
        if w not in WRITE_PATHS:
            raise ValueError(f"write path must be one of {', '.join(WRITE_PATHS)}, not {w!r}")
    for b in writebacks:
        lazyfs.Overlay.check_writeback(b)
    for r in rates:
        if r is not None and not (isinstance(r, (int, float)) and not isinstance(r, bool) and r > 0):
            raise ValueError(f"a rate must be writes per second > 0 (or None: as fast as answered), not {r!r}")
    for c in checkpoints:
        if c is not None and not (isinstance(c, int) and not isinstance(c, bool) and c >= 0):
            raise ValueError(f"a checkpoint must be wal_autocheckpoint pages >= 0 (or None: SQLite's), not {c!r}")
    if not (isinstance(rounds, int) and rounds >= 1):
        raise ValueError(f"rounds must be a whole number from 1, not {rounds!r}")
    out = []
    for r in range(rounds):
        for s in stacks:
            for w in write_paths:
                for m in modes:
                    wal = parse_mode(m)[0] == "wal"
                    for u in levels:
                        for b in writebacks:
                            for rate in rates:
                                for c in (checkpoints if wal else (None,)):
                                    for rep in ((False, True) if litestream and wal else (False,)):
                                        out.append({"stack": s, "write_path": w, "name": m, "users": u,
                                                    "writeback": float(b), "rate": rate, "checkpoint": c,
                                                    "replica": rep, "round": r})
    return out


def cuts(stacks, write_paths, modes, levels, rounds: int, window: tuple[float, float], seed: int,
         *, writebacks=(0.0,), rates=(None,), checkpoints=(None,), litestream: bool = False,
         progress=None) -> list[dict]:
    """Every cut of the plan (`plan`), in an order shuffled by `seed` (so that a slow minute falls
    on no one setting), each with its own seed drawn from it; the rows of what they found."""
    todo = plan(stacks, write_paths, modes, levels, rounds, writebacks=writebacks, rates=rates,
                checkpoints=checkpoints, litestream=litestream)
    lo, hi = window
    if not 0 <= lo <= hi <= 60:
        raise ValueError(f"the cut's window must be 0 <= from <= to <= 60 s, not {window!r}")
    rng = random.Random(seed)
    rng.shuffle(todo)
    rows = []
    config.TMP_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="lab-power-cut-", dir=config.TMP_DIR) as tmp:
        for i, c in enumerate(todo):
            row = cut_once(c["stack"], c["write_path"], c["name"], c["users"], window, rng.randrange(2**31),
                           Path(tmp) / f"cut-{i}", writeback=c["writeback"], replica=c["replica"],
                           rate=c["rate"], checkpoint=c["checkpoint"])
            rows.append({**row, "round": c["round"]})
            if progress:
                progress(i + 1, len(todo), row)
    return rows


def run_cuts(notebook: str, run_id: str, cfg: dict, stacks: list[str], seed: int, parameters: dict) -> pd.DataFrame:
    """The notebook's cuts of `stacks` (and its scale's `write_paths`, `modes`, `levels`,
    `writebacks`, `write_rates`, `checkpoints`, `litestream`, `rounds`, `cut_window`), stored in `cuts` under its run; while a replay is on, the cuts it stored."""
    if results.replaying():
        return results.replayed_table("cuts", "cuts", parameters)
    window = cfg["cut_window"]  # [from, to], checked by the notebook's scale (studies.scales)

    def progress(i, n, row):
        print(f"cut {i}/{n}: {servers.stack_title(row['server'])}, {row['write_path']}, {row['mode']}, "
              f"{row['users']} writers, {row['writeback']:.0%} written back: {row['acked']} acknowledged, "
              f"{row['lost']} lost, "
              f"integrity {row['integrity']}", flush=True)

    rows = cuts(stacks, cfg["write_paths"], cfg["modes"], cfg["levels"], cfg["rounds"],
                (float(window[0]), float(window[1])), seed, writebacks=cfg["writebacks"],
                rates=cfg["write_rates"], checkpoints=cfg["checkpoints"], litestream=cfg["litestream"],
                progress=progress)
    frame = pd.DataFrame(rows)
    results.store_table(run_id, notebook, "cuts", frame, parameters=parameters, experiment="cuts")
    return frame
