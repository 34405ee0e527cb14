"""ckptweb settings: one module, every project variable read from a CKPTWEB_* environment variable.

With nothing set you get the embedded default: SQLite under var/ and a Celery broker that needs no
server (kombu's filesystem transport, folders under var/broker/, with a real separate worker).
CKPTWEB_DATABASE_URL and CKPTWEB_REDIS_URL switch to PostgreSQL and Redis. The README lists every
variable with its default.
"""

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from kombu import Exchange, Queue
from whitenoise.compress import Compressor

BASE_DIR = Path(__file__).resolve().parent.parent


def env(name: str, default: str = "") -> str:
    """Return CKPTWEB_<name>, or the content of the file named by CKPTWEB_<name>_FILE (container secrets)."""
    file_name = os.environ.get(f"CKPTWEB_{name}_FILE")
    if file_name:
        return Path(file_name).read_text().strip()
    return os.environ.get(f"CKPTWEB_{name}", default)


def env_flag(name: str, default: bool) -> bool:
    raw = env(name, "true" if default else "false").strip().lower()
    if raw in {"1", "true", "yes"}:
        return True
    if raw in {"0", "false", "no"}:
        return False
    raise ImproperlyConfigured(f"CKPTWEB_{name}={raw!r}: use true or false")


def env_int(name: str, default: int, *, minimum: int = 1) -> int:
    raw = env(name, str(default)).strip()
    if not raw.isdigit() or int(raw) < minimum:
        raise ImproperlyConfigured(f"CKPTWEB_{name}={raw!r}: use a whole number >= {minimum}")
    return int(raw)


def env_ratio(name: str, default: float) -> float:
    raw = env(name, str(default)).strip()
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not value >= 1.0:
        raise ImproperlyConfigured(f"CKPTWEB_{name}={raw!r}: use a number >= 1, such as 1.2")
    return value


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in env(name, default).split(",") if item.strip()]


DATA_DIR = Path(env("DATA_DIR", str(BASE_DIR / "var")))

DEBUG = env_flag("DEBUG", default=True)
SECRET_KEY = env("SECRET_KEY", "insecure-dev-key")
if not DEBUG and SECRET_KEY == "insecure-dev-key":
    raise ImproperlyConfigured("Set CKPTWEB_SECRET_KEY when CKPTWEB_DEBUG is false")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")

# Production (DEBUG off) is HTTPS only: secure cookies, redirect to https, HSTS. Behind a proxy
# that terminates TLS, name the header it sets (e.g. HTTP_X_FORWARDED_PROTO) so Django knows a
# request came in over https; turn the redirect off only when the proxy redirects itself.
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = not DEBUG
SECURE_SSL_REDIRECT = env_flag("SSL_REDIRECT", default=not DEBUG)
SECURE_HSTS_SECONDS = 0 if DEBUG else env_int("HSTS_SECONDS", 31_536_000, minimum=0)
# includeSubDomains covers names below ckptweb's own host only. Preload is a registration with
# the browsers that an internal tool's operators must choose themselves (CKPTWEB_HSTS_PRELOAD),
# so its deploy-check warning is silenced rather than the directive sent by default.
SECURE_HSTS_INCLUDE_SUBDOMAINS = not DEBUG
SECURE_HSTS_PRELOAD = env_flag("HSTS_PRELOAD", default=False)
SILENCED_SYSTEM_CHECKS = ["security.W021"]
if env("TLS_PROXY_HEADER"):
    SECURE_PROXY_SSL_HEADER = (env("TLS_PROXY_HEADER"), "https")
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "django_celery_beat",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    # Swagger UI's files, served by us from the pinned package: the docs page loads nothing from a CDN.
    "drf_spectacular_sidecar",
    "dashboards",
    "workers",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Static files never reach it: WhiteNoise answers them above, from its own compressed copies.
    "ckptweb.compression.GZipOutsideAdminMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "ckptweb.urls"
WSGI_APPLICATION = "ckptweb.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# Embedded default: SQLite in the data folder; CKPTWEB_DATABASE_URL=postgres://... for PostgreSQL.
DATABASES = {
    "default": dj_database_url.parse(env("DATABASE_URL", f"sqlite:///{DATA_DIR / 'ckptweb.sqlite3'}"), conn_max_age=60)
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # The web server, the worker's processes and beat all write: WAL lets readers go on while one
    # writes, IMMEDIATE transactions and a timeout make writers wait instead of failing at once.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
    }
else:
    # The test database of each test run gets its own name, so that two runs on one server (a
    # developer's and CI's) never drop each other's database.
    DATABASES["default"]["TEST"] = {"NAME": f"test_{DATABASES['default']['NAME']}_{os.getpid()}"}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"

# The JSON API: people use their session, machines (the progress listener, scripts) a token
# (`manage.py drf_create_token USER`). Nothing is anonymous.
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # Token first: an anonymous caller then gets 401 with "WWW-Authenticate: Token", not 403.
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # Per user (token), counted in the cache (Redis when configured): a runaway listener gets 429,
    # which pipelines/progress_listener.py retries and spools instead of losing events.
    "DEFAULT_THROTTLE_RATES": {"ingest": env("INGEST_RATE", "1200/min")},
}
SPECTACULAR_SETTINGS = {
    "TITLE": "ckptweb API",
    "DESCRIPTION": "Spark Structured Streaming checkpoints: what ckptweb has read, and progress ingestion.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema and the docs page need a token or a session, like the API they describe.
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # validatorUrl null: Swagger UI's validator badge (not in the layout drf-spectacular uses, but a
    # setting away) would send the schema's URL to validator.swagger.io for any host but localhost.
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "dashboards.api.responses.require_request_bodies",
    ],
}
LOGIN_REDIRECT_URL = "dashboards:checkpoint-list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "static"
# Production (DEBUG off) serves what `manage.py collectstatic` wrote: every file under a name with
# its content hash, with gzip and Brotli copies, which WhiteNoise sends with a one-year immutable
# Cache-Control. `manage.py demo` runs collectstatic and has its web server do the same in debug
# mode (CKPTWEB_SERVE_COLLECTED_STATIC): the demo is where a first visit is judged. The tests and a
# plain debug server need no collectstatic: files come straight from the apps' static folders under
# their plain names, re-read on every request.
SERVE_COLLECTED_STATIC = env_flag("SERVE_COLLECTED_STATIC", default=not DEBUG)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "ckptweb.static_storage.CollectedStaticFilesStorage"
        if SERVE_COLLECTED_STATIC
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}
# Decided here from the settings rather than left to WhiteNoise's default (settings.DEBUG when the
# middleware starts), so that pytest-django turning DEBUG off does not change what is served.
WHITENOISE_USE_FINDERS = WHITENOISE_AUTOREFRESH = not SERVE_COLLECTED_STATIC
# Source maps (megabytes of them in the API docs' bundles, fetched only by a browser's developer
# tools) are not compressed: they took most of collectstatic's time, which `manage.py demo` spends
# before it starts.
WHITENOISE_SKIP_COMPRESS_EXTENSIONS = (*Compressor.SKIP_COMPRESS_EXTENSIONS, "map")

# The broker. With CKPTWEB_REDIS_URL unset, kombu's filesystem transport with atomic writes
# (ckptweb/filesystem_broker.py: the stock one lets a worker read a half-written message and die):
# messages are files in CKPTWEB_BROKER_DIR, shared by the web process, celery beat and a real,
# separate worker process on the same machine. It needs no server but does not span machines: use
# Redis for that.
REDIS_URL = env("REDIS_URL")
BROKER_DIR = Path(env("BROKER_DIR", str(DATA_DIR / "broker")))
# The cache holds the login limiter's counters and the texts and series the pages build once per
# sync: shared through Redis when there is one, else per process and bounded in bytes
# (ckptweb/local_cache.py), since LocMemCache bounds only the number of entries.
LOCAL_CACHE_MB = env_int("LOCAL_CACHE_MB", 16)
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": "ckptweb",
    }
    if REDIS_URL
    else {"BACKEND": "ckptweb.local_cache.BoundedLocMemCache", "OPTIONS": {"MAX_BYTES": LOCAL_CACHE_MB * 2**20}}
}
# Sessions are read from the cache when it is shared (a query less on every page and API call);
# a per-process cache could keep a session alive in one process after a logout in another.
SESSION_ENGINE = "django.contrib.sessions.backends.cached_db" if REDIS_URL else "django.contrib.sessions.backends.db"
# A user's permissions likewise (dashboards/permission_cache.py): two queries less on every page.
AUTHENTICATION_BACKENDS = [
    "dashboards.permission_cache.CachedPermissionsBackend" if REDIS_URL else "django.contrib.auth.backends.ModelBackend"
]
# Failed logins allowed per client address and user name in a window, then 429 until it ends.
LOGIN_FAILURES_LIMIT = env_int("LOGIN_FAILURES_LIMIT", 10)
LOGIN_FAILURES_WINDOW_SECONDS = env_int("LOGIN_FAILURES_WINDOW_SECONDS", 900)
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
else:
    CELERY_BROKER_URL = "ckptwebfs://"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "control_folder": str(BROKER_DIR / "control"),
        "processed_folder": str(BROKER_DIR / "processed"),
        "store_processed": False,
    }
    # kombu expects the folders to exist; every process (web, beat, worker) reads this module first.
    for _folder in CELERY_BROKER_TRANSPORT_OPTIONS.values():
        if isinstance(_folder, str):
            Path(_folder).mkdir(parents=True, exist_ok=True)
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A web request that sends a task while the broker is down fails within about a second (the
# page says so, and beat sends the work again later) instead of hanging in retries.
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.5, "interval_max": 0.5}
CELERY_BROKER_CONNECTION_TIMEOUT = 2
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
# Static entries; django-celery-beat's scheduler copies them into its table at start. The
# per-checkpoint syncs are rows of that table (dashboards/schedules.py).
CELERY_BEAT_SCHEDULE = {
    "tail-event-logs": {
        "task": "workers.tasks.tail_event_logs",
        "schedule": float(env_int("EVENT_LOG_TAIL_SECONDS", 30)),
    },
    # Maintenance runs whose worker died (lease expired) are resumed from where they stopped.
    "resume-interrupted-maintenance": {"task": "workers.tasks.resume_interrupted_maintenance", "schedule": 60.0},
    "prune-history": {"task": "workers.tasks.prune_history", "schedule": 3600.0},
    "prune-maintenance-backups": {"task": "workers.tasks.prune_maintenance_backups", "schedule": 3600.0},
    # Chart roll-ups of history stored before they existed (workers/rollup_builds.py): one owner
    # lookup when there is nothing to build.
    "build-missing-rollups": {"task": "workers.tasks.build_missing_rollups", "schedule": 60.0},
}
CELERY_TIMEZONE = TIME_ZONE
# Queues by kind of work, so that each can get its own workers and concurrency (docs/scaling.md):
# syncs (storage-bound), state reads (CPU-bound), maintenance (writes; few at a time) and the
# housekeeping of celery beat. CELERY_TASK_QUEUES lists them all, so a worker started without -Q
# (the demo, a one-machine setup) consumes every queue.
TASK_QUEUES = {
    "sync": env("QUEUE_SYNC", "sync"),
    "state": env("QUEUE_STATE", "state"),
    "maintenance": env("QUEUE_MAINTENANCE", "maintenance"),
    "housekeeping": env("QUEUE_HOUSEKEEPING", "celery"),
}
# "s3=sync-s3,hdfs=sync-hdfs": the syncs of checkpoints on those storage schemes go to queues of
# their own, so a backend's concurrency is that of the workers consuming its queue.
SYNC_QUEUES_BY_SCHEME = dict(item.split("=", 1) for item in env_list("SYNC_QUEUES_BY_SCHEME", "") if "=" in item)
CELERY_TASK_DEFAULT_QUEUE = TASK_QUEUES["housekeeping"]
# Each queue has its own direct exchange, as the queues Celery creates itself do: a queue bound to
# a shared exchange by a shared routing key would receive every other queue's messages too.
CELERY_TASK_QUEUES = [
    Queue(name, Exchange(name), routing_key=name)
    for name in dict.fromkeys([*TASK_QUEUES.values(), *SYNC_QUEUES_BY_SCHEME.values()])
]
CELERY_TASK_ROUTES = ["workers.routing.route_task"]

# Checkpoints may only be registered under these roots (local paths or fsspec URLs, comma-separated).
CHECKPOINT_ROOTS = env_list("CHECKPOINT_ROOTS", str(DATA_DIR / "checkpoints"))
SYNC_INTERVAL_SECONDS = env_int("SYNC_INTERVAL_SECONDS", 30)
# A sync that has not finished after this long is presumed dead and its lock may be taken over.
SYNC_LEASE_SECONDS = env_int("SYNC_LEASE_SECONDS", 300)
# Syncs probe the next expected offsets/N and commits/N names; a full listing of both directories
# (which notices purges and files written out of order) runs at most this often.
# 0: list on every sync, as before probing existed.
RECONCILE_INTERVAL_SECONDS = env_int("RECONCILE_INTERVAL_SECONDS", 3600, minimum=0)
# S3-compatible endpoint for s3:// checkpoints (MinIO, moto, ...); empty: AWS. Credentials are
# never stored by ckptweb: s3fs takes them from boto's chain (AWS_* variables, ~/.aws, roles).
S3_ENDPOINT_URL = env("S3_ENDPOINT_URL", "")
# Object-store calls: connect and read timeout, and attempts per call (botocore's standard retries).
STORAGE_TIMEOUT_SECONDS = env_int("STORAGE_TIMEOUT_SECONDS", 10)
STORAGE_MAX_ATTEMPTS = env_int("STORAGE_MAX_ATTEMPTS", 3)
# Between full walks a sync probes, at most this often, the names Spark writes or deletes beyond
# offsets/ and commits/ (the compactible logs' next batch files, state snapshots written and
# versions deleted by maintenance): calls that grow with what is new (workers/probe_pass.py).
INSPECT_INTERVAL_SECONDS = env_int("INSPECT_INTERVAL_SECONDS", 300, minimum=0)
# The full walk (file inventory, integrity checks, every compactible log and state store) lists
# every directory, so its calls grow with the retained files: it runs on registration, when asked
# for on the query page, when a probe finds what it cannot explain, and at most this often.
FULL_WALK_INTERVAL_SECONDS = env_int("FULL_WALK_INTERVAL_SECONDS", 6 * 3600, minimum=0)
# History kept (workers/retention.py, hourly on celery beat): sync runs older than this many days
# are folded into per-checkpoint totals (the /metrics counters go on from them) and deleted;
# inventory passes older than INVENTORY_HISTORY_DAYS are thinned to the last pass of each day.
SYNC_HISTORY_DAYS = env_int("SYNC_HISTORY_DAYS", 7, minimum=1)
INVENTORY_HISTORY_DAYS = env_int("INVENTORY_HISTORY_DAYS", 2, minimum=1)
# Maintenance: a confirmed plan older than this must be made again; a running worker renews its
# lease this often (a crashed worker's run is resumed once the lease expires); a query counts as
# stopped when no batch and no live progress arrived for MAINTENANCE_QUIET_SECONDS; with
# MAINTENANCE_REQUIRES_APPROVAL a second person with the approve permission must approve a run.
# The risky actions (rewind, skip, repair, undo: they change what the query computes next) need
# that approval whatever MAINTENANCE_REQUIRES_APPROVAL says, unless this is turned off.
MAINTENANCE_PLAN_MAX_AGE_SECONDS = env_int("MAINTENANCE_PLAN_MAX_AGE_SECONDS", 3600)
MAINTENANCE_LEASE_SECONDS = env_int("MAINTENANCE_LEASE_SECONDS", 120)
MAINTENANCE_QUIET_SECONDS = env_int("MAINTENANCE_QUIET_SECONDS", 300)
MAINTENANCE_REQUIRES_APPROVAL = env_flag("MAINTENANCE_REQUIRES_APPROVAL", default=False)
MAINTENANCE_RISKY_ACTIONS_NEED_APPROVAL = env_flag("MAINTENANCE_RISKY_ACTIONS_NEED_APPROVAL", default=True)
# A risky run's backup (what it deleted or overwrote, inside the checkpoint) is kept this many days
# after the run ended; until then the run can be undone. Pruned hourly (workers/backup_retention.py).
MAINTENANCE_BACKUP_RETENTION_DAYS = env_int("MAINTENANCE_BACKUP_RETENTION_DAYS", 7, minimum=1)
# The health model (dashboards/health/query_status.py): the floors under the thresholds a query's own
# history gives. Stopped: no batch and no progress for the longer of this and 3 usual gaps between
# batches. Stalled: a planned batch not committed for the longer of this and 10 usual batch
# durations. Falling behind: input rate over this many times the processed rate, or batches this
# many times longer than the trigger interval.
HEALTH_STOPPED_AFTER_SECONDS = env_int("HEALTH_STOPPED_AFTER_SECONDS", 300)
HEALTH_STALLED_AFTER_SECONDS = env_int("HEALTH_STALLED_AFTER_SECONDS", 120)
HEALTH_BEHIND_RATIO = env_ratio("HEALTH_BEHIND_RATIO", 1.2)
# A full pass that finds more state store directories than this hands the row counting to
# tasks on the state queue, STATE_FANOUT_CHUNK_PARTITIONS operator partitions each (0: never).
STATE_FANOUT_PARTITIONS = env_int("STATE_FANOUT_PARTITIONS", 64, minimum=0)
STATE_FANOUT_CHUNK_PARTITIONS = env_int("STATE_FANOUT_CHUNK_PARTITIONS", 50, minimum=1)
# A chart roll-up build of older history (workers/rollup_builds.py) reads this many batch ids per
# task run and resumes from there in the next (any machine): about 2 s of a housekeeping worker.
ROLLUP_BUILD_CHUNK_BATCHES = env_int("ROLLUP_BUILD_CHUNK_BATCHES", 16_384, minimum=8)
# Counting a state partition's rows reads its whole load chain: partitions needing more are
# listed with "not counted" instead.
STATE_ROWS_MAX_BYTES = env_int("STATE_ROWS_MAX_BYTES", 64 * 1024 * 1024)
# A sync that stores newly committed batches brings the state figures to the version they
# committed by reading only the new versions' delta/changelog files (workers/state_follow.py),
# with each partition's key set kept in DATA_DIR/statekeys. On an object store (GET requests cost
# money and time) it does so at most once per this many seconds per checkpoint; local: every sync.
STATE_FOLLOW_MIN_SECONDS = env_int("STATE_FOLLOW_MIN_SECONDS", 60, minimum=0)
STATE_KEYS_DIR = DATA_DIR / "statekeys"
# Assumed throughput of writing a compact file, for the "compaction slower than the trigger"
# projection of the compaction panel (no progress metric times the compaction itself).
COMPACTION_BYTES_PER_SECOND = env_int("COMPACTION_BYTES_PER_SECOND", 20 * 1024 * 1024)

# /metrics (Prometheus). With a token set, scrapers must send "Authorization: Bearer <token>"; with
# none, /metrics is public like /health/ (it shows checkpoint and query names, no file content).
METRICS_TOKEN = env("METRICS_TOKEN")
# Per-operator labels on the state families: one series per stateful operator instead of a sum.
METRICS_PER_OPERATOR = env_flag("METRICS_PER_OPERATOR", default=False)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", "INFO")},
}
