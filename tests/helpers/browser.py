"""Open a local page in headless Chromium and report what a reader would see.

Speaks the Chrome DevTools protocol over ``--remote-debugging-pipe`` (NUL-separated JSON on file
descriptors 3 and 4 of the browser), so it needs nothing but the standard library and Debian's
``chromium``: no websocket client, no browser download. It collects console errors, uncaught
exceptions and failed resource loads, checks every image, and takes a screenshot.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-sync",
    "--no-first-run",
    "--no-default-browser-check",
    "--mute-audio",
    "--remote-debugging-pipe",
)
IMAGES_SCRIPT = (
    "JSON.stringify(Array.from(document.images).map("
    "i => ({src: i.getAttribute('src'), complete: i.complete, width: i.naturalWidth,"
    " shown: i.getBoundingClientRect().width})))"
)

#: What a reader reads: the page's text without the provenance (raw JSON for the record).
TEXT_SCRIPT = (
    "(() => { const copy = document.body.cloneNode(true);"
    " copy.querySelectorAll('#provenance, style, script').forEach(e => e.remove());"
    " return copy.innerText; })()"
)
#: Every headline-table cell: its analysis, site, metric and the text shown.
CELLS_SCRIPT = (
    "JSON.stringify(Array.from(document.querySelectorAll('table.headline td[data-metric]')).map("
    "c => ({analysis: c.closest('table').dataset.analysis, site: c.closest('tr').dataset.site,"
    " metric: c.dataset.metric, text: c.textContent.trim(),"
    " header: c.closest('table').rows[0].cells[c.cellIndex].textContent.trim()})))"
)
#: Each image and the link around it (a figure opens full size on click).
LINKS_SCRIPT = (
    "JSON.stringify(Array.from(document.images).map("
    "i => ({src: i.getAttribute('src'), href: i.closest('a') ? i.closest('a').getAttribute('href')"
    " : null})))"
)


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class PageVisit:
    """What loading a page showed: its images, errors of every kind, and the screenshot."""

    images: list[dict[str, Any]] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    title: str = ""
    screenshot: Path | None = None
    text: str = ""
    cells: list[dict[str, Any]] = field(default_factory=list)
    links: list[dict[str, Any]] = field(default_factory=list)


class _Pipe:
    def __init__(self, process: subprocess.Popen, write_fd: int, read_fd: int) -> None:
        self.process, self.write_fd, self.read_fd = process, write_fd, read_fd
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self.buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("Chromium did not answer in time.")
            chunk = os.read(self.read_fd, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe.")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, session: str | None = None, timeout: float = 60, **params):
        self.next_id += 1
        request: dict[str, Any] = {"id": self.next_id, "method": method, "params": params}
        if session:
            request["sessionId"] = session
        os.write(self.write_fd, json.dumps(request).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            message = self._read_message(deadline)
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method} failed: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def wait_for(self, method: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == method for e in self.events):
            self.events.append(self._read_message(deadline))


def _errors(events: list[dict[str, Any]]) -> list[str]:
    found = []
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            found.append("console: " + " ".join(str(a.get("value")) for a in params["args"]))
        elif method == "Runtime.exceptionThrown":
            found.append("exception: " + params["exceptionDetails"].get("text", ""))
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            entry = params["entry"]
            found.append(f"log: {entry.get('text')} {entry.get('url', '')}".strip())
    return found


def visit(
    page: Path, screenshot: Path, *, chromium: str | None = None, width: int | None = None
) -> PageVisit:
    """Load ``page`` (a local file) in headless Chromium; save a full-page screenshot.
    ``width``: the window's width in CSS pixels (default: Chromium's own)."""
    chromium = chromium or find_chromium()
    if chromium is None:
        raise FileNotFoundError("No chromium on PATH (Debian: apt-get install chromium).")
    to_browser_read, to_browser_write = os.pipe()
    from_browser_read, from_browser_write = os.pipe()

    def wire_pipes() -> None:  # the protocol wants fds 3 (commands) and 4 (replies)
        # Copy both ends out of the way first: either may already sit on fd 3 or 4.
        commands, replies = os.dup(to_browser_read), os.dup(from_browser_write)
        os.dup2(commands, 3)
        os.dup2(replies, 4)

    profile = tempfile.mkdtemp(prefix="geomlens-chromium-")
    process = subprocess.Popen(
        [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "about:blank"],
        pass_fds=(3, 4),
        preexec_fn=wire_pipes,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(to_browser_read)
    os.close(from_browser_write)
    pipe = _Pipe(process, to_browser_write, from_browser_read)
    try:
        targets = pipe.call("Target.getTargets")["targetInfos"]
        target = next(t["targetId"] for t in targets if t["type"] == "page")
        session = pipe.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            pipe.call(f"{domain}.enable", session)
        if width is not None:
            pipe.call(
                "Emulation.setDeviceMetricsOverride",
                session,
                width=width,
                height=900,
                deviceScaleFactor=1,
                mobile=False,
            )
        pipe.events.clear()
        pipe.call("Page.navigate", session, url=page.resolve().as_uri())
        pipe.wait_for("Page.loadEventFired")
        images = json.loads(
            pipe.call("Runtime.evaluate", session, expression=IMAGES_SCRIPT)["result"]["value"]
        )
        title = pipe.call("Runtime.evaluate", session, expression="document.title")["result"]

        def evaluate(script: str) -> Any:
            return pipe.call("Runtime.evaluate", session, expression=script)["result"]["value"]

        text = evaluate(TEXT_SCRIPT)
        cells, links = json.loads(evaluate(CELLS_SCRIPT)), json.loads(evaluate(LINKS_SCRIPT))
        shot = pipe.call("Page.captureScreenshot", session, captureBeyondViewport=True)
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        screenshot.write_bytes(base64.b64decode(shot["data"]))
        return PageVisit(
            images, _errors(pipe.events), title.get("value", ""), screenshot, text, cells, links
        )
    finally:
        os.close(to_browser_write)
        os.close(from_browser_read)
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(profile, ignore_errors=True)
