from django.urls import path

from dashboard import views

app_name = "dashboard"

urlpatterns = [
    path("", views.traffic, name="traffic"),
    path("agents/", views.agents, name="agents"),
]
