#!/usr/bin/python3
"""Loads an HTML report of flashcore-check in headless Chromium and checks it the way a
reader would see it, over the DevTools protocol (through --remote-debugging-pipe: Python's
standard library only).

  check_html_report.py REPORT.html [--expect B,H,ROW,COL] [--expect-matrix]
                       [--screenshot OUT.png] [--misplace]

Checks:
  - the page loads with no console error, no uncaught exception, no request other than
    data: URIs (the report is self-contained), and has at least one heatmap;
  - every heatmap marker sits, as rendered, on the grid cell of the element its data
    attributes name, in an image of that head, and the image's pixel there has a colour
    its legend calls an alarm (over the bound, or present in a mask);
  - --expect: every first-divergence marker names this element (and there is one);
  - --expect-matrix: each row of the detection matrix with an expected element has its
    faulty run's first-divergence marker on that element.
--misplace moves every first-divergence marker one grid cell before checking: the checks
must then fail (the test of the test). --screenshot saves the first case with a marker.
Exit 0 pass, 1 a check failed, 77 Chromium is not installed (CTest: Skipped).
"""
import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

TIMEOUT_S = 60


class Browser:
    """Chromium with the DevTools protocol on fds 3 (commands in) and 4 (replies out)."""

    def __init__(self, binary, log_path):
        self.profile = tempfile.mkdtemp(prefix="fc-chromium-")
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()

        def child_fds():
            a, b = os.dup(to_child_r), os.dup(from_child_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        args = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-extensions", "--remote-debugging-pipe", "--user-data-dir=" + self.profile,
                "--window-size=1400,1000", "about:blank"]
        self.log = open(log_path, "wb")
        self.process = subprocess.Popen(args, preexec_fn=child_fds, close_fds=False, stdin=subprocess.DEVNULL,
                                        stdout=self.log, stderr=self.log)
        os.close(to_child_r)
        os.close(from_child_w)
        self.out = os.fdopen(to_child_w, "wb", buffering=0)
        self.inp = os.fdopen(from_child_r, "rb", buffering=0)
        self.buffer = b""
        self.next_id = 0
        self.events = []
        self.session = None

    def _receive(self, deadline):
        while b"\0" not in self.buffer:
            if time.time() > deadline:
                raise RuntimeError("Chromium did not answer within %d s" % TIMEOUT_S)
            chunk = self.inp.read(1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe (see its log)")
            self.buffer += chunk
        message, _, self.buffer = self.buffer.partition(b"\0")
        return json.loads(message)

    def call(self, method, params=None, session=True):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        self.out.write(json.dumps(message).encode() + b"\0")
        deadline = time.time() + TIMEOUT_S
        while True:
            reply = self._receive(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError("%s: %s" % (method, reply["error"]))
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, event):
        deadline = time.time() + TIMEOUT_S
        while not any(e.get("method") == event for e in self.events):
            self.events.append(self._receive(deadline))

    def open(self, url):
        target = self.call("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True},
                                 session=False)["sessionId"]
        for domain in ("Runtime.enable", "Log.enable", "Page.enable", "Network.enable"):
            self.call(domain)
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": 1400, "height": 1000, "deviceScaleFactor": 1, "mobile": False})
        self.call("Page.navigate", {"url": url})
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        if "exceptionDetails" in result:
            raise RuntimeError("page script failed: %s" % json.dumps(result["exceptionDetails"])[:400])
        return result["result"].get("value")

    def close(self):
        try:
            self.call("Browser.close", session=False)
        except RuntimeError:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)


# Everything the checks need, read from the rendered page: each marker's rendered centre,
# its image's box, attributes and the pixel of the element's cell, and the legend's alarm
# colours of the image's layer.
GEOMETRY_JS = r"""
(() => {
  const pixel = (img, gx, gy) => {
    const canvas = document.createElement('canvas');
    canvas.width = img.naturalWidth; canvas.height = img.naturalHeight;
    const g = canvas.getContext('2d');
    g.drawImage(img, 0, 0);
    const d = g.getImageData(gx, gy, 1, 1).data;
    return '#' + [d[0], d[1], d[2]].map(v => v.toString(16).padStart(2, '0')).join('');
  };
  const num = (el, name) => Number(el.getAttribute('data-' + name));
  const markers = [];
  for (const m of document.querySelectorAll('.marker')) {
    const img = m.parentElement.querySelector('img');
    const set = m.closest('.heatmaps');
    const section = m.closest('section.case');
    const r = m.getBoundingClientRect(), box = img.getBoundingClientRect();
    const a = {b: num(img, 'b'), h: num(img, 'h'), heads: num(img, 'heads'), axis: img.getAttribute('data-x-axis'),
               offset: num(img, 'x-offset'), rows: num(img, 'rows'), cols: num(img, 'cols'),
               pool_rows: num(img, 'pool-rows'), pool_cols: num(img, 'pool-cols'), layer: img.getAttribute('data-layer'),
               grid_w: img.naturalWidth, grid_h: img.naturalHeight};
    const index = {b: num(m, 'b'), h: num(m, 'h'), row: num(m, 'row'), col: num(m, 'col')};
    // The element's source column in the image, from what the image says its columns are.
    const x = a.axis === 'head' ? index.b * a.heads + index.h : a.axis === 'key' ? index.col - a.offset : index.col;
    const y = index.row;
    const gx = Math.floor(x / a.pool_cols), gy = Math.floor(y / a.pool_rows);
    const inside = x >= 0 && x < a.cols && y >= 0 && y < a.rows;
    const legend = set.querySelector('.legend[data-layer="' + a.layer + '"]');
    const alarms = legend ? [...legend.querySelectorAll('.swatch.alarm')].map(s => s.getAttribute('data-color')) : [];
    markers.push({id: m.id, first: m.classList.contains('first'), section: section ? section.id : '',
                  output: set.getAttribute('data-output'), index, image: a, x, y, gx, gy, inside,
                  centre: [r.left + r.width / 2 - box.left, r.top + r.height / 2 - box.top],
                  box: [box.width, box.height], pixel: inside ? pixel(img, gx, gy) : null, alarms});
  }
  const matrix = [];
  for (const row of document.querySelectorAll('#detection-matrix tbody tr')) {
    const expected = row.querySelector('td[data-index]');
    const link = row.querySelector('td[data-case]');
    if (expected && link) matrix.push({index: expected.getAttribute('data-index'), output: expected.getAttribute('data-output'),
                                       section: link.getAttribute('data-case')});
  }
  return {markers, matrix, heatmaps: document.querySelectorAll('figure.heatmap img').length,
          broken: [...document.images].filter(i => !i.complete || i.naturalWidth === 0).length};
})()
"""

# Moves every first-divergence marker one grid cell (right, or left at the right edge).
MISPLACE_JS = r"""
(() => {
  for (const m of document.querySelectorAll('.marker.first')) {
    const img = m.parentElement.querySelector('img');
    const cell = img.getBoundingClientRect().width / img.naturalWidth;
    const left = parseFloat(m.style.left);
    m.style.left = (left + cell < img.getBoundingClientRect().width ? left + cell : left - cell) + 'px';
  }
  return true;
})()
"""


def index_text(i):
    return "(%d,%d,%d,%d)" % (i["b"], i["h"], i["row"], i["col"])


def check_marker(m):
    """Problems with one marker, as sentences."""
    problems = []
    where = "%s %s marker %s in %s" % (m["section"], m["output"], index_text(m["index"]), m["image"]["layer"])
    a = m["image"]
    if a["axis"] != "head" and (a["b"], a["h"]) != (m["index"]["b"], m["index"]["h"]):
        problems.append("%s: drawn on the image of b=%d h=%d" % (where, a["b"], a["h"]))
    if not m["inside"]:
        return problems + ["%s: the element is outside its image (x %d, y %d of %dx%d)" %
                           (where, m["x"], m["y"], a["cols"], a["rows"])]
    cell_w, cell_h = m["box"][0] / a["grid_w"], m["box"][1] / a["grid_h"]
    # The cell the rendered centre falls in (a hair inside, against sub-pixel rounding).
    cx, cy = m["centre"]
    at = (int((cx + 1e-3) // cell_w), int((cy + 1e-3) // cell_h))
    if at != (m["gx"], m["gy"]) or not (0 <= cx <= m["box"][0] and 0 <= cy <= m["box"][1]):
        problems.append("%s: rendered on grid cell %s, the element is in cell %s" % (where, at, (m["gx"], m["gy"])))
    if m["pixel"] not in m["alarms"]:
        problems.append("%s: the image's pixel there is %s, not a colour the legend calls an alarm %s" %
                        (where, m["pixel"], m["alarms"]))
    return problems


def check(page, log, expect, expect_matrix):
    problems = []
    if page["heatmaps"] == 0:
        problems.append("no heatmap on the page")
    if page["broken"]:
        problems.append("%d images did not load" % page["broken"])
    for e in log:
        problems.append("console/network: " + e)
    for m in page["markers"]:
        problems += check_marker(m)
    firsts = [m for m in page["markers"] if m["first"]]
    if expect:
        b, h, row, col = expect
        if not firsts:
            problems.append("no first-divergence marker (expected one at %s)" % str(expect))
        for m in firsts:
            if (m["index"]["b"], m["index"]["h"], m["index"]["row"], m["index"]["col"]) != (b, h, row, col):
                problems.append("%s: first divergence marked at %s, the planted element is (%d,%d,%d,%d)" %
                                (m["section"], index_text(m["index"]), b, h, row, col))
    if expect_matrix:
        if not page["matrix"]:
            problems.append("no detection matrix row with an expected element")
        for row in page["matrix"]:
            found = [m for m in firsts if m["section"] == row["section"]]
            if not found:
                problems.append("matrix row %s %s: its faulty run has no first-divergence marker" %
                                (row["output"], row["index"]))
                continue
            i = found[0]["index"]
            if "%d,%d,%d,%d" % (i["b"], i["h"], i["row"], i["col"]) != row["index"]:
                problems.append("matrix row %s: expected (%s), marked %s" % (row["output"], row["index"], index_text(i)))
    return problems


def console_errors(events, page_url):
    errors = []
    for e in events:
        method, p = e.get("method"), e.get("params", {})
        if method == "Runtime.exceptionThrown":
            errors.append("exception: " + p["exceptionDetails"].get("text", "?"))
        elif method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            errors.append("console.%s: %s" % (p["type"], " ".join(str(a.get("value", "")) for a in p.get("args", []))))
        elif method == "Log.entryAdded" and p["entry"].get("level") == "error":
            errors.append("log: " + p["entry"].get("text", "?"))
        elif method == "Network.requestWillBeSent":
            url = p["request"]["url"]
            if not url.startswith("data:") and url != page_url:
                errors.append("fetched " + url + " (the report must be self-contained)")
    return errors


def screenshot(browser, page, path):
    sections = [m["section"] for m in page["markers"] if m["first"]]
    selector = "#" + sections[0] if sections else "body"
    bottom = browser.evaluate("document.querySelector('%s').getBoundingClientRect().bottom + window.scrollY" % selector)
    height = max(200, min(int(bottom) + 16, 8000))
    shot = browser.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True,
                                                   "clip": {"x": 0, "y": 0, "width": 1400, "height": height, "scale": 1}})
    with open(path, "wb") as f:
        f.write(base64.b64decode(shot["data"]))
    print("screenshot: " + os.path.abspath(path))


def find_chromium():
    """A Chromium that runs (Ubuntu's chromium-browser without snapd is only a stub)."""
    for name in (os.environ.get("CHROMIUM", ""), "chromium", "chromium-browser"):
        path = shutil.which(name) if name else None
        if not path:
            continue
        try:
            version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if version.returncode == 0 and "chrom" in version.stdout.lower():
            return path
    return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("report")
    parser.add_argument("--expect", help="B,H,ROW,COL of the planted element")
    parser.add_argument("--expect-matrix", action="store_true")
    parser.add_argument("--screenshot")
    parser.add_argument("--misplace", action="store_true")
    args = parser.parse_args()
    binary = find_chromium()
    if not binary:
        print("skipped: no working Chromium (apt-get install chromium)")
        return 77
    expect = tuple(int(v) for v in args.expect.split(",")) if args.expect else None
    url = "file://" + os.path.abspath(args.report)
    log_path = (args.screenshot or args.report) + ".chromium.log"
    browser = Browser(binary, log_path)
    try:
        browser.open(url)
        if args.misplace:
            browser.evaluate(MISPLACE_JS)
        page = browser.evaluate(GEOMETRY_JS)
        if args.screenshot:
            screenshot(browser, page, args.screenshot)
        log = console_errors(browser.events, url)
    finally:
        browser.close()
    problems = check(page, log, expect, args.expect_matrix)
    firsts = sum(1 for m in page["markers"] if m["first"])
    print("%s: %d heatmaps, %d markers (%d first divergences) checked, %d problems" %
          (args.report, page["heatmaps"], len(page["markers"]), firsts, len(problems)))
    for p in problems:
        print("  " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
