"""`make lab`: JupyterLab on the notebooks, bound to loopback, as root or as a normal user.

`python -m sqlitelab.lab [--port 8888]` prints the URL with its token and serves until
Ctrl-C. The token is made here (not left to Jupyter) so the printed URL is the one that
works; the port is not silently moved to another (`port_retries=0`): a busy port is a
one-line error. Kernels talk to the server over IPC sockets, not TCP (no "running over TCP
without encryption" warning, and nothing listening on other ports). `lab_command` is also
what the browser test starts.
"""
from __future__ import annotations

from jupyter_core.paths import jupyter_runtime_dir
import argparse
import os
import secrets
import signal
import socket
import sys
from pathlib import Path

from sqlitelab.core import config, processes

HOST = "127.0.0.1"


def kernel_transport() -> str:
    """IPC (config.KERNEL_TRANSPORT) unless Jupyter's runtime folder is too deep for a Unix
    socket's path (108 bytes, with ~50 for the kernel's file name): TCP on loopback then."""
    return config.KERNEL_TRANSPORT if len(jupyter_runtime_dir()) <= 56 else "tcp"


def kernel_ipc_prefix() -> str | None:
    """A path of its own for one kernel's IPC sockets (<prefix>-1 … -5), in Jupyter's runtime
    folder; None on TCP. Left to itself, a kernel manager with no connection file yet names them
    `kernel-ipc-<n>` in its working directory, counting n from 1: two kernels started at once from
    the same folder (papermill runs in the notebooks' folder) then share sockets and reject each
    other's messages ("Invalid Signature")."""
    if kernel_transport() != "ipc":
        return None
    return os.path.join(jupyter_runtime_dir(), f"kernel-{secrets.token_hex(6)}-ipc")


def lab_command(port: int, token: str, root_dir: Path | None = None) -> list[str]:
    """The `jupyter lab` command line: loopback only, fixed port, given token, no browser."""
    cmd = [str(Path(sys.executable).parent / "jupyter"), "lab", "--no-browser",
           f"--ServerApp.ip={HOST}", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
           f"--IdentityProvider.token={token}",
           f"--ServerApp.root_dir={root_dir or config.NOTEBOOKS_DIR}",
           f"--KernelManager.transport={kernel_transport()}",
           "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    if os.geteuid() == 0:  # Jupyter refuses root without it; the lab's machines and CI run as root
        cmd.append("--allow-root")
    return cmd


def lab_url(port: int, token: str, path: str = "lab") -> str:
    return f"http://{HOST}:{port}/{path}?token={token}"


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sqlitelab.lab", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=8888)
    args = ap.parse_args(argv)
    if not 1 <= args.port <= 65535:
        print(f"lab: --port must be 1-65535, not {args.port}", file=sys.stderr)
        return 2
    if not port_free(args.port):
        print(f"lab: port {args.port} on {HOST} is in use; choose another: make lab LAB_PORT=8890",
              file=sys.stderr)
        return 2
    token = secrets.token_hex(24)
    proc = processes.spawn(lab_command(args.port, token), "JupyterLab")
    print(f"\nJupyterLab (notebooks in {config.NOTEBOOKS_DIR}, kernel '{config.KERNEL_NAME}'):\n"
          f"    {lab_url(args.port, token)}\nCtrl-C stops it.\n", flush=True)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        return 0
    finally:  # also on Ctrl-C: the server and its kernels, by the group's PID
        processes.stop(proc)


def _exit_on_term(signum, frame):
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _exit_on_term)  # `kill` too stops JupyterLab, via the finally
    sys.exit(main())
