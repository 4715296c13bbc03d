from django.apps import AppConfig


class LabConfig(AppConfig):
    name = "lab"
    default_auto_field = "django.db.models.BigAutoField"
