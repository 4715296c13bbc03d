"""The server's middleware (settings.MIDDLEWARE, outermost first):

- CountRequests: requests_handled (every answer but /health's, counted as it leaves), and
  the request body read to its end before the answer goes (a 413 or 400 sent on a body still
  arriving would otherwise make gunicorn close the connection with it unread: a reset); a HEAD
  answer loses its body (Django's views write GET's);
- django.middleware.security.SecurityMiddleware, django.middleware.common.CommonMiddleware
  (Content-Length on every answer; APPEND_SLASH is off: no redirects);
- RejectUncleanPaths: a raw path with an empty, `.` or `..` segment is a 404 before routing;
- ApiErrors: what a view raised, as the contract's JSON error (ApiError, a busy or lost
  database: 503); anything else goes on to Django's handler500 (labsite/urls.py), a JSON 500.
"""
from __future__ import annotations

import re
import urllib.parse

from lab import db
from lab.views import error

DRAIN_MAX = 64 * 1024 * 1024  # a body left unread past this is not read (gunicorn closes the connection)


class CountRequests:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        stream, left = request.environ.get("wsgi.input"), DRAIN_MAX
        while stream is not None and left > 0 and (chunk := stream.read(min(65536, left))):
            left -= len(chunk)
        if request.method == "HEAD" and not response.streaming:
            response.content = b""  # HEAD: GET's headers (its Content-Length too), no body
        if request.path_info != "/health":
            db.COUNTER.bump()
        return response


# A raw path with an empty, "." or ".." segment ("//hello", "/./hello", "/items/../hello").
UNCLEAN_PATH = re.compile(r"//|/\.\.?(?:/|\Z)")


def raw_path(request) -> str:
    """The request target's path as sent (gunicorn's RAW_URI), not PATH_INFO (percent-decoded:
    "%2e%2e" is an ordinary segment, "/items/%2e%2e" a bad id)."""
    raw = request.META.get("RAW_URI") or request.path
    if not raw.startswith("/"):  # absolute-form: http://host/path
        raw = urllib.parse.urlsplit(raw).path or "/"
    return raw.split("?", 1)[0].split("#", 1)[0]


class RejectUncleanPaths:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if UNCLEAN_PATH.search(raw_path(request)):
            return error(404, "not found")
        return self.get_response(request)


class ApiErrors:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        mapped = db.classify(exception)
        return error(mapped.status, mapped.message) if mapped else None
