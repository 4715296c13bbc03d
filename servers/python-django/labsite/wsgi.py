"""The WSGI application gunicorn serves (server.py loads it in each worker)."""
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "labsite.settings")
application = get_wsgi_application()
