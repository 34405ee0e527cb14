from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from dashboards.api import ProgressIngestView
from dashboards.login_limit import LimitedLoginView
from dashboards.metrics import metrics

urlpatterns = [
    path("login/", LimitedLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/ingest/progress/", ProgressIngestView.as_view(), name="api-ingest-progress"),
    path("metrics", metrics, name="metrics"),
    path("api/v1/", include("dashboards.read_api.urls")),
    path("api/schema/", login_required(SpectacularAPIView.as_view()), name="api-schema"),
    path("", include("dashboards.urls")),
]
