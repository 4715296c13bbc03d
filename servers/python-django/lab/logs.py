import logging


class UncaughtOnly(logging.Filter):
    """django.request's records of exceptions no view handled (a 500 with its traceback), not
    the warnings it logs for every 4xx and 503 (that would be an access log of errors)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.exc_info is not None
