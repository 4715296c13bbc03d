"""python-django's entry: `run` execs this file, so its PID is the gunicorn master's.

It checks the LAB_* configuration first (lab/config.py: one `lab: ` line on stderr and exit 2
on anything it refuses), binds the port, then runs gunicorn programmatically with the gthread
worker: LAB_PROCESSES workers of LAB_THREADS threads each, serving labsite.wsgi (Django).
"""
from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import sys
import tempfile

from lab.config import ConfigError, checked_config

GRACEFUL_S = 10  # SIGTERM/SIGINT: in-flight requests get this long, then the workers are killed


def listen(cfg: dict) -> socket.socket:
    """The listening socket, made here so that a port in use is one `lab: ` line too (gunicorn
    itself would retry for 5 s and print its own error)."""
    family = socket.AF_INET6 if ":" in cfg["host"] else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((cfg["host"], cfg["port"]))
        sock.listen(2048)
    except OSError as e:
        sock.close()
        raise ConfigError(f"LAB_HOST={cfg['host']!r} LAB_PORT={cfg['port']}: cannot listen: {e.strerror}")
    sock.set_inheritable(True)
    return sock


def main() -> int:
    try:
        cfg = checked_config()
        sock = listen(cfg)
    except ConfigError as e:
        print(f"lab: {e}", file=sys.stderr, flush=True)
        return 2
    # the workers' counters: in the lab's folder for this server when it gives one
    # (LAB_RUNTIME_DIR: removed by the lab even when this process is SIGKILLed)
    stats = tempfile.mkdtemp(prefix="lab-stats-", dir=os.environ.get("LAB_RUNTIME_DIR") or None)
    os.environ["LAB_STATS_DIR"] = stats
    os.environ["DJANGO_SETTINGS_MODULE"] = "labsite.settings"
    master = os.getpid()
    try:
        LabApplication(cfg, sock.fileno()).run()
    finally:  # a worker leaves through here too (gunicorn forks it inside run): not its to remove
        if os.getpid() == master:
            shutil.rmtree(stats, ignore_errors=True)
    return 0


# ----------------------------------------------------------------------------- gunicorn

from gunicorn.app.base import BaseApplication  # noqa: E402
from gunicorn.arbiter import Arbiter  # noqa: E402
from gunicorn.workers.gthread import ThreadWorker  # noqa: E402

PR_SET_PDEATHSIG = 1


class LabWorker(ThreadWorker):
    """gunicorn's gthread worker, with SIGINT as graceful as SIGTERM (gunicorn's is a quick exit
    that drops requests in flight)."""

    def init_signals(self):
        super().init_signals()
        signal.signal(signal.SIGINT, self.handle_exit)


class LabArbiter(Arbiter):
    """gunicorn's master, with SIGINT as graceful as SIGTERM."""

    def handle_int(self):
        self.handle_term()


def post_fork(server, worker):
    """A worker dies with its master: SIGTERM (a graceful stop) the moment the master is gone,
    SIGKILLed included (gthread would also notice within a second, by its parent's PID)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass
    if os.getppid() != worker.ppid:  # the master died before prctl
        os.kill(os.getpid(), signal.SIGTERM)


def post_worker_init(worker):
    """Django is set up (gunicorn loaded labsite.wsgi): open the connections before accepting."""
    from lab import db
    db.start_worker(worker.tpool)
    worker.lab_started = True


def worker_exit(server, worker):
    """The worker's requests are done: the writer drains, the connections close. (gunicorn also
    calls this in the master for a worker that vanished: nothing to do there.)"""
    if getattr(worker, "lab_started", False) and worker.pid == os.getpid():
        from lab import db
        db.stop_worker()


class LabApplication(BaseApplication):
    def __init__(self, cfg: dict, fd: int):
        self.lab, self.fd = cfg, fd
        super().__init__()

    def load_config(self):
        cfg = self.lab
        for key, value in {
            "bind": [f"fd://{self.fd}"],
            "worker_class": LabWorker,
            "workers": cfg["processes"],
            "threads": cfg["threads"],
            "worker_connections": 10_000,  # gthread's cap on open connections (1000 by default)
            "keepalive": 75,               # load generators hold their connections open
            "graceful_timeout": GRACEFUL_S,
            "timeout": 60,                 # a worker silent this long is killed (start-up: its pool)
            "accesslog": None,             # no access log
            "errorlog": "-",
            "loglevel": "warning",
            "worker_tmp_dir": os.environ.get("LAB_RUNTIME_DIR") or None,
            "control_socket_disable": True,  # gunicorn 25+'s control socket: no file outside LAB_RUNTIME_DIR
            "proc_name": "python-django",
            "post_fork": post_fork,
            "post_worker_init": post_worker_init,
            "worker_exit": worker_exit,
        }.items():
            self.cfg.set(key, value)

    def load(self):
        from labsite.wsgi import application
        return application

    def run(self):
        LabArbiter(self).run()


if __name__ == "__main__":
    sys.exit(main())
