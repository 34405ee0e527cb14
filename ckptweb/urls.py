from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from dashboards.api.ingest import ProgressIngestView
from dashboards.login_limit import LimitedLoginView
from dashboards.metrics import metrics

urlpatterns = [
    path("login/", LimitedLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/ingest/progress/", ProgressIngestView.as_view(), name="api-ingest-progress"),
    path("metrics", metrics, name="metrics"),
    path("api/v1/", include("dashboards.api.read.urls")),
    # The schema answers a token or a session (401 otherwise, like the API); the docs page is for
    # people, so it sends them to the login form, and has the app's header to go back.
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path(
        "api/docs/",
        login_required(SpectacularSwaggerView.as_view(url_name="api-schema", template_name="dashboards/api_docs.html")),
        name="api-docs",
    ),
    path("", include("dashboards.urls")),
]
# Under /api/, a URL that matches no route (e.g. a checkpoint id that is not a number) answers JSON.
handler404 = "dashboards.views.errors.not_found"
