"""Headless Chromium driven over the DevTools protocol (pipe transport), and a local site server.

No extra dependency: Chromium talks JSON messages separated by NUL bytes on file descriptors 3
(commands in) and 4 (replies and events out) when started with --remote-debugging-pipe.
"""
from __future__ import annotations

import functools
import http.server
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Iterator

import pytest

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--no-first-run", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--disable-default-apps", "--no-default-browser-check",
         "--mute-audio", "--remote-debugging-pipe")

TRAP = """
window.__fired = [];
for (const name of ["alert", "confirm", "prompt", "print"]) {
  window[name] = (...args) => { window.__fired.push(name + "(" + args.join(",") + ")"); };
}
"""
# Links of the page's content and elements with an on* attribute, numbered for the mouse.
TARGETS = """
[...document.querySelectorAll('article a, *')]
  .filter(e => e.closest('article') && e.tagName === 'A'
               || [...e.attributes].some(a => a.name.startsWith('on')))
  .filter(e => e.getClientRects().length > 0)
  .slice(0, 300)
  .map((e, i) => e.setAttribute('data-probe', String(i))).length
"""
CENTRE = """
(() => { const e = document.querySelector('[data-probe="%d"]'); e.scrollIntoView({block: 'center'});
         const r = e.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; })()
"""
PROVOKE = r"""
(() => {
  const all = [...document.querySelectorAll('*')];
  const handlers = all.flatMap(e => [...e.attributes].filter(a => a.name.startsWith('on'))
                                        .map(a => e.tagName.toLowerCase() + ' ' + a.name));
  const targets = all.filter(e => e.tagName === 'A' || [...e.attributes].some(a => a.name.startsWith('on')));
  for (const e of targets) {
    for (const type of ['pointerover', 'mouseover', 'mouseenter', 'mousemove', 'mouseout', 'focusin']) {
      e.dispatchEvent(new MouseEvent(type, {bubbles: true}));
    }
    e.dispatchEvent(new KeyboardEvent('keydown', {bubbles: true, key: 'Tab'}));
    try { e.focus(); e.blur(); } catch (_) {}
  }
  const urls = [...document.querySelectorAll('[href], [src], [action], [formaction]')]
    .flatMap(e => ['href', 'src', 'action', 'formaction'].map(n => e.getAttribute(n)))
    .filter(u => u && /^(javascript|vbscript):/i.test(u.replace(/\s+/g, '')));
  return JSON.stringify({handlers, scriptUrls: urls, targets: targets.length, fired: window.__fired || []});
})()
"""

# Each chart of the page: its spec's element id (it names the chart: spec-<page>-<chart>-...), how
# many drawn SVG views it holds and how many marks (paths, lines, rects) those draw.
CHART_MARKS = """
JSON.stringify([...document.querySelectorAll('div.vega-chart')].map(c => ({
  spec: c.dataset.spec,
  svg: c.querySelectorAll('svg.marks').length,
  marks: c.querySelectorAll('svg.marks path, svg.marks line, svg.marks rect').length,
})))
"""


def charts_named(charts: list[dict], name: str) -> list[dict]:
    """The entries of CHART_MARKS for one chart function (its name as the element id spells it)."""
    return [c for c in charts if f"-{name.replace('_', '-')}-" in (c.get("spec") or "")]


WIRE_FDS = ("import os, sys; r, w = int(sys.argv[1]), int(sys.argv[2]); "
            "os.dup2(r, 3); os.dup2(w, 4); os.execv(sys.argv[3], sys.argv[3:])")


def find_chromium() -> str | None:
    """$CHROMIUM, else chromium or chromium-browser on PATH, else Debian's path."""
    for candidate in (os.environ.get("CHROMIUM"), shutil.which("chromium"),
                      shutil.which("chromium-browser"), "/usr/bin/chromium"):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def charts_drawn(selector: str = "div.vega-chart") -> str:
    """JavaScript that is true once the page has charts matching `selector`, each with its marks."""
    return f"""(() => {{
      const charts = [...document.querySelectorAll({json.dumps(selector)})];
      return charts.length > 0 && charts.every(c => c.querySelector('svg.marks') !== null);
    }})()"""


@contextmanager
def open_site_page(site: Path, page: str) -> Iterator[tuple["Page", "SiteServer"]]:
    """A tab of headless Chromium (a test fails without one) on `page` of the site folder served
    locally, with its server."""
    binary = find_chromium()
    if binary is None:
        pytest.fail("headless Chromium not found: install the `chromium` package")
    with Browser(binary) as browser, SiteServer(site) as server:
        tab = browser.page(width=1280)
        tab.goto(server.base + page)
        yield tab, server


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


class SiteServer:
    """Serves a folder on 127.0.0.1 at a free port, from a thread."""

    def __init__(self, directory: Path):
        handler = functools.partial(_QuietHandler, directory=str(directory))
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/"

    def __enter__(self) -> "SiteServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class CdpError(RuntimeError):
    pass


class Browser:
    """One headless Chromium; `page()` opens a tab with its own session and event log."""

    def __init__(self, binary: str, *, timeout: float = 20.0):
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="chromium-profile-")
        cmd_r, cmd_w = os.pipe()
        out_r, out_w = os.pipe()

        # A small launcher moves the pipe ends to descriptors 3 and 4 and execs the browser
        # (preexec_fn is unsafe once the test process has threads; dash cannot name fds > 9).
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WIRE_FDS, str(cmd_r), str(out_w),
             binary, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(cmd_r, out_w))
        os.close(cmd_r)
        os.close(out_w)
        self._out = os.fdopen(cmd_w, "wb", buffering=0)
        self._in = os.fdopen(out_r, "rb", buffering=0)
        self._lock = threading.Lock()
        self._next_id = 0
        self._replies: dict[int, queue.Queue] = {}
        self.events: list[dict[str, Any]] = []
        self._event_added = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    # -- transport
    def _read(self) -> None:
        buf = b""
        while True:
            try:
                chunk = self._in.read(65536)
            except OSError:
                chunk = b""
            if not chunk:
                for q in list(self._replies.values()):
                    q.put({"error": {"message": "browser closed the pipe"}})
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                self._dispatch(json.loads(raw))

    def _dispatch(self, msg: dict[str, Any]) -> None:
        if "id" in msg:
            q = self._replies.pop(msg["id"], None)
            if q is not None:
                q.put(msg)
            return
        if msg.get("method") == "Page.javascriptDialogOpening":
            # Never leave a page blocked on alert(); the test still sees the event.
            self._post("Page.handleJavaScriptDialog", {"accept": False}, msg.get("sessionId"))
        with self._event_added:
            self.events.append(msg)
            self._event_added.notify_all()

    def _post(self, method: str, params: dict | None, session: str | None) -> queue.Queue:
        with self._lock:
            self._next_id += 1
            mid = self._next_id
            q: queue.Queue = queue.Queue()
            self._replies[mid] = q
            msg: dict[str, Any] = {"id": mid, "method": method, "params": params or {}}
            if session:
                msg["sessionId"] = session
            self._out.write(json.dumps(msg).encode() + b"\0")
        return q

    def call(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float | None = None) -> dict:
        try:
            reply = self._post(method, params, session).get(timeout=timeout or self.timeout)
        except queue.Empty:
            raise CdpError(f"{method}: no reply within {timeout or self.timeout} s") from None
        if "error" in reply:
            raise CdpError(f"{method}: {reply['error'].get('message')}")
        return reply.get("result", {})

    def wait_event(self, method: str, session: str, since: int, timeout: float | None = None) -> dict:
        deadline = time.monotonic() + (timeout or self.timeout)
        with self._event_added:
            while True:
                for ev in self.events[since:]:
                    if ev.get("method") == method and ev.get("sessionId") == session:
                        return ev
                left = deadline - time.monotonic()
                if left <= 0:
                    raise CdpError(f"no {method} within {timeout or self.timeout} s")
                self._event_added.wait(left)

    # -- pages
    def page(self, width: int = 1280, height: int = 900) -> "Page":
        # a browser's first tab can take longer than a call on a loaded machine (its renderer starts)
        target = self.call("Target.createTarget", {"url": "about:blank"}, timeout=3 * self.timeout)["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", {}, session)
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session)
        return Page(self, session)

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except CdpError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._out.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Page:
    def __init__(self, browser: Browser, session: str):
        self.browser = browser
        self.session = session
        self.start = len(browser.events)

    def call(self, method: str, params: dict | None = None) -> dict:
        return self.browser.call(method, params, self.session)

    def events(self, method: str) -> list[dict[str, Any]]:
        return [e for e in self.browser.events[self.start:]
                if e.get("sessionId") == self.session and e.get("method") == method]

    def goto(self, url: str) -> None:
        mark = len(self.browser.events)
        reply = self.call("Page.navigate", {"url": url})
        if reply.get("errorText"):
            raise CdpError(f"{url}: {reply['errorText']}")
        self.browser.wait_event("Page.loadEventFired", self.session, mark)

    def js(self, expression: str) -> Any:
        reply = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                               "awaitPromise": True})
        if "exceptionDetails" in reply:
            raise CdpError(f"{expression[:60]}: {reply['exceptionDetails'].get('text')}")
        return reply["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 15.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = self.js(expression)
            if value or time.monotonic() > deadline:
                return value
            time.sleep(0.1)

    def screenshot(self, path: Path) -> None:
        import base64

        data = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
        path.write_bytes(base64.b64decode(data["data"]))

    # -- what the page did
    def console_errors(self) -> list[str]:
        errors = []
        for ev in self.events("Runtime.consoleAPICalled"):
            if ev["params"]["type"] in ("error", "assert"):
                args = ev["params"].get("args", [])
                errors.append("console: " + " ".join(str(a.get("value", a.get("description", "")))
                                                     for a in args))
        for ev in self.events("Runtime.exceptionThrown"):
            details = ev["params"]["exceptionDetails"]
            errors.append("exception: " + str(details.get("exception", {}).get("description")
                                              or details.get("text")))
        for ev in self.events("Log.entryAdded"):
            entry = ev["params"]["entry"]
            if entry["level"] == "error":
                errors.append(f"log: {entry.get('text')} {entry.get('url', '')}".strip())
        for ev in self.events("Network.loadingFailed"):
            if not ev["params"].get("canceled"):
                errors.append(f"network: {ev['params'].get('errorText')}")
        return errors

    def requested_urls(self) -> list[str]:
        return [ev["params"]["request"]["url"] for ev in self.events("Network.requestWillBeSent")]

    def trap_dialogs(self) -> None:
        """From the next navigation on, alert/confirm/prompt only record their call in
        window.__fired (the dialog events still count, should a page get past this)."""
        self.call("Page.addScriptToEvaluateOnNewDocument", {"source": TRAP})

    def provoke(self) -> dict[str, Any]:
        """Hover every link and every element with an inline handler with the real mouse, then
        send each the pointer, focus and key events by script; what fired, and what was there."""
        for i in range(self.js(TARGETS)):
            x, y = self.js(CENTRE % i)
            self.call("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})
        return json.loads(self.js(PROVOKE))

    def dialogs(self) -> list[str]:
        return [ev["params"].get("message", "") for ev in self.events("Page.javascriptDialogOpening")]


# ---------------------------------------------------------------- static checks of built pages

class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, dict(attrs)))


def tags(page: str) -> list[tuple[str, dict[str, str | None]]]:
    """Every start tag of an HTML page with its attributes, values decoded as a browser reads them."""
    parser = _Tags()
    parser.feed(page)
    parser.close()
    return parser.found


URL_ATTRIBUTES = ("href", "src", "action", "formaction", "xlink:href", "data")


def static_scan(site: Path) -> list[str]:
    """Inline handlers (on* attributes) and javascript: URLs in any built page of the site."""
    problems = []
    for path in sorted(site.rglob("*.html")):
        for tag, attrs in tags(path.read_text(errors="replace")):
            for name, value in attrs.items():
                url = "".join((value or "").split()).lower()
                if name.startswith("on"):
                    problems.append(f"{path.relative_to(site)}: <{tag} {name}=...>")
                elif name in URL_ATTRIBUTES and url.startswith(("javascript:", "vbscript:", "data:text/html")):
                    problems.append(f"{path.relative_to(site)}: <{tag} {name}={value[:60]!r}>")
    return problems
