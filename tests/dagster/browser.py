"""Headless Chromium (Debian's `chromium`, installed by tests/system_packages.py) on a page of the
Dagster UI: its DOM once the page has rendered, and a screenshot to look at.

The UI is a React app fed by GraphQL: a page is rendered once its data arrived, which takes longer
on a busy machine. Chromium's virtual time budget lets the page's timers and requests run before the
DOM is dumped; a dump still missing what the page must show is taken again, with a longer budget.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1600,1000"]


def chromium() -> str:
    found = shutil.which("chromium")
    assert found, "Debian's chromium is not installed (tests/system_packages.py installs it)"
    return found


def _run(url: str, output: list[str], budget_ms: int) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="mesh_chromium_") as profile:
        return subprocess.run([chromium(), *FLAGS, f"--user-data-dir={profile}", f"--virtual-time-budget={budget_ms}",
                               *output, url], capture_output=True, text=True, timeout=180)


def rendered_dom(url: str, *must_show: str, attempts: int = 4) -> str:
    """The page's DOM once it shows every one of `must_show` (or the last try's)."""
    dom = ""
    for attempt in range(attempts):
        dom = _run(url, ["--dump-dom"], 15000 * (attempt + 1)).stdout
        if all(text in dom for text in must_show):
            return dom
    return dom


def screenshot(url: str, path: Path, budget_ms: int = 30000) -> Path:
    _run(url, [f"--screenshot={path}"], budget_ms)
    return path


def node_tags(dom: str, asset_path: str) -> list[str]:
    """The text tags (kinds) the graph shows under the node of asset `a/b`: what follows its links,
    up to the next node's."""
    start = dom.find(f'href="/assets/{asset_path}')
    if start < 0:
        return []
    rest = dom[start:]
    others = [m.start() for m in re.finditer(r'href="/assets/([^"?]+)', rest) if m.group(1) != asset_path]
    segment = rest[:others[0]] if others else rest
    return re.findall(r'OpTags_opTagsContainer[^>]*><div[^>]*>([^<]+)<', segment)


def page_text(dom: str) -> str:
    """The words a user reads on the page: tags, scripts and styles left out."""
    body = re.sub(r"<(script|style)\b.*?</\1>", " ", dom, flags=re.S)
    return " ".join(re.sub(r"<[^>]+>", " ", body).split())


def text_after(dom: str, label: str, length: int = 400) -> str:
    """What the page shows right after `label` (e.g. a metadata row's value after its key)."""
    text = page_text(dom)
    at = text.find(label)
    return "" if at < 0 else text[at:at + len(label) + length]
