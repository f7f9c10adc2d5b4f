"""Notifications: what happened to a plan (or a run), to the log and to the configured webhooks.

Each notification is one small JSON body POSTed to every `notification_targets` entry that wants
its event. Delivery is best effort: a target that is down, slow or answers an error is logged and
skipped, never fatal — a plan must not fail because a chat server did.

Bodies carry user text (notes, error messages quoting SQL): a chat client shows it to people
deciding about the plan, so control characters are sent as visible escapes and secrets as `***`.
A URL with `user:password@` is delivered with HTTP basic auth (urllib would otherwise read the
password as part of the host), and its password never reaches a log line.
"""

from __future__ import annotations

import base64
import json
import logging
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from mesh_dagster.core.config.config import NotificationTarget
from mesh_dagster.core.config.display import printable
from mesh_dagster.core.config.redaction import redact_text
from mesh_dagster.core.time.dates import now_ms

log = logging.getLogger("mesh_dagster.notify")

# How long one delivery may take: a notification never holds a plan up for long.
TIMEOUT_S = 5.0


class Notifier:
    def __init__(self, targets: list[NotificationTarget], project: str):
        self.targets = targets
        self.project = project
        self.delivered: list[tuple[str, str]] = []  # (url, event) of the deliveries that succeeded

    def send(self, event: str, details: Mapping[str, Any]) -> None:
        body = shown({"event": event, "project": self.project, "ts": now_ms(), **details})
        log.info("mesh %s: %s", event, json.dumps(body, sort_keys=True))
        for target in self.targets:
            if target.wants(event):
                self._deliver(target.url, event, body)

    def _deliver(self, url: str, event: str, body: dict[str, Any]) -> None:
        try:
            address, authorization = basic_auth(url)
            headers = {"Content-Type": "application/json", "User-Agent": "mesh_dagster"}
            if authorization is not None:
                headers["Authorization"] = authorization
            request = urllib.request.Request(address, data=json.dumps(body).encode(), method="POST", headers=headers)
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:  # noqa: S310 - the user's own URL
                response.read()
        except (urllib.error.URLError, OSError, ValueError) as e:
            log.warning("Notification %s to %s not delivered: %s", event, redact_text(url),
                        redact_text(str(getattr(e, "reason", e))))
            return
        self.delivered.append((redact_text(url), event))


def basic_auth(url: str) -> tuple[str, str | None]:
    """`url` without its user info, and the basic-auth header that user info stands for (if any)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None
    host = parts.hostname or ""
    netloc = (f"[{host}]" if ":" in host else host) + (f":{parts.port}" if parts.port is not None else "")
    pair = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
    return (urlunsplit(parts._replace(netloc=netloc)),
            "Basic " + base64.b64encode(pair.encode()).decode("ascii"))


def shown(value: Any) -> Any:
    """`value` (a notification body) with control characters visible and secrets hidden in its text."""
    if isinstance(value, Mapping):
        return {str(k): shown(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [shown(v) for v in value]
    if isinstance(value, str):
        return redact_text(printable(value))
    return value
