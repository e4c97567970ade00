"""One settings module for every deployment, driven by environment variables.

Embedded default: SQLite in WAL mode and the in-memory channel layer (one process).
Scaled: set DATABASE_URL to PostgreSQL and REDIS_URL to Redis; run several workers.
Every variable read here is listed in the README's configuration reference.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

# The a2a-sdk wraps its methods in OpenTelemetry spans. With no exporter configured they only
# cost CPU on every call; set this to true (with an OTel SDK installed) to collect them.
os.environ.setdefault("OTEL_INSTRUMENTATION_A2A_SDK_ENABLED", "false")


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    if value.lower() in {"1", "true", "yes", "on"}:
        return True
    if value.lower() in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (true/false), got {value!r}")


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if not value:
        return default
    try:
        return int(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be an integer, got {value!r}") from exc


def env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    if not value:
        return default
    try:
        return float(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be a number, got {value!r}") from exc


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    """One of `choices` (compared without case), else `default` when unset or empty; anything
    else stops the hub at start, naming the variable and the values it takes."""
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    for choice in choices:
        if value.lower() == choice.lower():
            return choice
    raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)}, got {value!r}")


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


DEBUG = env_bool("DEBUG", False)
DATA_DIR = Path(os.environ.get("HUB_DATA_DIR", BASE_DIR / "var"))


def _secret_key() -> str:
    """SECRET_KEY from the environment, else a random key kept in DATA_DIR (made on first use)."""
    if key := os.environ.get("SECRET_KEY"):
        return key
    path = DATA_DIR / "secret_key"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        import secrets

        DATA_DIR.mkdir(parents=True, exist_ok=True)
        key = secrets.token_urlsafe(50)
        path.write_text(key)
        path.chmod(0o600)
        return key


SECRET_KEY = _secret_key()


def _secrets_key() -> str:
    """HUB_SECRETS_KEY (a Fernet key: 32 url-safe base64 bytes) from the environment, else one
    kept in DATA_DIR (made on first use), like SECRET_KEY. It seals the credentials the hub
    calls agents with (`a2a_core/sealed.py`); losing it loses them, not the agents."""
    if key := os.environ.get("HUB_SECRETS_KEY"):
        return key
    path = DATA_DIR / "secrets_key"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        import base64
        import secrets

        DATA_DIR.mkdir(parents=True, exist_ok=True)
        # Several worker processes may start at once: the first link wins (as the card key's).
        draft = DATA_DIR / f"secrets_key.{os.getpid()}.tmp"
        draft.write_text(base64.urlsafe_b64encode(secrets.token_bytes(32)).decode())
        draft.chmod(0o600)
        try:
            os.link(draft, path)
        except FileExistsError:
            pass
        finally:
            draft.unlink()
        return path.read_text().strip()


HUB_SECRETS_KEY = _secrets_key()

# This hub's name among hubs that call each other (a2a_core/federation.py); empty: this hub
# neither sends its delegation chain to the agents it calls nor takes one from a peer hub.
HUB_ID = os.environ.get("HUB_ID", "").strip()
if HUB_ID and not re.fullmatch(r"[a-z0-9][a-z0-9_.-]{0,63}", HUB_ID):
    raise ImproperlyConfigured(
        f"HUB_ID must be 1-64 lower-case letters, digits, '.', '_' or '-', got {HUB_ID[:80]!r}"
    )

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

# Not "daphne": `a2a serve --server daphne` runs `python -m daphne`; its app (a runserver
# serving ASGI) imported Twisted into every manage.py command, 0.35 s of each start.
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "a2a_core",
    "dashboard",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"

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
                "dashboard.context_processors.nav",
            ],
        },
    },
]

# --- Database ---------------------------------------------------------------------------------

DATABASE_URL = os.environ.get("DATABASE_URL") or f"sqlite:///{DATA_DIR / 'hub.sqlite3'}"
_db = dj_database_url.parse(DATABASE_URL)
if _db["ENGINE"] == "django.db.backends.sqlite3":
    Path(_db["NAME"]).parent.mkdir(parents=True, exist_ok=True)
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    # IMMEDIATE takes the write lock when a transaction starts, so read-then-write services
    # (counters, state machines) never race.
    _db["OPTIONS"] = {"transaction_mode": "IMMEDIATE"}
    # Django's SQLite backend in WAL mode, with writers queued on a file lock
    # (a2a_core/storage/sqlite/base.py).
    _db["ENGINE"] = "a2a_core.storage.sqlite"
    _db["CONN_MAX_AGE"] = None
    _db["TEST"] = {"NAME": str(DATA_DIR / "test-hub.sqlite3")}
elif _db["ENGINE"] == "django.db.backends.postgresql":
    # Django's backend without the `LIKE 'prefix%'` indexes no query here uses
    # (a2a_core/storage/postgresql/base.py).
    _db["ENGINE"] = "a2a_core.storage.postgresql"
    # A pooled connection per request; CONN_MAX_AGE > 0 under ASGI leaks connections.
    _db["CONN_MAX_AGE"] = 0
    _db.setdefault("OPTIONS", {})
    _db["OPTIONS"].setdefault(
        "pool", {"min_size": 2, "max_size": env_int("HUB_DB_POOL_SIZE", 20), "timeout": 10}
    )
    # The write path's statements bind their values on the server and are prepared on a
    # connection from their fifth run there (a2a_core/storage/postgres.py); Django's own
    # queries bind on the client and are never prepared. 0: prepare nothing (for a proxy
    # that cannot keep prepared statements, such as PgBouncer before 1.21 in transaction mode).
    _prepare = env_int("HUB_DB_PREPARE_THRESHOLD", 5)
    _db["OPTIONS"].setdefault("prepare_threshold", _prepare if _prepare > 0 else None)
else:
    raise ImproperlyConfigured(
        f"DATABASE_URL must be sqlite:/// or postgres://, got engine {_db['ENGINE']}"
    )
DATABASES = {"default": _db}
# PostgreSQL: group commits in flight at once per process, each on a writer thread with a
# connection of its own (a2a_core/storage/writers.py). SQLite has one writer.
HUB_DB_WRITERS = env_int("HUB_DB_WRITERS", 2)
# PostgreSQL: every so many seconds each process vacuums the tables every call updates when
# they hold dead rows (a2a_core/storage/postgresql/vacuum.py); 0 leaves them to autovacuum.
HUB_PG_VACUUM_SECONDS = env_float("HUB_PG_VACUUM_SECONDS", 2.0)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Channels: the event bus ------------------------------------------------------------------

REDIS_URL = os.environ.get("REDIS_URL", "")
# Redis pub/sub channels are shared by every database of a server: hubs (or test runs) that
# share a Redis server on different databases keep their events apart by this prefix.
HUB_CHANNEL_PREFIX = os.environ.get("HUB_CHANNEL_PREFIX") or (
    f"a2ahub{urlsplit(REDIS_URL).path.strip('/') or '0'}" if REDIS_URL else "a2ahub"
)
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL], "prefix": HUB_CHANNEL_PREFIX},
        }
    }
else:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels.layers.InMemoryChannelLayer",
            "CONFIG": {"capacity": 1000, "expiry": 60},
        }
    }

# --- Auth, i18n, static ------------------------------------------------------------------------

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard:overview"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "static"

# --- Production hardening (all on unless DEBUG; see README "Production") ---------------------

SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = env_bool("HUB_SECURE_COOKIES", False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_SSL_REDIRECT = env_bool("HUB_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = env_int("HUB_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = SECURE_HSTS_SECONDS > 0
SECURE_HSTS_PRELOAD = SECURE_HSTS_SECONDS > 0
if env_bool("HUB_BEHIND_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# --- The hub -----------------------------------------------------------------------------------


def _card_signing_key() -> str:
    """HUB_CARD_SIGNING_KEY (a PEM private key, EC P-256 or RSA) from the environment, else an
    EC P-256 key kept in DATA_DIR (made on first use), like SECRET_KEY."""
    if key := os.environ.get("HUB_CARD_SIGNING_KEY"):
        return key
    path = DATA_DIR / "card_signing_key.pem"
    try:
        return path.read_text()
    except FileNotFoundError:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ec

        DATA_DIR.mkdir(parents=True, exist_ok=True)
        pem = (
            ec.generate_private_key(ec.SECP256R1())
            .private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
            .decode()
        )
        # Several worker processes may start at once: the first link wins, and every process
        # reads back the key that won, so they all sign with the same one.
        draft = DATA_DIR / f"card_signing_key.{os.getpid()}.tmp"
        draft.write_text(pem)
        draft.chmod(0o600)
        try:
            os.link(draft, path)
        except FileExistsError:
            pass
        finally:
            draft.unlink()
        return path.read_text()


# Every card the hub serves carries a JWS made with this key; /.well-known/jwks.json
# publishes its public half.
HUB_CARD_SIGNING_KEY = _card_signing_key()
# The pinned card signers: JWKS URLs whose keys, and only theirs, may verify the cards agents
# register (a signature's own `jku` is then never fetched). A signed card none of whose
# signatures verifies with a trusted key is refused.
HUB_CARD_SIGNER_JWKS = env_list("HUB_CARD_SIGNER_JWKS", "")
# With no signer pinned: follow a signature's own `jku` (https only). Off: a key found there
# shows only that whoever wrote the card also signed it.
HUB_CARD_SIGNER_FOLLOW_JKU = env_bool("HUB_CARD_SIGNER_FOLLOW_JKU", False)
# Register a signed card none of whose signatures could be checked (no trusted key found),
# saying so; a signature that does not verify, or cannot be read, is refused all the same.
HUB_CARD_ALLOW_UNVERIFIED = env_bool("HUB_CARD_ALLOW_UNVERIFIED", False)
# How long fetching an identity provider's or a card signer's JWKS may take in all (connecting,
# redirects, the whole body); callers asking for the same set meanwhile wait for that one fetch.
HUB_JWKS_TIMEOUT = env_float("HUB_JWKS_TIMEOUT", 5.0)
# How long fetched JWKS keys are used before they are fetched again (an unknown `kid` fetches
# at once, so a rotation is picked up without waiting).
HUB_JWKS_CACHE_SECONDS = env_int("HUB_JWKS_CACHE_SECONDS", 300)
# ... but at most once per this many seconds, so tokens with made-up `kid`s cannot make the
# hub hammer an identity provider.
HUB_JWKS_REFRESH_COOLDOWN = env_float("HUB_JWKS_REFRESH_COOLDOWN", 30.0)
# A JWKS that could not be fetched (down, slow, broken) is not asked again for this long: its
# callers are answered 503 with the reason at once.
HUB_JWKS_FAILURE_CACHE_SECONDS = env_float("HUB_JWKS_FAILURE_CACHE_SECONDS", 10.0)

# Public base URL used when cards are rewritten to point at the hub; empty = from the request.
HUB_PUBLIC_URL = os.environ.get("HUB_PUBLIC_URL", "").rstrip("/")
HUB_NAME = os.environ.get("HUB_NAME", "A2A Hub")
# The tamper-evident record (docs/configuration.md): on by default; how often each process
# seals what was written since (the log's merge delay) and signs a checkpoint when it grew.
HUB_LEDGER = env_choice("HUB_LEDGER", "on", ("on", "off")) == "on"
HUB_LEDGER_SEAL_SECONDS = env_float("HUB_LEDGER_SEAL_SECONDS", 1.0)
HUB_LEDGER_CHECKPOINT_SECONDS = env_float("HUB_LEDGER_CHECKPOINT_SECONDS", 60.0)
# The gRPC binding's port in each server process; 0 or "off": no gRPC. `a2a serve` (and a
# worker started on its own) defaults it to the HTTP port + 1.
HUB_GRPC_PORT = (
    0 if os.environ.get("HUB_GRPC_PORT", "").lower() == "off" else env_int("HUB_GRPC_PORT", 0)
)
HUB_GRPC_HOST = os.environ.get("HUB_GRPC_HOST", "127.0.0.1")
# The gRPC address (host:port) cards give; empty = the host callers used, with HUB_GRPC_PORT.
HUB_GRPC_PUBLIC_ADDRESS = os.environ.get("HUB_GRPC_PUBLIC_ADDRESS", "")
# Which of the cards the hub serves for agents list its gRPC interface: "declared" (default)
# only an agent whose own card lists a gRPC one (so a card mirrors the agent: Google ADK, which
# refuses a card with an interface off the card's own origin, reads it whenever it reads the
# agent's own), "always" every agent's, "never" none. The hub's own card lists it unless
# "never". Either way the hub serves gRPC for every agent (HUB_GRPC_PORT).
HUB_CARD_GRPC = env_choice("HUB_CARD_GRPC", "declared", ("declared", "always", "never"))
# The card served to a request without A2A-Version: "agent" (default) in the version the agent's
# own card is in (the 0.3 view, 1.0 fields included, when it lists a 0.3 interface; else exactly
# 1.0), "0.3" the 0.3 view always, "1.0" exactly 1.0 always.
HUB_CARD_UNVERSIONED = env_choice("HUB_CARD_UNVERSIONED", "agent", ("agent", "0.3", "1.0"))
# Hard limits on what one A2A request may carry.
HUB_MAX_BODY_BYTES = env_int("HUB_MAX_BODY_BYTES", 1024 * 1024)
HUB_MAX_PARTS = env_int("HUB_MAX_PARTS", 64)
# Longest `Authorization` header (a hub token or a JWT) the hub reads; a longer one is refused
# by its size (431) before anything is looked up or verified. 8 KiB: nginx's limit on one line.
HUB_MAX_AUTHORIZATION_BYTES = env_int("HUB_MAX_AUTHORIZATION_BYTES", 8192)
# How long the hub waits for an endpoint agent before failing the task.
HUB_FORWARD_TIMEOUT = env_float("HUB_FORWARD_TIMEOUT", 30.0)
# An endpoint agent's task still active this long past its deadline was being delivered by a
# server process that stopped: the sweeper fails it, with the reason.
HUB_ABANDONED_GRACE_SECONDS = env_float("HUB_ABANDONED_GRACE_SECONDS", 15.0)
# A server process following an endpoint agent's unfinished task renews its lease on it; when
# the process stops, another takes the task over once the lease has run out.
HUB_FOLLOW_LEASE_SECONDS = env_float("HUB_FOLLOW_LEASE_SECONDS", 10.0)
# Scaled mode: an agent's incomingConcurrent counted across every process and host through
# leases in Redis (on), or per process as the limit divided by its workers (off).
HUB_SHARED_SLOTS = env_bool("HUB_SHARED_SLOTS", False)
# Inbox agents: a delivery not acknowledged within HUB_INBOX_ACK_SECONDS is sent again; one
# connection has at most HUB_INBOX_WINDOW deliveries unacknowledged. A websocket reports in every
# HUB_INBOX_HEARTBEAT_SECONDS; a session not seen for HUB_INBOX_STALE_SECONDS (websocket) or
# HUB_INBOX_POLL_GRACE (long-poll) is gone and, if it was the last, the agent is offline.
HUB_INBOX_ACK_SECONDS = env_float("HUB_INBOX_ACK_SECONDS", 30.0)
HUB_INBOX_WINDOW = env_int("HUB_INBOX_WINDOW", 100)
HUB_INBOX_HEARTBEAT_SECONDS = env_float("HUB_INBOX_HEARTBEAT_SECONDS", 20.0)
HUB_INBOX_STALE_SECONDS = env_float("HUB_INBOX_STALE_SECONDS", 90.0)
HUB_INBOX_POLL_GRACE = env_float("HUB_INBOX_POLL_GRACE", 60.0)
# Most recipients one broadcast or knowledge share may fan out to.
HUB_FANOUT_MAX_RECIPIENTS = env_int("HUB_FANOUT_MAX_RECIPIENTS", 500)
# A fan-out copy for an endpoint agent that is down is tried this many times (1, 2, 4... s apart).
HUB_FANOUT_MAX_ATTEMPTS = env_int("HUB_FANOUT_MAX_ATTEMPTS", 6)
# When set, GET /metrics needs "Authorization: Bearer <token>".
HUB_METRICS_TOKEN = os.environ.get("HUB_METRICS_TOKEN", "")
# A2A push notifications: signed POSTs of a task's events to webhooks its parties configure.
HUB_PUSH_ENABLED = env_bool("HUB_PUSH_ENABLED", True)
# Host names and CIDRs that may be webhook targets although private or loopback.
HUB_PUSH_ALLOWED_HOSTS = env_list("HUB_PUSH_ALLOWED_HOSTS", "")
HUB_PUSH_TIMEOUT = env_float("HUB_PUSH_TIMEOUT", 10.0)
HUB_PUSH_MAX_ATTEMPTS = env_int("HUB_PUSH_MAX_ATTEMPTS", 6)
# The wait before the first retry; each further retry waits twice as long.
HUB_PUSH_RETRY_SECONDS = env_float("HUB_PUSH_RETRY_SECONDS", 1.0)
# People told when an escalation waits (see a2a_core/delivery/notify.py): the dashboard's
# address in their links, retries, and how long before a deadline the warning goes out.
HUB_DASHBOARD_URL = (
    os.environ.get("HUB_DASHBOARD_URL", "").rstrip("/") or HUB_PUBLIC_URL or "http://127.0.0.1:8000"
)
HUB_NOTIFY_TIMEOUT = env_float("HUB_NOTIFY_TIMEOUT", 10.0)
HUB_NOTIFY_MAX_ATTEMPTS = env_int("HUB_NOTIFY_MAX_ATTEMPTS", 6)
HUB_NOTIFY_RETRY_SECONDS = env_float("HUB_NOTIFY_RETRY_SECONDS", 1.0)
HUB_NOTIFY_WARN_SECONDS = env_int("HUB_NOTIFY_WARN_SECONDS", 300)
# Notification webhooks may POST to these non-public hosts or networks (comma-separated host
# names, addresses, CIDRs), e.g. an internal Slack proxy; others get public addresses only.
HUB_NOTIFY_ALLOWED_HOSTS = env_list("HUB_NOTIFY_ALLOWED_HOSTS", "")
# At most one message per target per this many seconds: the first item goes at once, what
# follows waits (stored) for one digest. A target's own `--digest` overrides it; 0 sends at once.
HUB_NOTIFY_DIGEST_SECONDS = env_int("HUB_NOTIFY_DIGEST_SECONDS", 60)
# How long an email's Approve/Reject link works (each works once, for its user only).
HUB_NOTIFY_LINK_SECONDS = env_int("HUB_NOTIFY_LINK_SECONDS", 86400)
# Slack interactivity: the app's signing secret (its buttons' callbacks are refused without
# it) and who each Slack user is on the hub: "U024BE7LH=alice,U0G9QF9C6=bob".
HUB_SLACK_SIGNING_SECRET = os.environ.get("HUB_SLACK_SIGNING_SECRET", "")


def _slack_users(items: list[str]) -> dict[str, str]:
    users = {}
    for item in items:
        slack, sep, hub = item.partition("=")
        if not sep or not slack.strip() or not hub.strip():
            raise ImproperlyConfigured(
                f"HUB_SLACK_USERS takes SLACKID=username pairs, comma-separated; got {item!r}"
            )
        users[slack.strip()] = hub.strip()
    return users


HUB_SLACK_USERS = _slack_users(env_list("HUB_SLACK_USERS", ""))
# Claims on escalations ("I'm on it"): `advisory` (anyone with the operator role may still
# decide) or `hold` (only the claimer decides, or someone who takes the claim over first).
HUB_ESCALATION_CLAIMS = env_choice("HUB_ESCALATION_CLAIMS", "advisory", ("advisory", "hold"))
# How long an agent's question to a human waits before it expires (the task stays as it is).
HUB_QUESTION_DEADLINE_SECONDS = env_int("HUB_QUESTION_DEADLINE_SECONDS", 3600)
# Email notifications go through Django's default mailer: SMTP, configured from the environment.
MAILERS = {
    "default": {
        "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
        "OPTIONS": {
            "host": os.environ.get("EMAIL_HOST", "localhost"),
            "port": env_int("EMAIL_PORT", 25),
            "username": os.environ.get("EMAIL_HOST_USER", ""),
            "password": os.environ.get("EMAIL_HOST_PASSWORD", ""),
            "use_tls": env_bool("EMAIL_USE_TLS", False),
            "use_ssl": env_bool("EMAIL_USE_SSL", False),
            "timeout": env_int("EMAIL_TIMEOUT", 10),
        },
    }
}
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "a2a-hub@localhost")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "json": {"()": "a2a_core.logging.JsonFormatter"},
        "text": {"()": "a2a_core.logging.TextFormatter"},
    },
    "filters": {"caller_mistakes": {"()": "a2a_core.logging.CallerMistakes"}},
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            # Lines for a person by default; one JSON object per line when asked.
            "formatter": "json" if os.environ.get("HUB_LOG_FORMAT") == "json" else "text",
        }
    },
    "root": {"handlers": ["console"], "level": os.environ.get("HUB_LOG_LEVEL", "WARNING")},
    "loggers": {
        "a2a_hub": {"level": os.environ.get("HUB_LOG_LEVEL", "INFO"), "propagate": True},
        "django.request": {"level": "ERROR"},
        # The a2a-sdk's loggers of what callers send wrong (see CallerMistakes).
        "a2a.server.routes.jsonrpc_dispatcher": {"filters": ["caller_mistakes"]},
        "a2a.compat.v0_3.jsonrpc_adapter": {"filters": ["caller_mistakes"]},
        "a2a.utils.error_handlers": {"filters": ["caller_mistakes"]},
        # A Host header Django refuses (400) is the caller's mistake too.
        "django.security.DisallowedHost": {"filters": ["caller_mistakes"]},
        # The a2a-sdk's and sse-starlette's DEBUG records carry the bodies they receive and
        # send: what the policy's content rules redact would reach the log in clear.
        "a2a": {"level": "INFO"},
        "sse_starlette": {"level": "INFO"},
        # httpx logs each request's URL at INFO; webhook URLs can hold secrets (Slack's do).
        "httpx": {"level": "WARNING"},
    },
}
