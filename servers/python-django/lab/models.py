"""The four tables of servers/schema.sql (and schema.postgres.sql), as they are: Django neither
creates nor migrates them (managed = False). Timestamps are TEXT in the schema, ISO 8601 strings
the server writes itself (`2026-11-21T11:08:01.123456Z`), so they are TextFields here too."""
from django.db import models


class Request(models.Model):
    """POST /requests, GET /requests/{id} (seed 000: the Rails scaffold `Request`)."""
    id = models.BigAutoField(primary_key=True)
    uid = models.TextField(unique=True)
    ip = models.TextField()
    method = models.TextField()
    url = models.TextField()
    parameters = models.TextField()
    created_at = models.TextField()
    updated_at = models.TextField()

    class Meta:
        managed = False
        db_table = "requests"


class Metric(models.Model):
    """POST /metrics (seed 001)."""
    id = models.BigAutoField(primary_key=True)
    instance = models.TextField()
    name = models.TextField()
    value = models.FloatField()
    previous = models.FloatField(null=True)
    created_at = models.TextField()

    class Meta:
        managed = False
        db_table = "metrics"


class Item(models.Model):
    """POST /items, GET /items/{id} (seed 002)."""
    id = models.BigAutoField(primary_key=True)
    payload = models.TextField()
    created_at = models.TextField()

    class Meta:
        managed = False
        db_table = "items"


class User(models.Model):
    """GET/POST /users/{uid} (seed 004's `userinfo`)."""
    uid = models.BigIntegerField(primary_key=True)
    username = models.TextField()
    departname = models.TextField()
    created = models.TextField()
    updates = models.BigIntegerField(default=0)
    bio = models.TextField(default="")

    class Meta:
        managed = False
        db_table = "users"
