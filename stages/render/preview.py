"""`campaign preview`: the site served locally, rendered again when its inputs change, the open
page reloaded.

The preview renders as `campaign render` does (stages/render/stage.py: only what changed is made
again, and a render that fails leaves the site as it was), then serves the site folder over HTTP
and watches the templates, series.yaml, sources.yaml, the warehouse descriptions, mkdocs.yml, the
site's assets and the campaign database. After an edit it renders again in this process (nothing
to start or load: a one-template edit costs that template's page) and every open page reloads
itself: the server adds a small script to each page it serves that asks the preview, a few times a
second, which render the site is at. A render that fails prints its error on one line in the
terminal and shows it on one line at the top of the open page, which stays as it was; the next
render that succeeds takes the line away and reloads the page.

Example:
    from stages.render import preview
    preview.serve(render=lambda: render_stage.run(...), site_dir=paths.site,
                  watched=[paths.templates, paths.series], port=8000, say=print)
"""
from __future__ import annotations

import functools
import http.server
import json
import threading
import time
from pathlib import Path
from typing import Any, Callable

from stages.core.config import CampaignError
from stages.core.files import paths_fingerprint

STATE_PATH = "/__preview/state"
SCRIPT_PATH = "/__preview/reload.js"
POLL_S = 0.25        # how often the watcher looks at the inputs' times and sizes
SETTLE_S = 0.15      # an edit is rendered once its files have been still this long
RELOAD_SCRIPT = """(function () {
  var seen = null;
  function banner(text) {
    var box = document.getElementById("campaign-preview-error");
    if (!text) { if (box) { box.remove(); } return; }
    if (!box) {
      box = document.createElement("div");
      box.id = "campaign-preview-error";
      box.setAttribute("role", "alert");
      box.style.cssText = "position:fixed;top:0;left:0;right:0;z-index:10000;padding:.6em 1em;" +
        "background:#b3261e;color:#fff;font:14px/1.4 monospace;white-space:nowrap;overflow:hidden;" +
        "text-overflow:ellipsis";
      document.body.appendChild(box);
    }
    box.textContent = text;
  }
  function poll() {
    fetch("%(state)s", {cache: "no-store"}).then(function (r) { return r.json(); }).then(function (s) {
      if (seen !== null && s.built !== seen) { location.reload(); return; }
      seen = s.built;
      banner(s.error);
    }).catch(function () {}).then(function () { setTimeout(poll, %(poll_ms)d); });
  }
  poll();
})();
""" % {"state": STATE_PATH, "poll_ms": 250}
TAG = f'<script src="{SCRIPT_PATH}"></script>'.encode()


def one_line(exc: BaseException) -> str:
    """An error as the one line the terminal and the page show."""
    text = " ".join(str(exc).split()) or exc.__class__.__name__
    return text if isinstance(exc, CampaignError) else f"{exc.__class__.__name__}: {text}"


class State:
    """Which render the site is at (`built`: renders that succeeded) and the last one's error."""

    def __init__(self) -> None:
        self.built = 0
        self.error: str | None = None
        self.lock = threading.Lock()

    def as_json(self) -> bytes:
        with self.lock:
            return json.dumps({"built": self.built, "error": self.error}).encode()


def fingerprint(paths: list[Path]) -> str:
    """The watched files' names and stat fields (folders walked): stages.core.files.paths_fingerprint."""
    return paths_fingerprint(paths)


def rerender(render: Callable[[], dict[str, Any]], state: State, say: Callable[[str], None]) -> None:
    """One render; the state and the terminal told how it went, in one line."""
    started = time.perf_counter()
    try:
        summary = render()
    except Exception as exc:   # any failure: the site stays, the error is shown
        line = one_line(exc)
        with state.lock:
            state.error = line
        say(f"preview: render failed, the site is unchanged: {line}")
        return
    with state.lock:
        state.built += 1
        state.error = None
    phases = sorted((summary.get("phases") or {}).items(), key=lambda kv: -kv[1])[:3]
    took = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in phases)
    say(f"preview: rendered in {time.perf_counter() - started:.1f} s "
        f"({summary.get('pages_reused', 0)} of {len(summary.get('pages', []))} pages unchanged"
        + (f"; {took}" if took else "") + ")")


def watch(render: Callable[[], dict[str, Any]], watched: list[Path], state: State,
          say: Callable[[str], None], stop: threading.Event) -> None:
    """Render again whenever the watched files change (once they are still)."""
    last = fingerprint(watched)
    while not stop.wait(POLL_S):
        now = fingerprint(watched)
        if now == last:
            continue
        while not stop.wait(SETTLE_S):      # an editor may write a file in several steps
            settled = fingerprint(watched)
            if settled == now:
                break
            now = settled
        last = now
        rerender(render, state, say)


class Handler(http.server.SimpleHTTPRequestHandler):
    """The site's files, each HTML page with the reload script; the preview's state."""

    state: State

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def do_GET(self) -> None:  # noqa: N802
        path = self.path.split("?", 1)[0]
        if path == STATE_PATH:
            self._send(self.state.as_json(), "application/json")
        elif path == SCRIPT_PATH:
            self._send(RELOAD_SCRIPT.encode(), "text/javascript")
        elif path.endswith((".html", "/")):
            target = Path(self.translate_path(path))
            page = target / "index.html" if target.is_dir() else target
            try:
                data = page.read_bytes()
            except OSError:
                return super().do_GET()
            at = data.rfind(b"</body>")
            self._send(data[:at] + TAG + data[at:] if at >= 0 else data + TAG, "text/html; charset=utf-8")
        else:
            super().do_GET()

    def _send(self, data: bytes, kind: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def serve(*, render: Callable[[], dict[str, Any]], site_dir: Path, watched: list[Path], port: int = 8000,
          host: str = "127.0.0.1", say: Callable[[str], None] = print,
          ready: Callable[[str], None] | None = None, stop: threading.Event | None = None) -> None:
    """Render, serve `site_dir` on host:port and render again on every change of `watched`,
    until `stop` is set (or the process is interrupted). `ready` gets the address once serving."""
    state, stop = State(), stop or threading.Event()
    rerender(render, state, say)
    handler = type("PreviewHandler", (Handler,), {"state": state})
    server = http.server.ThreadingHTTPServer(
        (host, port), functools.partial(handler, directory=str(site_dir)))
    server.daemon_threads = True
    address = f"http://{host}:{server.server_address[1]}/"
    watcher = threading.Thread(target=watch, args=(render, watched, state, say, stop), daemon=True)
    watcher.start()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    say(f"preview: serving {address} (Ctrl-C stops); watching {len(watched)} inputs")
    if ready is not None:
        ready(address)
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        server.shutdown()
        server.server_close()
        watcher.join(timeout=5)
