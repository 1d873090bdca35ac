"""The correction page in a real browser: Playwright drives Debian's Chromium (headless, no
browser download) against the FastAPI app serving a copy of the bundled demonstration; it drags a
grasp point, deletes a keyframe, saves, and the test reads the saved file; an invalid sequence is
refused with a message and leaves the file as it was. Plus the server-side rules without a browser."""

from __future__ import annotations

import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from instant_fold_core.contracts import KeyframeEvent
from instant_fold_core.demonstration import DemonstrationError, load_demonstration
from instant_fold_demo.correction import Edits, KeyframeEdit, apply_edits, create_app, keyframes_json, validate_events
from instant_fold_demo.hands import project
from instant_fold_ros.bringup_share import models_dir

BUNDLED = models_dir() / "demos" / "proc_00001_sleeves_down__bottom_up.safetensors"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture
def demo_file(tmp_path: Path) -> Path:
    return Path(shutil.copy(BUNDLED, tmp_path / "demo.safetensors"))


@pytest.fixture
def server(demo_file: Path) -> Iterator[str]:
    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(create_app(demo_file), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not srv.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/"
    srv.should_exit = True
    thread.join(timeout=10)


def _edits(demo_file: Path) -> Edits:
    data = keyframes_json(load_demonstration(demo_file))
    return Edits(
        keyframes=[
            KeyframeEdit(**{k: kf[k] for k in ("source", "pixels", "events", "moved")}) for kf in data["keyframes"]
        ]
    )


def test_server_rules_snap_validate_and_refuse(demo_file: Path) -> None:
    demo = load_demonstration(demo_file)
    edits = _edits(demo_file)
    edits.keyframes[2].pixels[0] = [0.0, 0.0]  # dragged into the image corner: snapped onto the cloth
    edits.keyframes[2].moved[0] = True
    fixed = apply_edits(demo, edits)
    u, v = (round(float(c)) for c in project(fixed.keypose[2, 0, :3], demo.intrinsics))
    assert demo.mask[2][v, u] and np.allclose(fixed.keypose[3:], demo.keypose[3:])
    edits.keyframes[3].events[0] = "motion"  # the left arm's first release removed
    with pytest.raises(DemonstrationError, match="left arm grasps again without releasing"):
        apply_edits(demo, edits)
    with pytest.raises(DemonstrationError, match="last keyframe must be TERMINAL"):
        validate_events(np.array([[3, 3], [3, 3]], np.uint8))


@pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed (scripts/bootstrap.sh installs it)"
)
def test_browser_drags_deletes_and_saves(server: str, demo_file: Path, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    before = load_demonstration(demo_file)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1700, "height": 1100})
        page.goto(server)
        page.wait_for_selector("body[data-ready='1']", timeout=30000)
        # drag the left arm's grasp point of keyframe 2 by (+6, +4) image pixels
        page.locator("#canvas-2").scroll_into_view_if_needed()
        box = page.locator("#canvas-2").bounding_box()
        assert box is not None
        u, v = (float(c) for c in project(before.keypose[2, 0, :3], before.intrinsics))
        page.mouse.move(box["x"] + u * 2, box["y"] + v * 2)
        page.mouse.down()
        page.mouse.move(box["x"] + (u + 6) * 2, box["y"] + (v + 4) * 2, steps=5)
        page.mouse.up()
        page.locator("#kf-1 .delete").click()  # the approach keyframe before the first grasp
        page.locator("#save").click()
        page.wait_for_function("document.getElementById('status').textContent.startsWith('saved')", timeout=30000)
        assert "previous kept as" in page.locator("#status").text_content()
        # an invalid sequence: the right arm's first release becomes a motion
        page.wait_for_selector("body[data-ready='1']")
        page.select_option("#event-2-1", "motion")
        page.locator("#save").click()
        page.wait_for_function("document.getElementById('status').textContent.startsWith('not saved')", timeout=30000)
        refused = page.locator("#status").text_content()
        page.screenshot(path=str(tmp_path / "correction_page.png"), full_page=True)
        browser.close()
    assert "right arm grasps again without releasing" in refused
    after = load_demonstration(demo_file)
    assert after.num_keyframes == before.num_keyframes - 1 and after.meta["corrected"]
    assert load_demonstration(demo_file.with_name("demo.v1.safetensors")).num_keyframes == before.num_keyframes
    moved = project(after.keypose[1, 0, :3], after.intrinsics)  # keyframe 2 is now keyframe 1
    assert np.allclose(moved, (u + 6, v + 4), atol=1.5), (moved, u, v)
    assert after.events[1, 0] == KeyframeEvent.GRASP
    assert np.allclose(after.keypose[2:], before.keypose[3:])
