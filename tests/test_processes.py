"""Every process the lab starts dies with the process that started it (sqlitelab.core.processes):
on exit, on SIGKILL of the owner (its watchdog), and — when the watchdog was killed too — at
the next sweep (reap_orphans), which never touches a live owner's processes."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from sqlitelab.core import config, processes, results


def owner_script(data_dir: Path, body: str) -> list[str]:
    """A Python process (as a notebook's kernel) with its data in `data_dir`, running `body`."""
    return [sys.executable, "-c", textwrap.dedent(f"""
        import os
        os.environ["LAB_DATA_DIR"] = {str(data_dir)!r}
        from sqlitelab.core import processes
    """) + textwrap.dedent(body)]


def env_for(data_dir: Path) -> dict:
    return {**os.environ, "LAB_DATA_DIR": str(data_dir)}


def records(data_dir: Path) -> list[dict]:
    out = []
    for p in sorted((data_dir / "tmp" / "owners").glob("*.json")):
        try:
            out.append(json.loads(p.read_text()))
        except (OSError, ValueError):
            pass
    return out


def record_of(data_dir: Path, pid: int) -> dict | None:
    return next((r for r in records(data_dir) if r["owner"]["pid"] == pid), None)


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = predicate()
        if got:
            return got
        time.sleep(0.1)
    pytest.fail(f"timed out after {timeout:g} s waiting for {what}")


def lab_processes(record: dict) -> list[psutil.Process]:
    """Every live process of a record's groups (and strays), and its watchdog."""
    groups = {int(k) for k in record["groups"]}
    found = []
    for p in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(p.pid) in groups:
                found.append(p)
        except (ProcessLookupError, psutil.Error, OSError):
            pass
    wd = record.get("watchdog")
    if wd and processes.is_running(wd["pid"], wd["start"]):
        found.append(psutil.Process(wd["pid"]))
    return found


def alive(procs: list[psutil.Process]) -> list[str]:
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(f"{p.pid} {' '.join(p.cmdline()[:4])}")
        except psutil.Error:
            pass
    return out


def table(procs: list[psutil.Process]) -> str:
    return "\n".join("    " + line for line in alive(procs)) or "    (none)"


def kill_all(procs: list[psutil.Process]) -> None:
    for p in procs:
        try:
            p.kill()
        except psutil.Error:
            pass


# --------------------------------------------------------------------------- no server, no load

def test_a_free_port_is_free_and_outside_the_ephemeral_range():
    """Listeners take ports below the range outgoing connections draw from, free when drawn, and
    not the same one time after time (two lab processes at once rarely draw one port)."""
    lo, hi = processes.listen_ports()
    ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    assert hi <= ephemeral and hi - lo >= 1000
    ports = [processes.free_port() for _ in range(20)]
    assert all(lo <= p < hi for p in ports) and len(set(ports)) > 15
    with socket.socket() as taken:  # a port in use is never handed out
        taken.bind(("127.0.0.1", ports[0]))
        taken.listen()
        assert ports[0] not in {processes.free_port() for _ in range(200)}


def test_a_process_is_named_by_pid_and_start_time():
    me = processes.started_at(os.getpid())
    assert me is not None and processes.is_running(os.getpid(), me)
    assert not processes.is_running(os.getpid(), me + 1)  # a reused PID is another process
    sleeper = subprocess.Popen(["sleep", "30"])
    start = processes.started_at(sleeper.pid)
    sleeper.kill()
    sleeper.wait()
    assert processes.started_at(sleeper.pid) is None and not processes.is_running(sleeper.pid, start)
    assert processes.describe(["/usr/bin/taskset", "-c", "0", "/x/servers/go-nethttp/run"]) == "go-nethttp/run"
    assert processes.describe(["/venv/bin/python", "-m", "locust", "-f", "x.py"]) == "locust"


def test_the_record_lists_what_we_started_until_it_is_stopped(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "TMP_DIR", tmp_path / "tmp")
    monkeypatch.setattr(processes, "_OWNER", None)
    folder = tmp_path / "scratch"
    folder.mkdir()
    proc = processes.spawn(["sleep", "30"], "a sleeper")
    try:
        processes.own_path(folder)
        rec = json.loads(processes.owner().path.read_text())
        assert rec["owner"]["pid"] == os.getpid()
        assert rec["groups"][str(proc.pid)]["what"] == "a sleeper"
        assert rec["paths"] == [str(folder)]
        assert processes.is_running(rec["watchdog"]["pid"], rec["watchdog"]["start"])
        assert os.getpgid(proc.pid) == proc.pid  # a session, so a group, of its own
    finally:
        processes.stop(proc, grace=2)
    processes.release_path(folder)
    assert not processes.owner().path.exists()  # nothing left to stop: no record
    assert processes.reap_orphans(tmp_path / "tmp" / "owners") == []
    assert folder.exists()  # a released folder is the caller's


def test_the_watchdog_stops_everything_when_its_owner_is_killed(tmp_path):
    """SIGKILL of the owner (a killed kernel): its watchdog stops what it started, also a
    daemon that left its group, and removes its folders and record."""
    folder = tmp_path / "tmp" / "sweep-x"
    owner = subprocess.Popen(owner_script(tmp_path, f"""
        import subprocess, time
        from pathlib import Path
        Path({str(folder)!r}).mkdir(parents=True)
        processes.own_path({str(folder)!r})
        processes.spawn(["sleep", "300"], "a server")
        # a start command that daemonizes: its child makes a session of its own
        processes.spawn(["sh", "-c", "setsid sleep 301 & wait"], "a daemonizing app")
        print("ready", flush=True)
        time.sleep(300)
    """), stdout=subprocess.PIPE, env=env_for(tmp_path))
    try:
        assert owner.stdout.readline().strip() == b"ready"
        rec = wait_for(lambda: record_of(tmp_path, owner.pid), 10, "the owner's record")
        time.sleep(2 * processes.WATCH_EVERY_S + 0.5)  # the watchdog has seen the daemon
        during = lab_processes(rec)
        daemon = [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == ["sleep", "301"]]
        assert len(daemon) == 1 and os.getpgid(daemon[0].pid) not in {int(k) for k in rec["groups"]}
        print(f"\nduring (owner {owner.pid}):\n{table(during + daemon)}")
        assert len(alive(during)) == 3  # the sleeper, the sh, the watchdog (not the daemon)
        owner.kill()
        owner.wait()
        wait_for(lambda: not alive(during + daemon), 10, "the watchdog to stop everything")
        print(f"after:\n{table(during + daemon)}")
        assert not folder.exists()
        assert record_of(tmp_path, owner.pid) is None
    finally:
        owner.kill()
        owner.wait()
        kill_all(lab_processes(rec) if "rec" in locals() and rec else [])


def test_a_dead_owners_leftovers_are_reaped_and_a_live_owners_never(tmp_path):
    """Owner and watchdog both SIGKILLed: what they left runs on until reap_orphans, which
    leaves alone the record of an owner that is still running."""
    def start_owner(tag: str) -> tuple[subprocess.Popen, dict]:
        proc = subprocess.Popen(owner_script(tmp_path, f"""
            import time
            processes.spawn(["sleep", "300"], "{tag}")
            print("ready", flush=True)
            time.sleep(300)
        """), stdout=subprocess.PIPE, env=env_for(tmp_path))
        assert proc.stdout.readline().strip() == b"ready"
        return proc, wait_for(lambda: record_of(tmp_path, proc.pid), 10, f"{tag}'s record")

    dead, dead_rec = start_owner("left behind")
    live, live_rec = start_owner("still wanted")
    try:
        os.kill(dead_rec["watchdog"]["pid"], signal.SIGKILL)  # the whole tree, watchdog included
        dead.kill()
        dead.wait()
        left = lab_processes(dead_rec)
        time.sleep(1)
        assert alive(left), "nothing was left behind to reap"
        said = processes.reap_orphans(tmp_path / "tmp" / "owners")
        assert len(said) == 1 and "left behind" in said[0] and f"pid {dead.pid}" in said[0], said
        assert not alive(left)
        assert record_of(tmp_path, dead.pid) is None
        assert len(alive(lab_processes(live_rec))) == 2  # its sleeper and its watchdog
        assert record_of(tmp_path, live.pid) is not None
    finally:
        for p in (dead, live):
            p.kill()
            p.wait()
        wait_for(lambda: not alive(lab_processes(live_rec)), 10, "the live owner's watchdog")


# --------------------------------------------------------------------------- real sweeps

SWEEP = """
    import faulthandler, signal, sys
    from sqlitelab.experiments.sweep import sweep
    sweep(notebook="scratch", servers=[{stack!r}], profiles=["rails71"], scenario={scenario!r},
          levels={levels!r}, duration={duration!r}, warmup=0.5, progress=False, calibration=False,
          database={database!r}, generator={generator!r}, run_id={run_id!r})
    print("sweep finished", flush=True)
"""


def start_sweep(data_dir: Path, *, stack="go-nethttp", scenario="rails-writes-noredirect",
                levels=(4,), duration=60, database="sqlite", generator="loadgen", run_id="kill-test",
                log: Path | None = None) -> subprocess.Popen:
    body = SWEEP.format(stack=stack, scenario=scenario, levels=list(levels), duration=duration,
                        database=database, generator=generator, run_id=run_id)
    out = open(log or data_dir / f"{run_id}.log", "wb")
    return subprocess.Popen(owner_script(data_dir, body), stdout=out, stderr=subprocess.STDOUT,
                            env=env_for(data_dir), cwd=config.PROJ_ROOT)


def level_running(data_dir: Path, owner: subprocess.Popen, generator: str = "loadgen") -> dict | None:
    """The owner's record once its generator runs (a level is under way)."""
    rec = record_of(data_dir, owner.pid)
    if rec and any(g["what"].endswith(generator) for g in rec["groups"].values()):
        return rec
    assert owner.poll() is None, f"the sweep ended early ({owner.returncode})"
    return None


@pytest.mark.harness
@pytest.mark.shares_cpus
@pytest.mark.parametrize("database,stack", [("sqlite", "go-nethttp"), ("postgres", "python-fastapi")])
def test_a_killed_kernel_leaves_nothing_running(tmp_path, database, stack):
    """SIGKILL of the process running a sweep, mid-level (Jupyter's restart falling back to a
    kill, the OOM killer): the server, its Postgres cluster and backends, the generator and
    the scratch folders are gone within seconds, by the watchdog alone."""
    before = {p.pid for p in psutil.process_iter()}
    owner = start_sweep(tmp_path, stack=stack, database=database, run_id=f"kill-{database}")
    try:
        rec = wait_for(lambda: level_running(tmp_path, owner), 120, "the level to start")
        time.sleep(1)
        during = lab_processes(rec)
        print(f"\n{database}: before, {len(before)} processes on the machine; during, the sweep's "
              f"(owner {owner.pid}):\n{table(during)}")
        assert len(alive(during)) >= 3
        scratch = [Path(p) for p in rec["paths"]]
        assert scratch and all(p.exists() for p in scratch)
        t = time.monotonic()
        owner.kill()
        owner.wait()
        wait_for(lambda: not alive(during), 20, "every process of the killed sweep to end")
        print(f"after ({time.monotonic() - t:.1f} s):\n{table(during)}")
        new = [p for p in psutil.process_iter(["cmdline"]) if p.pid not in before
               and str(tmp_path) in " ".join(p.info["cmdline"] or [])]
        assert not alive(new), alive(new)
        assert not [p for p in scratch if p.exists()]
        assert record_of(tmp_path, owner.pid) is None
    finally:
        owner.kill()
        owner.wait()
        if "rec" in locals() and rec:
            kill_all(lab_processes(rec))


@pytest.mark.harness
@pytest.mark.shares_cpus
def test_the_next_sweep_cleans_what_a_dead_run_left_and_two_sweeps_leave_each_other_alone(tmp_path):
    """A run orphaned on purpose (the sweep and its watchdog SIGKILLed) leaves its server and
    generator running; the next sweep reaps them and says what it found; a sweep started beside
    that one (a second kernel) leaves it alone, and both finish with every point audited."""
    orphan = start_sweep(tmp_path, run_id="orphan")
    first = second = None
    try:
        orec = wait_for(lambda: level_running(tmp_path, orphan), 120, "the orphan's level")
        os.kill(orec["watchdog"]["pid"], signal.SIGKILL)
        orphan.kill()
        orphan.wait()
        left = lab_processes(orec)
        time.sleep(1)
        print(f"\nleft by the orphaned run:\n{table(left)}")
        assert alive(left), "an orphaned run left nothing to clean"

        # the next sweep (another kernel) reaps them at its start, and says so
        first = start_sweep(tmp_path, levels=[2], duration=15, run_id="first")  # still running when second ends
        frec = wait_for(lambda: level_running(tmp_path, first), 120, "the next sweep's level")
        said = (tmp_path / "first.log").read_text()
        print(said)
        assert "stopped and removed what a dead run left" in said and f"pid {orphan.pid}" in said
        assert not alive(left)
        assert not (tmp_path / "tmp" / "orphan").exists()
        # a sweep started while that one runs leaves it alone; both finish, audited
        second = start_sweep(tmp_path, levels=[2], duration=1, run_id="second")
        assert second.wait(120) == 0, (tmp_path / "second.log").read_text()[-3000:]
        assert "dead run" not in (tmp_path / "second.log").read_text()
        assert alive(lab_processes(frec)) and first.poll() is None
        assert first.wait(120) == 0, (tmp_path / "first.log").read_text()[-3000:]
        pts = results.load_points(tmp_path / "results.db")
        mine = pts[pts["notebook_run"].isin(["first", "second"])]
        assert len(mine) == 2 and mine["audit_ok"].all()
    finally:
        for p in (orphan, first, second):
            if p is not None:
                p.kill()
                p.wait()
        processes.reap_orphans(tmp_path / "tmp" / "owners")


APP_THAT_FORKS = """
from pathlib import Path
from sqlitelab.experiments import your_app
from sqlitelab.infra import apps
marker = {marker!r}
# the user's command: a shell that forks a child in its group and one that leaves it (setsid),
# then becomes the app itself; a level of a minute under way when the owner is killed
command = (f"sh -c \\"python3 -c 'import time; time.sleep(600)' {{marker}}-child & "
           f"setsid python3 -c 'import time; time.sleep(600)' {{marker}}-escaped & "
           f"exec python3 -m http.server {{{{port}}}} --bind 127.0.0.1 --directory {{marker}}\\"")
app = apps.App.of(name="an app that forks", command=command)
locustfile = Path(marker) / "locustfile.py"
locustfile.write_text("from locust import HttpUser, constant, task\\n\\n"
                      "class Reader(HttpUser):\\n    wait_time = constant(0.05)\\n\\n"
                      "    @task\\n    def root(self):\\n        self.client.get('/')\\n")
p = your_app.plan(app=app, levels=[2], duration=60, warmup=0, locustfile=locustfile)
print("measuring", flush=True)
your_app.measure(p, notebook="scratch", run_id="killed-app", progress=False, calibration=False)
"""


@pytest.mark.harness
@pytest.mark.shares_cpus
def test_a_killed_kernel_leaves_nothing_of_a_users_app_that_forks(tmp_path):
    """Notebook 10 mid-level: a user's command — a shell that forks a child and a setsid'd child
    (a daemon leaving its group) before exec'ing the app — and Locust sending it load. SIGKILL of
    their owner (the kernel) leaves none of them running: the watchdog stops the groups and the
    stray it noted."""
    marker = str(tmp_path / "app-root")
    Path(marker).mkdir()
    log = open(tmp_path / "owner.log", "wb")
    owner = subprocess.Popen(owner_script(tmp_path, APP_THAT_FORKS.format(marker=marker)),
                             stdout=log, stderr=subprocess.STDOUT, env=env_for(tmp_path),
                             cwd=config.PROJ_ROOT)

    def ours() -> list[psutil.Process]:
        found = []
        for p in psutil.process_iter(["cmdline"]):
            line = " ".join(p.info["cmdline"] or [])
            if p.pid != owner.pid and (marker in line or ("locust" in line and "userfile" in line)):
                found.append(p)
        return found
    try:
        wait_for(lambda: level_running(tmp_path, owner, "locust"), 120, "the app's level to start")
        wait_for(lambda: len(alive(ours())) >= 4, 20, "the app, its two children and Locust")
        time.sleep(processes.WATCH_EVERY_S * 1.5)  # the watchdog notes the child that left its group
        during = ours()
        print(f"\nthe app's processes and its load (owner {owner.pid}):\n{table(during)}")
        owner.kill()
        owner.wait()
        wait_for(lambda: not alive(during), 20, "every process of the app and its load to end")
        assert not alive(ours())
    finally:
        owner.kill()
        owner.wait()
        kill_all(ours())
