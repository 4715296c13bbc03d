"""Django settings of python-django, from the LAB_* environment (lab/config.py; server.py has
checked it before gunicorn started, each worker reads it again here)."""
from lab.config import databases, parse_config

LAB = parse_config()  # the knobs, for the views and /health

SECRET_KEY = "python-django lab server: nothing is signed (no sessions, no CSRF, no messages)"
DEBUG = False
# The lab reaches a server by 127.0.0.1:<port>, a network namespace's 198.18.x.y, or an ssh
# host's name: any Host is served (no cookies, no sessions: nothing a forged Host could reach).
ALLOWED_HOSTS = ["*"]

INSTALLED_APPS = ["lab"]
MIDDLEWARE = [
    "lab.middleware.CountRequests",
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.common.CommonMiddleware",
    "lab.middleware.RejectUncleanPaths",
    "lab.middleware.ApiErrors",
]
APPEND_SLASH = False  # "/hello/" is an unknown path (404), not a redirect to "/hello"
ROOT_URLCONF = "labsite.urls"
WSGI_APPLICATION = "labsite.wsgi.application"

TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates",
    "DIRS": [str(LAB["templates"])],  # servers/templates: {{field}}, autoescaped (& < > " ')
    "APP_DIRS": False,
    "OPTIONS": {"context_processors": []},
}]

DATABASES = databases(LAB)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# A request body is read whole only up to the contract's 1 MiB (the views answer 413 above it).
DATA_UPLOAD_MAX_MEMORY_SIZE = 1_048_576

USE_TZ = True
TIME_ZONE = "UTC"
USE_I18N = False

# No access log; an exception no view handled goes to stderr with its traceback (the 500's
# body says only "internal error").
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"uncaught": {"()": "lab.logs.UncaughtOnly"}},
    "handlers": {"stderr": {"class": "logging.StreamHandler", "filters": ["uncaught"]}},
    "loggers": {"django.request": {"handlers": ["stderr"], "level": "ERROR", "propagate": False}},
}
