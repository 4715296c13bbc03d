"""The endpoints of servers/openapi.yaml as Django class-based views (labsite/urls.py routes
them). Reads run in the request's gthread thread on its own connection; every write is one
`db.write(work)`: `work(alias)` is the write's ORM statements, run in one transaction.atomic()
on the request's connection (`pool`) or on the writer thread's (`writer`, `batch`)."""
from __future__ import annotations

import json
import math
import os
import random
import re
import sqlite3
import time
import uuid
from datetime import datetime, timezone

from django.conf import settings
from django.db import connections, transaction
from django.db.models import F
from django.http import HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.views import View

from lab import db
from lab.db import ApiError
from lab.models import Item, Metric, Request, User

MAX_BODY = 1_048_576
MAX_PAYLOAD = 65_536
MAX_ID = 2**63 - 1
MAX_DELAY_MS = 10_000
METRIC_NAMES = ("cpu", "memory", "disk", "load", "requests")  # servers/shared.toml
USER_FIELDS = ("uid", "username", "departname", "created")
TEXT = "text/plain; charset=utf-8"


def error(status: int, message: str, **headers) -> JsonResponse:
    return JsonResponse({"error": message}, status=status, headers=headers or None)


class LabView(View):
    """A view of the contract: a method it does not define is a JSON 405 naming the ones it
    does (Django's own HttpResponseNotAllowed has an empty HTML body)."""
    http_method_names = ["get", "post", "head"]  # HEAD: Django's View answers it with get()

    def http_method_not_allowed(self, request, *args, **kwargs):
        return error(405, "method not allowed", Allow=", ".join(self._allowed_methods()))


# ----------------------------------------------------------------------------- input

def parse_id(raw: str) -> int:
    if not re.fullmatch(r"[0-9]{1,19}", raw) or not 1 <= int(raw) <= MAX_ID:
        raise ApiError(400, f"invalid id {raw[:40]!r}: expected an integer 1..{MAX_ID}")
    return int(raw)


def read_body(request) -> bytes:
    """The request body, at most MAX_BODY bytes (over: 413, by Content-Length or by reading).
    A chunked body has no Content-Length, which Django's request.body takes for empty: it is
    read from the WSGI input itself."""
    length = request.META.get("CONTENT_LENGTH")
    if length and (not length.isdigit() or int(length) > MAX_BODY):
        raise ApiError(413, f"request body over {MAX_BODY} bytes")
    if "chunked" not in request.META.get("HTTP_TRANSFER_ENCODING", "").lower():
        return request.body
    stream, body = request.environ["wsgi.input"], bytearray()
    while chunk := stream.read(65536):
        body += chunk
        if len(body) > MAX_BODY:
            raise ApiError(413, f"request body over {MAX_BODY} bytes")
    return bytes(body)


def _reject_constant(name):
    raise ValueError(f"{name} is not valid JSON")


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _has_lone_surrogate(value) -> bool:
    """A string in `value` holds a surrogate: json.loads joins an escaped pair into one
    character, so what is left came from an unpaired escape and has no UTF-8 form. (A loop, not
    recursion: a body nested as deep as json.loads allows must not overflow the stack here.)"""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if _SURROGATE.search(v):
                return True
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return False


EMPTY = object()  # read_json: no body at all (JSON `null` is a body, and not an object)


def read_json(request, required: bool):
    """The body as JSON, whatever its Content-Type: Unicode text (RFC 8259) or a 400; EMPTY
    for an empty (or all-whitespace) body where one is optional."""
    body = read_body(request)
    if not body.strip():
        if required:
            raise ApiError(400, "a JSON body is required")
        return EMPTY
    try:  # strict UTF-8: json.loads(bytes) would let encoded surrogates (and a BOM) through
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ApiError(400, f"body is not valid UTF-8 ({e.reason} at byte {e.start})")
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as e:
        raise ApiError(400, f"malformed JSON: {str(e)[:200]}")
    if _SURROGATE_ESCAPE.search(text) and _has_lone_surrogate(value):
        raise ApiError(400, "body has a \\u escape of an unpaired UTF-16 surrogate")
    return value


def is_number(v) -> bool:
    """A JSON number a REAL column holds: finite, and an integer within a double's range."""
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:  # an integer past 1.8e308
        return False


def storable(v: str, field: str) -> str:
    """A string the database can hold: Postgres' text cannot hold U+0000 (SQLite's can), so on
    Postgres it is a 400 before any write, not the driver's error."""
    if "\x00" in v and settings.LAB["database"] == "postgres":
        raise ApiError(400, f"{field} holds U+0000, which Postgres text cannot store")
    return v


def short_str(v, field: str, lo: int = 1, hi: int = 64) -> str:
    if not isinstance(v, str) or not lo <= len(v) <= hi:
        raise ApiError(400, f"{field} must be a string of {lo} to {hi} characters")
    return storable(v, field)


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# ----------------------------------------------------------------------------- endpoints

class Health(LabView):
    def get(self, request):
        cfg = settings.LAB
        return JsonResponse({
            "server": "python-django",
            "versions": db.VERSIONS,
            "sqlite_version": sqlite3.sqlite_version,
            "sqlite_compile_options": db.SQLITE_OPTIONS,
            "database": cfg["database"],
            "database_version": db.DATABASE_VERSION,
            "pid": os.getpid(),
            "knobs": {"database": cfg["database"], "pragmas": pragmas_read_back(),
                      "txn_mode": cfg["txn_mode"], "busy": cfg["busy"],
                      "write_path": cfg["write_path"], "processes": cfg["processes"],
                      "threads": cfg["threads"], "readers": cfg["readers"],
                      "metrics_txn": cfg["metrics_txn"], "cache": cfg["cache"],
                      "sql_log": cfg["sql_log"]},
            "emulated": ({"busy": f"{cfg['busy_kind']} emulated in application code (lab/backend/base.py) "
                                  "around lock-taking statements and COMMIT: stdlib sqlite3 has no "
                                  "sqlite3_busy_handler"}
                         if cfg["busy_kind"] in ("sleep_poll", "retries") else {}),
            "requests_handled": db.COUNTER.total(),
            "writer": db.WRITER.counts() if db.WRITER else None,
        })


def pragmas_read_back() -> dict[str, str] | None:
    """Each requested pragma as SQLite reports it (`PRAGMA name`), on this thread's connection."""
    cfg = settings.LAB
    if cfg["database"] != "sqlite":
        return None
    with connections[db.DEFAULT].cursor() as cur:
        out = {}
        for name, _ in cfg["pragmas"]:
            cur.execute(f"PRAGMA {name}")
            out[name] = str(cur.fetchone()[0]).lower()
        return out


class Hello(LabView):
    def get(self, request):
        return HttpResponse("Hello, World!", content_type=TEXT)


class Delay(LabView):
    def get(self, request, ms: str):
        """Sleeps in its gthread thread (no database, no CPU; one of LAB_THREADS threads held)."""
        m = re.fullmatch(r"0*([0-9]{1,5})", ms)
        if not m or int(m.group(1)) > MAX_DELAY_MS:
            raise ApiError(400, f"invalid delay {ms[:40]!r}: expected an integer 0..{MAX_DELAY_MS} (ms)")
        time.sleep(int(m.group(1)) / 1000)
        return HttpResponse("Hello, World!", content_type=TEXT)


class Requests(LabView):
    def post(self, request):
        params = read_json(request, required=False)
        if params is EMPTY:
            params = {}
        if not isinstance(params, dict):
            raise ApiError(400, "the body must be a JSON object")
        fields = {"uid": str(uuid.uuid4()), "ip": request.META.get("REMOTE_ADDR", ""),
                  "method": request.method, "url": request.build_absolute_uri(),
                  "parameters": json.dumps(params, separators=(",", ":"))}

        def work(alias: str) -> int:
            ts = now()
            return Request.objects.using(alias).create(**fields, created_at=ts, updated_at=ts).id
        location = f"/requests/{db.write(work)}"
        return HttpResponseRedirect(  # 302 (Django 5.2's second argument, preserve_request, would make it 307)
            location, content=f'<html><body>You are being <a href="{location}">redirected</a>.</body></html>')


class RequestDetail(LabView):
    def get(self, request, id: str):
        fields = ("id", "uid", "ip", "method", "url", "parameters", "created_at", "updated_at")
        try:
            row = Request.objects.filter(id=parse_id(id)).values(*fields).get()
        except Request.DoesNotExist:
            raise ApiError(404, f"request {id} not found")
        return render(request, "request.html", row)


# The ORM would write the WHERE of this look-up in parentheses, `WHERE ("metrics"."instance" = %s
# AND "metrics"."name" = %s)`: the contract's statement is run as it is, on the same connection.
SQL_LATEST_METRIC = "SELECT value FROM metrics WHERE instance = %s AND name = %s ORDER BY id DESC LIMIT 1"


class Metrics(LabView):
    def post(self, request):
        body = read_json(request, required=False)
        if body is EMPTY:
            instance = f"instance-{random.randint(1, 10)}"
            measurements = [(n, random.uniform(0, 100)) for n in METRIC_NAMES]
        else:
            if not isinstance(body, dict):
                raise ApiError(400, "the body must be a JSON object")
            instance = short_str(body.get("instance"), "instance")
            ms = body.get("measurements")
            if not isinstance(ms, list) or len(ms) != 5:
                raise ApiError(400, "measurements must be a list of exactly 5 {name, value} objects")
            measurements = []
            for m in ms:
                if not isinstance(m, dict) or not is_number(m.get("value")):
                    raise ApiError(400, "each measurement needs a name and a finite numeric value")
                measurements.append((short_str(m.get("name"), "measurement name"), float(m["value"])))

        def latest(alias: str, name: str):
            with connections[alias].cursor() as cur:
                cur.execute(SQL_LATEST_METRIC, [instance, name])
                row = cur.fetchone()
            return row[0] if row else None

        def work(alias: str) -> list[int]:  # request: one transaction for the five records
            ts, metrics = now(), Metric.objects.using(alias)
            return [metrics.create(instance=instance, name=name, value=value,
                                   previous=latest(alias, name), created_at=ts).id
                    for name, value in measurements]

        if settings.LAB["metrics_txn"] == "record":
            ids = self.records(instance, measurements, latest)
        else:
            ids = db.write(work)
        return JsonResponse({"instance": instance, "ids": ids}, status=201)

    @staticmethod
    def records(instance, measurements, latest) -> list[int]:
        """LAB_METRICS_TXN=record (ActiveRecord's shape): per record the look-up as an
        autocommit read, then its INSERT in a transaction of its own (pool only). A failure at
        record k leaves records 1..k-1 committed, as in Rails."""
        ids, ts = [], now()
        for name, value in measurements:
            previous = latest(db.DEFAULT, name)
            with transaction.atomic(using=db.DEFAULT):
                ids.append(Metric.objects.create(instance=instance, name=name, value=value,
                                                 previous=previous, created_at=ts).id)
        return ids


class Items(LabView):
    def post(self, request):
        body = read_json(request, required=True)
        if not isinstance(body, dict) or not isinstance(body.get("payload"), str):
            raise ApiError(400, 'the body must be {"payload": "<string>"}')
        payload = storable(body["payload"], "payload")
        if len(payload.encode("utf-8", "surrogatepass")) > MAX_PAYLOAD:
            raise ApiError(400, f"payload over {MAX_PAYLOAD} bytes")

        def work(alias: str) -> int:
            return Item.objects.using(alias).create(payload=payload, created_at=now()).id
        return JsonResponse({"id": db.write(work)}, status=201)


class ItemDetail(LabView):
    def get(self, request, id: str):
        try:
            item = Item.objects.filter(id=parse_id(id)).values("id", "payload", "created_at").get()
        except Item.DoesNotExist:
            raise ApiError(404, f"item {id} not found")
        return JsonResponse(item)


def user_row(uid: str, alias: str = db.DEFAULT) -> dict:
    try:
        return User.objects.using(alias).filter(uid=parse_id(uid)).values(*USER_FIELDS).get()
    except User.DoesNotExist:
        raise ApiError(404, f"user {uid} not found")


class UserDetail(LabView):
    def get(self, request, uid: str):
        return render(request, "user.html", user_row(uid))

    def post(self, request, uid: str):
        key = parse_id(uid)
        body = read_json(request, required=True)
        if not isinstance(body, dict):
            raise ApiError(400, 'the body must be {"departname": "<string>"}')
        departname = short_str(body.get("departname"), "departname")

        def work(alias: str) -> dict:
            users = User.objects.using(alias).filter(uid=key)
            if users.update(departname=departname, updates=F("updates") + 1) == 0:
                raise ApiError(404, f"user {uid} not found")  # rolls the transaction back
            return user_row(uid, alias)
        return render(request, "user.html", db.write(work))


class UserPage(LabView):
    def get(self, request, uid: str):
        return render(request, "user_page.html", user_row(uid))


# ----------------------------------------------------------------------------- Django's handlers

def bad_request(request, exception=None):
    return error(400, "bad request")


def not_found(request, exception=None):
    return error(404, "not found")


def server_error(request):
    return error(500, "internal error")
