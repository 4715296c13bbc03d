"""The contract's routes (servers/openapi.yaml), matched on the path as sent: no trailing-slash
variants, no redirects; an unknown path is handler404's JSON 404."""
from django.urls import path

from lab import views

urlpatterns = [
    path("health", views.Health.as_view()),
    path("hello", views.Hello.as_view()),
    path("delay/<str:ms>", views.Delay.as_view()),
    path("requests", views.Requests.as_view()),
    path("requests/<str:id>", views.RequestDetail.as_view()),
    path("metrics", views.Metrics.as_view()),
    path("items", views.Items.as_view()),
    path("items/<str:id>", views.ItemDetail.as_view()),
    path("users/<str:uid>", views.UserDetail.as_view()),
    path("users/<str:uid>/page", views.UserPage.as_view()),
]

handler400 = "lab.views.bad_request"
handler404 = "lab.views.not_found"
handler500 = "lab.views.server_error"
