#!/usr/bin/env python3
"""Wall-clock timings of the sample browser in headless Chromium, driven over the W3C WebDriver protocol
(chromedriver, plain HTTP: no client library). Real time, unlike --dump-dom's virtual time budget.

  browser_time.py SAMPLES_HTML VIEW [VIEW...]

For each view (a URL fragment such as "round=0" or "pair=svc/id"): a fresh page load, then the time until
the list is rendered (body[data-list-ms]) and, when the view opens a pair, until it is shown
(body[data-detail-ms]), measured from navigation start by the page and checked against the wall clock
here. Prints one JSON line per view: {"view", "list_ms", "detail_ms", "wall_ms", "matches"}.
"""

import json
import socket
import subprocess
import sys
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(base, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.load(r)["value"]


def main():
    page, views = sys.argv[1], sys.argv[2:]
    port = free_port()
    driver = subprocess.Popen(["chromedriver", f"--port={port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                call(base, "GET", "/status")
                break
            except OSError:
                time.sleep(0.1)
        caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"]}}}}
        sid = call(base, "POST", "/session", caps)["sessionId"]
        try:
            for view in views:
                call(base, "POST", f"/session/{sid}/url", {"url": "about:blank"})
                t0 = time.monotonic()
                call(base, "POST", f"/session/{sid}/url", {"url": f"file://{page}#{view}"})
                want = "detailMs" if "pair=" in view else "listMs"
                while True:
                    got = call(base, "POST", f"/session/{sid}/execute/sync", {
                        "script": "const d = document.body.dataset; return [d.listMs || null, d.detailMs || null, "
                                  "(document.getElementById('count') || {dataset: {}}).dataset.n || null, "
                                  "document.getElementById('fail').textContent]", "args": []})
                    if got[3]:
                        raise SystemExit(f"{view}: {got[3]}")
                    if got[0 if want == "listMs" else 1] is not None:
                        break
                    if time.monotonic() - t0 > 120:
                        raise SystemExit(f"{view}: not rendered in 120 s")
                    time.sleep(0.02)
                wall = (time.monotonic() - t0) * 1000
                print(json.dumps({"view": view, "list_ms": int(got[0]), "detail_ms": got[1] and int(got[1]),
                                  "wall_ms": round(wall), "matches": got[2] and int(got[2])}), flush=True)
        finally:
            call(base, "DELETE", f"/session/{sid}")
    finally:
        driver.terminate()
        driver.wait()


if __name__ == "__main__":
    main()
