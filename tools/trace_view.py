#!/usr/bin/env python3
"""Load a pkb profile trace (pkb eval --profile DIR: DIR/*.trace.json) in Chromium's trace viewer and
say whether the viewer took all of it; optionally save a screenshot.

    tools/trace_view.py DIR/1_allreduce.trace.json [--png shot.png] [--catapult DIR]

The viewer is Catapult's (the engine of chrome://tracing; Perfetto reads the same Chrome trace event
format): its trace2html makes a standalone page of the trace, headless Chromium loads it, and the
script asks the page's model, over the DevTools protocol, how many processes and slices it imported
and what it warned about. It passes (exit 0) when every complete event ('X') became a slice, every
named process is there, and the importer warned about nothing; otherwise it says what differs
(exit 1). Needs: chromium, python3-websocket (Debian), and a Catapult checkout
(https://github.com/catapult-project/catapult; --catapult or $CATAPULT_DIR). No network.
"""
import argparse
import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

# The page's model, as the viewer imported it.
MODEL_QUERY = """(() => {
  const view = document.querySelector('tr-ui-timeline-view');
  if (!view || !view.model) return null;
  const m = view.model;
  let slices = 0;
  const names = [];
  for (const t of m.getAllThreads()) slices += t.sliceGroup.length;
  for (const p of Object.values(m.processes)) names.push(p.name || '');
  return {slices: slices, processes: names, warnings: (m.importWarnings || []).map(w => w.message)};
})()"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Page:
    """One Chromium tab over the DevTools protocol."""

    def __init__(self, url, size):
        try:
            import websocket  # websocket-client
        except ImportError:
            raise SystemExit("trace_view: needs the websocket-client module (Debian: apt-get install python3-websocket, "
                             "then run it with /usr/bin/python3)")

        self.port = free_port()
        self.profile = tempfile.mkdtemp(prefix="pkb_trace_view_")
        self.proc = subprocess.Popen(
            ["chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             f"--window-size={size[0]},{size[1]}", f"--remote-debugging-port={self.port}",
             f"--user-data-dir={self.profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        tabs = None
        for _ in range(150):
            try:
                tabs = json.load(urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json"))
                break
            except OSError:
                time.sleep(0.2)
        if tabs is None:
            self.close()
            raise SystemExit("trace_view: chromium did not open its DevTools port")
        page = next(t for t in tabs if t["type"] == "page")
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=120)
        self.next_id = 0
        self.call("Page.enable")
        self.call("Page.navigate", url=url)

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise SystemExit(f"trace_view: {method}: {msg['error']}")
                return msg.get("result", {})

    def evaluate(self, expr):
        return self.call("Runtime.evaluate", expression=expr, returnByValue=True).get("result", {}).get("value")

    def close(self):
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


def expected(trace):
    events = trace.get("traceEvents", [])
    slices = sum(1 for e in events if e.get("ph") == "X")
    processes = sorted({e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"})
    return slices, processes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace", help="a .trace.json that pkb wrote")
    ap.add_argument("--png", help="also save a screenshot of the loaded trace here")
    ap.add_argument("--catapult", default=os.environ.get("CATAPULT_DIR", ".catapult"), help="a Catapult checkout")
    ap.add_argument("--size", default="1600x800", help="the window, WIDTHxHEIGHT")
    ap.add_argument("--timeout", type=float, default=90, help="seconds to wait for the import")
    a = ap.parse_args()
    trace2html = os.path.join(a.catapult, "tracing", "bin", "trace2html")
    if not os.path.exists(trace2html):
        raise SystemExit(f"trace_view: no {trace2html}: pass --catapult DIR (a checkout of catapult-project/catapult)")
    if not shutil.which("chromium"):
        raise SystemExit("trace_view: chromium is not installed")
    with open(a.trace) as f:
        trace = json.load(f)
    want_slices, want_processes = expected(trace)
    size = tuple(int(x) for x in a.size.split("x"))
    with tempfile.TemporaryDirectory() as tmp:
        html = os.path.join(tmp, "trace.html")
        subprocess.run([sys.executable, trace2html, os.path.abspath(a.trace), "--output", html], check=True,
                       stdout=subprocess.DEVNULL)
        page = Page("file://" + html, size)
        try:
            got = None
            deadline = time.time() + a.timeout
            while time.time() < deadline:
                time.sleep(0.5)
                got = page.evaluate(MODEL_QUERY)
                importing = page.evaluate("document.body.innerText.includes('Importing') ? 1 : 0")
                if got is not None and not importing:
                    break
            if got is None:
                raise SystemExit(f"trace_view: the viewer did not finish importing {a.trace} in {a.timeout:.0f} s")
            time.sleep(1)  # let it draw
            if a.png:
                with open(a.png, "wb") as f:
                    f.write(base64.b64decode(page.call("Page.captureScreenshot", format="png")["data"]))
        finally:
            page.close()
    problems = []
    if got["slices"] != want_slices:
        problems.append(f"{got['slices']} slices imported of {want_slices} complete events")
    missing = [p for p in want_processes if p not in got["processes"]]
    if missing:
        problems.append("processes missing: " + ", ".join(missing))
    problems += ["importer: " + w for w in got["warnings"]]
    print(f"{a.trace}: {got['slices']} slices, {len(got['processes'])} processes imported"
          + (f"; screenshot {a.png}" if a.png else ""))
    for p in problems:
        print("  " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
