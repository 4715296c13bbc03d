"""The lab's Locust user: one user class, LabScenario, sends what LAB_SPEC (a spec compiled from
scenarios.toml by sqlitelab.load.scenarios, the same file loadgen reads) says: a request drawn by
its shares, its path and body joined from literal pieces and uniform integers. What it sends is
measured by sqlitelab.load.recorder (its window, histograms, counts and the session's protocol),
which this file imports.
"""
from __future__ import annotations

import random
import time

import gevent
from locust import task
from locust.exception import StopUser

from sqlitelab.load.recorder import SPEC, LabUser

if SPEC is None:
    raise ValueError("LAB_SPEC must name a compiled scenario (python -m sqlitelab.load.scenarios NAME > spec.json)")


def _join(pieces: list[dict], max_id: int) -> str:
    """A path or body from its pieces: literal text and uniform integers (scenarios.py)."""
    out = []
    for p in pieces:
        if "lit" in p:
            out.append(p["lit"])
        elif "int" in p:
            out.append(str(random.randint(*p["int"])))
        else:
            lo = p["int_to_max_id"]
            out.append(str(random.randint(lo, max(lo, max_id))))
    return "".join(out)


JSON_HEADERS = {"Content-Type": "application/json"}


def _fixed(pieces: list[dict] | None) -> str | None:
    """The text of pieces that are all literal (joined once, not per request), else None."""
    if pieces is None or any("lit" not in p for p in pieces):
        return None
    return "".join(p["lit"] for p in pieces)


class LabScenario(LabUser):
    """Each task sends one request of the spec: the first whose cumulative share exceeds a
    uniform draw, else the last."""
    spec_requests = [{**r, "fixed_path": _fixed(r["path"]), "fixed_body": _fixed(r["body"])}
                     for r in SPEC["requests"]]
    spec_shared = [r for r in spec_requests if r["share"] is not None]

    @task
    def send(self):
        self.check()
        level = self.level
        if level.schedule is not None:  # open loop: the next due time, whatever the others wait for
            due = level.schedule.take()
            if due is None:
                raise StopUser()
            if (wait := due - time.time()) > 0:
                gevent.sleep(wait)
            self.check()
            level.due_of[gevent.getcurrent()] = due
        req = self.spec_requests[-1]
        if self.spec_shared:
            draw, cum = random.random(), 0.0
            for r in self.spec_shared:
                cum += r["share"]
                if draw < cum:
                    req = r
                    break
        max_id = level.state["max_id"]
        path = req["fixed_path"] or _join(req["path"], max_id)
        body = (req["fixed_body"] or _join(req["body"], max_id)) if req["body"] is not None else None
        level.inflight[gevent.getcurrent()] = f"{req['method']} {req['name']}"
        r = self.client.request(req["method"], path, name=req["name"], data=body,
                                headers=JSON_HEADERS if req["json"] else None,
                                allow_redirects=req["follow"])
        if req["track_max_id"] and r.status_code == 201:
            try:
                level.state["max_id"] = max(level.state["max_id"], int(r.json()["id"]))
            except (ValueError, KeyError, TypeError):
                pass
