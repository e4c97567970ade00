"""URLs served by Django (the dashboard, login, admin). The A2A endpoints, `/metrics` and the
static files are served outside Django's middleware stack: see `config/asgi.py`."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("", include("dashboard.urls")),
]
