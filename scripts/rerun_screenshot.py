#!/usr/bin/env python
"""Screenshot a Rerun recording in Rerun's web viewer, with Debian's Chromium driven by Playwright.

    python scripts/rerun_screenshot.py outputs/sim_fold/fold.rrd --out docs/img/rerun_fold.png

Serves the recording on 127.0.0.1 (`instant_fold_core.rerun_web`), opens it headless (WebGL on
SwiftShader: no GPU or display needed; Playwright downloads no browser), waits until the page
stops changing, and saves a palette PNG (small enough for the docs). The browser test of the web
viewer runs this script (`src/instant_fold_core/test/test_rerun_web.py`).
"""

from __future__ import annotations

import argparse
import io
import shutil
import sys
import time
from pathlib import Path

from PIL import Image

#: Longest wait for one page action (ms): software WebGL on a loaded 2-core machine is slow.
TIMEOUT_MS = 180_000
CHROMIUM_ARGS = ["--no-sandbox", "--enable-unsafe-swiftshader", "--use-angle=swiftshader", "--ignore-gpu-blocklist"]


def settled_screenshot(url: str, size: tuple[int, int], min_wait_s: float, max_wait_s: float) -> bytes:
    """A PNG of the page once two screenshots 2 s apart are equal (after `min_wait_s`), or at
    `max_wait_s`: the viewer loads its WebAssembly, then the recording, then draws."""
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": size[0], "height": size[1]})
            page.goto(url, timeout=TIMEOUT_MS)
            start = time.monotonic()
            time.sleep(min_wait_s)
            shot = page.screenshot(timeout=TIMEOUT_MS)
            while time.monotonic() - start < max_wait_s:
                time.sleep(2.0)
                again = page.screenshot(timeout=TIMEOUT_MS)
                if again == shot:
                    break
                shot = again
            return shot
        finally:
            browser.close()


def main(argv: list[str] | None = None) -> int:
    from instant_fold_core.errors import InstantFoldError
    from instant_fold_core.rerun_web import serve_recording

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("recording", type=Path, help="a .rrd file")
    p.add_argument("--out", type=Path, required=True, help="PNG to write")
    p.add_argument("--size", default="1280x800", help="browser viewport, WIDTHxHEIGHT")
    p.add_argument("--colors", type=int, default=128, help="palette size of the PNG (smaller file)")
    p.add_argument("--min-wait", type=float, default=15.0, help="seconds before the first screenshot")
    p.add_argument("--max-wait", type=float, default=120.0, help="seconds at most")
    args = p.parse_args(argv)
    try:
        width, height = (int(v) for v in args.size.split("x"))
    except ValueError:
        p.error(f"--size: expected WIDTHxHEIGHT, got {args.size!r}")
    try:
        with serve_recording(args.recording, web_port=0) as viewer:
            png = settled_screenshot(viewer.url, (width, height), args.min_wait, args.max_wait)
    except InstantFoldError as exc:
        print(f"rerun_screenshot: {exc}", file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    Image.open(io.BytesIO(png)).convert("RGB").quantize(args.colors).save(args.out, optimize=True)
    print(f"{args.out} ({args.out.stat().st_size // 1024} kB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
