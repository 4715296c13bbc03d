"""Someone's own locustfile, measured the lab's way (notebook 10).

Locust runs this file. It imports sqlitelab.load.recorder — the window, the microsecond
histograms, the counts by status and failure kind, the lock rule, the audit's counts — and then
the user's locustfile (LAB_USER_LOCUSTFILE), whose User classes it offers Locust as its own:
Locust's rule decides which (every class that is a User and not `abstract`; their `@task`s,
`wait_time` and `weight` as written). Whatever their clients report through Locust's `request`
event (HttpUser, FastHttpUser, or a client of the user's that fires it) is recorded as the lab's
own user's requests are; the lab sets the users per level, so a LoadTestShape is refused.

Two more things the lab's own user does itself are added to the users' clients here:
- **in flight**: each request of an HttpUser or FastHttpUser is noted when sent and cleared when
  reported, so those still unanswered when the level ends are the audit's in-flight requests
  (`run_inflight`, by "<METHOD> <name>" as Locust names the request);
- **load stays on the app**: every hop they send (a redirect's too) goes to the app's host and
  port (LAB_APP_HOST, from the URL Locust was given) or is refused before it is sent, and counted
  (`off_host` in the level's file; a level with any fails). A client of the user's own (a raw
  socket, websockets) is not watched: the method table says so.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import urllib.parse
from pathlib import Path

from locust import LoadTestShape  # first: it monkey-patches the standard library for gevent

import gevent
import requests
from geventhttpclient.useragent import UserAgent
from locust.clients import HttpSession
from locust.contrib.fasthttp import FastHttpSession
from locust.util.load_locustfile import is_shape_class, is_user_class

from sqlitelab.load import recorder

PATH = os.environ.get("LAB_USER_LOCUSTFILE")
if not PATH:
    raise ValueError("LAB_USER_LOCUSTFILE must name the locustfile whose users to measure")
APP = os.environ.get("LAB_APP_HOST", "")  # "host:port" every request must go to


class OffHostError(ConnectionError):
    """A request of the user's locustfile to a host other than the app's: never sent."""


def _load(path: Path):
    """The user's locustfile as a module (its folder first on sys.path, as Locust has it, so
    that it can import its neighbours)."""
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location("lab_user_locustfile", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def users_of(module) -> dict[str, type]:
    """The module's User classes by Locust's rule; a LoadTestShape is refused."""
    found = vars(module)
    shapes = [n for n, v in found.items() if is_shape_class(v) and v is not LoadTestShape]
    if shapes:
        raise ValueError(f"{PATH}: {', '.join(shapes)} is a LoadTestShape: the lab sets the users of "
                         f"each level itself (remove the shape, or run the file with locust alone)")
    users = {n: v for n, v in found.items() if is_user_class(v)}
    if not users:
        raise ValueError(f"{PATH} defines no User class Locust would run (a subclass of HttpUser or "
                         f"FastHttpUser with @task methods, not abstract)")
    return users


def _on_app(host: str | None, port: int | None, scheme: str) -> bool:
    port = port or (443 if scheme == "https" else 80)
    return not APP or f"{host}:{port}" == APP


def _refuse(url: str) -> None:
    recorder.LEVEL.state["off_host"] += 1
    raise OffHostError(f"the lab sends load to the app ({APP}) only; refused: {url}")


_send = requests.Session.send


def _send_on_app(self, request, **kw):
    """Every hop of an HttpUser's request (requests follows redirects through send)."""
    parts = urllib.parse.urlsplit(request.url)
    if not _on_app(parts.hostname, parts.port, parts.scheme):
        _refuse(request.url)
    return _send(self, request, **kw)


_urlopen = UserAgent._urlopen


def _urlopen_on_app(self, request):
    """Every hop of a FastHttpUser's request (geventhttpclient follows redirects through it)."""
    u = request.url_split
    if not _on_app(u.host, u.port, u.scheme):
        _refuse(str(request.url))
    return _urlopen(self, request)


def _in_flight(request):
    """A client's request noted as in flight until Locust reports it (recorder.record clears it)."""
    def tracked(self, method, url, name=None, **kw):
        level = recorder.LEVEL
        level.inflight[gevent.getcurrent()] = f"{method.upper()} {name or self.request_name or url}"
        return request(self, method, url, name=name, **kw)
    tracked.__wrapped__ = request
    return tracked


requests.Session.send = _send_on_app
UserAgent._urlopen = _urlopen_on_app
HttpSession.request = _in_flight(HttpSession.request)
FastHttpSession.request = _in_flight(FastHttpSession.request)

USERS = users_of(_load(Path(PATH)))
globals().update(USERS)
