"""Build what the lab runs, and prepare a database by hand:

    python -m sqlitelab.build build [STACK ... | loadgen | delayproxy]   # all when none named (make servers)
    python -m sqlitelab.build prepare DB [--users N] [--items N]         # a fresh database from servers/schema.sql
"""
from __future__ import annotations

import argparse
import sys
import time

from sqlitelab.infra import databases, link, servers
from sqlitelab.load import commands


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m sqlitelab.build")
    sub = p.add_subparsers(dest="cmd", required=True)
    pr = sub.add_parser("prepare", help="a fresh database from servers/schema.sql")
    pr.add_argument("db")
    pr.add_argument("--users", type=int, default=0)
    pr.add_argument("--items", type=int, default=0)
    b = sub.add_parser("build", help="build stacks, the Go load generator and the link's delay "
                                    "proxy (all when none named)")
    b.add_argument("stacks", nargs="*")
    args = p.parse_args(argv)
    if args.cmd == "prepare":
        t = time.perf_counter()
        databases.prepare_database(args.db, users=args.users, items=args.items)
        print(f"{args.db}: {databases.table_counts(args.db)} in {time.perf_counter() - t:.1f} s")
    elif args.cmd == "build":
        for stack in [s for s in args.stacks if s not in ("loadgen", "delayproxy")] if args.stacks else list(servers.STACKS):
            t = time.perf_counter()
            servers.build_server(stack)
            print(f"{stack}: built in {time.perf_counter() - t:.1f} s")
        if not args.stacks or "loadgen" in args.stacks:
            t = time.perf_counter()
            commands.build_loadgen()
            print(f"loadgen: built in {time.perf_counter() - t:.1f} s")
        if not args.stacks or "delayproxy" in args.stacks:
            t = time.perf_counter()
            link.build()
            print(f"delayproxy: built in {time.perf_counter() - t:.1f} s")
    return 0



if __name__ == "__main__":
    sys.exit(main())
