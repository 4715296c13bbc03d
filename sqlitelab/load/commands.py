"""The generators' command lines: Locust alone, as a distributed master and its workers
(`worker_processes` per generator host), the lab's Go generator (`loadgen_command`, built by
`build_loadgen`), and which generators there are (`GENERATORS`, `check_generator`)."""
from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from sqlitelab.core import config
from sqlitelab.core.processes import pin_command
from sqlitelab.infra import hosts, servers

LOCUSTFILE = Path(__file__).with_name("locustfile.py")  # the lab's user (LabScenario)
RECORDER = Path(__file__).with_name("recorder.py")      # what every Locust process of the lab measures with
GENERATORS = ("locust", "loadgen")
# After the window's close, users get this long to finish the request they are in before
# the generator gives up on it (Locust's --stop-timeout; loadgen's -max-seconds past the
# bound). A request abandoned then may still commit later, so it must outlast a server's
# stall (a 5-s busy timeout behind a queue of requests).
STOP_TIMEOUT = 30
# The longest Locust may take from launch to its last user spawned (every worker's, when
# distributed) before the level fails (the window then opens `warmup` seconds after the spawn:
# ~0.5 s here for one process, seconds for workers joining a master).
SPAWN_BOUND = 30.0


USERFILE = Path(__file__).with_name("userfile.py")      # someone's own locustfile, measured the same way


def _locust(users: int, url: str, locustfile: Path = LOCUSTFILE) -> list[str]:
    """Headless Locust running `locustfile` (the lab's user, or USERFILE), its `users` spawned at once."""
    return [sys.executable, "-m", "locust", "-f", str(locustfile), "--headless",
            "-u", str(users), "-r", str(max(users, 1)), "--stop-timeout", str(STOP_TIMEOUT),
            "--host", url, "--only-summary", "--loglevel", "WARNING", "--exit-code-on-error", "0"]


def user_classes(locustfile: Path | str, timeout: float = 60.0) -> list[str]:
    """The User classes Locust would run from someone's locustfile, found by importing it as
    USERFILE does, in a Python process of its own (it patches the HTTP clients); a file that does
    not import, defines no user or a LoadTestShape is a ValueError with its last line."""
    path = Path(locustfile).expanduser()
    if not path.is_file():
        raise ValueError(f"locustfile {os.fspath(locustfile)!r} is not a file")
    code = "from sqlitelab.load import userfile; print(' '.join(userfile.USERS))"
    with tempfile.TemporaryDirectory(prefix="lab-userfile-") as out:
        env = {**os.environ, "LAB_USER_LOCUSTFILE": str(path.resolve()), "LAB_OUT_DIR": out}
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, timeout=timeout, cwd=out)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise ValueError(f"locustfile {os.fspath(locustfile)!r} cannot be run: {last}")
    return proc.stdout.split()


def locust_command(scenario: str | None, users: int, url: str, run_time: float, processes: int,
                   out_dir: Path, cpus: str | None) -> tuple[list[str], str | None]:
    """One level's Locust: the lab's user sending `scenario`, or (None) the users of someone's
    own locustfile (USERFILE reads LAB_USER_LOCUSTFILE), every class of theirs Locust would run."""
    cmd = _locust(users, url, LOCUSTFILE if scenario is not None else USERFILE) + [
        "--run-time", f"{math.ceil(run_time)}s", "--csv", str(out_dir / "locust")]
    if processes > 1:
        cmd += ["--processes", str(processes)]
    if scenario is not None:
        cmd.append("LabScenario")  # locustfile.py's one user class: it sends what LAB_SPEC says
    return pin_command(cmd, cpus)


def plain_locust_command(locustfile: Path | str, users: int, url: str, seconds: int, out_dir: Path,
                         cpus: str | None) -> tuple[list[str], str | None]:
    """Someone's locustfile run by Locust alone, as `locust --headless` runs it (no recorder of the
    lab's: its own statistics, in <out_dir>/plain_stats.csv), for `seconds`."""
    return pin_command(_locust(users, url, Path(locustfile)) + [
        "-t", f"{seconds}s", "--csv", str(Path(out_dir) / "plain")], cpus)


def locust_session_command(users: int, url: str, cpus: str | None) -> tuple[list[str], str | None]:
    """One Locust process for a session of levels (driver.Session), `users` its first level's:
    no --run-time (it quits when told) and no --csv (it writes each level's own stats)."""
    return pin_command(_locust(users, url) + ["LabScenario"], cpus)


def locust_master_command(users: int, url: str, run_time: float, workers: int, bind: str,
                          port: int, out_dir: Path, cpus: str | None) -> tuple[list[str], str | None]:
    """Locust's master (distributed mode): no users of its own, `workers` worker processes
    expected on the generator hosts before it starts them all."""
    cmd, pinned = locust_command("", users, url, run_time, 1, out_dir, cpus)
    cmd = cmd[:-1] + ["--master", "--master-bind-host", bind, "--master-bind-port", str(port),
                      "--expect-workers", str(workers),
                      "--expect-workers-max-wait", str(int(SPAWN_BOUND)), "LabScenario"]
    return cmd, pinned


def locust_worker_command(master: str, port: int, processes: int,
                          cpus: str | None) -> tuple[list[str], str | None]:
    """One generator host's Locust worker(s): `processes` of them (Locust's --processes)."""
    cmd = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--worker",
           "--master-host", master, "--master-port", str(port), "--loglevel", "WARNING"]
    if processes > 1:
        cmd += ["--processes", str(processes)]
    return pin_command(cmd, cpus)


def worker_processes(processes: int, workers: list[hosts.Host],
                     cpus_of=lambda h: int(h.run(["nproc"]).strip())) -> dict[hosts.Host, int]:
    """Locust processes per generator host: hosts on this machine share its `processes` (at
    least one each); a machine of its own runs one per CPU it has (`nproc` there)."""
    here = [h for h in workers if h.same_machine]
    return {h: (max(1, processes // len(here)) if h.same_machine else max(1, cpus_of(h)))
            for h in workers}


def loadgen_command(spec: Path, users: int, url: str, run_time: float,
                    cpus: str | None) -> tuple[list[str], str | None]:
    cmd = [str(config.LOADGEN_BIN), "-spec", str(spec), "-users", str(users), "-host", url,
           "-max-seconds", f"{run_time:.3f}"]
    return pin_command(cmd, cpus)


GO_BIN_DIRS = ("/usr/local/go/bin", str(Path.home() / "go" / "bin"))


def build_loadgen(timeout: float = 300) -> Path:
    """Build the Go load generator (stdlib only) unless its binary is newer than its sources."""
    src = [config.LOADGEN_DIR / "go.mod", *sorted(config.LOADGEN_DIR.glob("*.go"))]
    binary = config.LOADGEN_BIN
    if binary.exists() and binary.stat().st_mtime >= max(f.stat().st_mtime for f in src):
        return binary
    path = os.pathsep.join([os.environ.get("PATH", ""), *GO_BIN_DIRS])
    if not shutil.which("go", path=path):
        raise servers.ServerStartError("lab: go not found: install Go >= 1.22 (https://go.dev/dl/) "
                               "to use generator='loadgen'")
    proc = subprocess.run(["go", "build", "-trimpath", "-o", str(binary), "."],
                          cwd=config.LOADGEN_DIR, env={**os.environ, "PATH": path},
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-25:])
        raise servers.ServerStartError(f"loadgen: build failed (exit {proc.returncode}):\n{tail}")
    return binary


def check_generator(generator: str, processes: int = 1) -> None:
    if generator not in GENERATORS:
        raise ValueError(f"generator must be one of {', '.join(GENERATORS)}, not {generator!r}")
    if generator == "loadgen" and processes != 1:
        raise ValueError("processes applies to Locust only: loadgen uses every CPU of its set")
