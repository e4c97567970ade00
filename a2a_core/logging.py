"""The hub's logs: human-readable lines by default, or one JSON object per line
(`HUB_LOG_FORMAT=json`, for log collectors); both carry the trace id of the call being
served."""

from __future__ import annotations

import contextvars
import json
import logging
import threading
import time
from datetime import UTC, datetime

trace_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("trace_id", default="")

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """Formats a record as JSON; `extra={...}` fields are kept as top-level keys."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "timestamp": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if trace_id := trace_id_var.get():
            entry["trace_id"] = trace_id
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class TextFormatter(logging.Formatter):
    """`14:05:09 WARNING delivery: agent unreachable  trace=0af7… target=ledger`: a line a
    person reads in a terminal, `extra={...}` fields after the message."""

    def format(self, record: logging.LogRecord) -> str:
        moment = datetime.fromtimestamp(record.created).strftime("%H:%M:%S")
        name = record.name.removeprefix("a2a_hub.")
        fields = [f"trace={trace_id}"] if (trace_id := trace_id_var.get()) else []
        fields += [
            f"{key}={value}"
            for key, value in record.__dict__.items()
            if key not in _STANDARD and not key.startswith("_")
        ]
        line = f"{moment} {record.levelname} {name}: {record.getMessage()}"
        if fields:
            line += "  " + " ".join(fields)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def get_logger(name: str) -> logging.Logger:
    return logging.getLogger(f"a2a_hub.{name}")


class Budget:
    """At most `burst` records a `window` of seconds for each kind of record (thread-safe).

    `take(kind, now)` is None when the kind is over its budget (the record is dropped and
    counted), else how many were dropped since the last one let through, for that one to say.
    """

    def __init__(self, burst: int = 10, window: float = 60.0) -> None:
        self.burst = burst
        self.window = window
        self._lock = threading.Lock()
        # kind -> [window start, records let through, records dropped]
        self._seen: dict[str, list[float]] = {}

    def take(self, kind: str, now: float) -> int | None:
        with self._lock:
            start, passed, dropped = self._seen.get(kind, [now, 0, 0])
            if now - start >= self.window:
                start, passed = now, 0
            if passed >= self.burst:
                self._seen[kind] = [start, passed, dropped + 1]
                return None
            self._seen[kind] = [start, passed + 1, 0]
        return int(dropped)


_warnings = Budget()


def warn_limited(logger: logging.Logger, kind: str, message: str, **extra: object) -> None:
    """Log `message` at WARNING, at most ten times a minute for each `kind` (what a caller or
    another party got wrong, which nobody at the hub can fix: logging each would flood the
    log); the next line let through says how many were not logged."""
    dropped = _warnings.take(kind, time.time())
    if dropped is None:
        return
    if dropped:
        message = f"{message} ({dropped} more like it were not logged)"
    logger.warning(message, extra=extra)


class CallerMistakes(logging.Filter):
    """For the a2a-sdk's request loggers and Django's refusals of a Host header: what a caller
    got wrong is logged at WARNING, without a traceback, and at most `burst` times a minute per
    kind of mistake.

    The SDK logs a JSON-RPC body it cannot read with `logger.exception` (ERROR and a
    traceback), although it answers the caller with the protocol's error: junk sent with a
    valid token would fill the log with tracebacks of nothing wrong in the hub. Django does the
    same with a Host header it refuses with 400 (`django.security.DisallowedHost`). A record
    past the budget is dropped; the next one let through says how many were. Records that are
    no caller's mistake (an internal error, anything not listed) pass unchanged.
    """

    MISTAKES = (
        "Failed to validate base JSON-RPC request",
        "Failed to parse request params",
        "Request Error",
        "Request error",
        "Parse error",
        "Invalid HTTP_HOST header",
    )

    def __init__(self, burst: int = 10, window: float = 60.0) -> None:
        super().__init__()
        self._budget = Budget(burst, window)

    def filter(self, record: logging.LogRecord) -> bool:
        if not isinstance(record.msg, str):
            return True
        kind = next((m for m in self.MISTAKES if record.msg.startswith(m)), None)
        if kind is None or (record.levelno >= logging.ERROR and not record.exc_info):
            return True  # not a caller's mistake: an internal error is logged as it is
        dropped = self._budget.take(kind, record.created)
        if dropped is None:
            return False
        message = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            if str(error) not in message:  # Django's message is the exception's own
                message = f"{message}: {type(error).__name__}: {error}"
        if dropped:
            message = f"{message} ({dropped} more like it were not logged)"
        record.msg, record.args = message, None
        record.exc_info = record.exc_text = None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True
