"""Notifications: what happened to a plan (or a run), to the log and to the configured webhooks.

Each notification is one small JSON body POSTed to every `notification_targets` entry that wants
its event. Delivery is best effort: a target that is down, slow or answers an error is logged and
skipped, never fatal — a plan must not fail because a chat server did.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

from mesh_dagster.core.config import NotificationTarget
from mesh_dagster.core.dates import now_ms

log = logging.getLogger("mesh_dagster.notify")

# How long one delivery may take: a notification never holds a plan up for long.
TIMEOUT_S = 5.0


class Notifier:
    def __init__(self, targets: list[NotificationTarget], project: str):
        self.targets = targets
        self.project = project
        self.delivered: list[tuple[str, str]] = []  # (url, event) of the deliveries that succeeded

    def send(self, event: str, details: Mapping[str, Any]) -> None:
        body = {"event": event, "project": self.project, "ts": now_ms(), **details}
        log.info("mesh %s: %s", event, json.dumps(body, sort_keys=True))
        for target in self.targets:
            if target.wants(event):
                self._deliver(target.url, event, body)

    def _deliver(self, url: str, event: str, body: dict[str, Any]) -> None:
        request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                         headers={"Content-Type": "application/json", "User-Agent": "mesh_dagster"})
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:  # noqa: S310 - the user's own URL
                response.read()
        except (urllib.error.URLError, OSError, ValueError) as e:
            log.warning("Notification %s to %s not delivered: %s", event, url, getattr(e, "reason", e))
            return
        self.delivered.append((url, event))
