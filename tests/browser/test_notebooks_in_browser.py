"""The chapters as a student meets them: `make lab`'s JupyterLab in a real (headless) Chromium.

Opens notebooks, runs every cell from the Run menu, and checks what only a browser shows: every
widget renders (no "Error displaying widget"), moving the 2.1 slider changes the verdict and the
plot, and the 3.3 toggle buttons switch the score table.

The browser is Debian's chromium (`make browser` installs it), driven by Playwright pointed at that
binary: Playwright's own browser downloads are never used. Without chromium or Playwright the test
skips, except under CI=true, where it fails. A failing run keeps a screenshot of the page in
test-logs/browser/.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.plugins.controlplane import skip_unless_ci
from tests.test_make_lab import ROOT, _free_port

pytestmark = [pytest.mark.slow, pytest.mark.browser]

SHOTS = ROOT / "test-logs" / "browser"
CHROMIUM_ENV = "MINISCHED_CHROMIUM"


def chromium_path() -> str:
    found = os.environ.get(CHROMIUM_ENV) or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        skip_unless_ci(f"no chromium to drive (`make browser` installs Debian's; or set {CHROMIUM_ENV})")
    return str(found)


def _settings(root: Path) -> Path:
    """JupyterLab user settings for the test: every cell in the DOM (no windowing, so off-screen
    widgets render too) and no autosave (running cells must not rewrite the chapters)."""
    settings = {
        "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
        "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
        "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false"},
    }
    for name, value in settings.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))
    return root


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`make lab` on a free port with a token; yields the base URL with `?token=` ready to append."""
    tmp = tmp_path_factory.mktemp("lab")
    port, token = _free_port(), secrets.token_hex(16)
    env = {
        **os.environ,
        "MINISCHED_BACKEND": "embedded",
        "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
        "JUPYTER_CONFIG_DIR": str(tmp / "config"),
        "JUPYTERLAB_SETTINGS_DIR": str(_settings(tmp / "settings")),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp / "workspaces"),
    }
    args = f"--no-browser --ServerApp.port={port} --IdentityProvider.token={token}"
    log = (tmp / "lab.log").open("w")
    proc = subprocess.Popen(["make", "-s", "lab", f"LAB_ARGS={args}"], cwd=ROOT, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    before = {p: p.read_bytes() for p in (ROOT / "chapters").glob("*.ipynb")}
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"make lab did not answer on {base}: {(tmp / 'lab.log').read_text()[-2000:]}")
                time.sleep(0.5)
        yield f"{base}|{token}"
        changed = [p.name for p, data in before.items() if p.read_bytes() != data]
        assert not changed, f"running the chapters in the browser rewrote {changed} (autosave must stay off)"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = chromium_path()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        skip_unless_ci("the playwright package is missing (pip install -e '.[test]')")
    args = ["--disable-dev-shm-usage"] + (["--no-sandbox"] if os.geteuid() == 0 else [])
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=executable, headless=True, args=args)
        yield chromium
        chromium.close()


@contextlib.contextmanager
def screenshot_on_failure(page: Any, name: str) -> Iterator[None]:
    try:
        yield
    except BaseException:
        SHOTS.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(Exception):
            page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
            (SHOTS / f"{name}.txt").write_text(page.inner_text("body"))
        raise


def _prompts(page: Any) -> list[str]:
    return [p.strip() for p in page.eval_on_selector_all(".jp-Notebook .jp-CodeCell .jp-InputArea-prompt",
                                                          "els => els.map(e => e.innerText)")]  # fmt: skip


def _run_all(page: Any) -> None:
    page.locator(".jp-Notebook .jp-Cell").first.click()
    page.locator("#jp-MainMenu .lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()


def open_and_run(browser: Any, lab: str, notebook: str, timeout: float = 90.0) -> Any:
    """A page with `notebook` opened in JupyterLab and every cell run (Run > Run All Cells)."""
    base, token = lab.split("|")
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(60_000)
    with screenshot_on_failure(page, notebook.removesuffix(".ipynb") + "-run"):
        page.goto(f"{base}/lab/tree/chapters/{notebook}?reset&token={token}")
        page.wait_for_selector(".jp-Notebook .jp-Cell")
        page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']")  # its kernel is up
        _run_all(page)
        deadline = time.monotonic() + timeout
        retried = False
        while True:
            prompts = _prompts(page)
            if prompts and all(re.fullmatch(r"\[\d+\]:", p) for p in prompts):
                break
            if not retried and time.monotonic() > deadline - timeout + 10 and all(p == "[ ]:" for p in prompts):
                # Run All clicked while the session was still connecting is a no-op: click again.
                _run_all(page)
                retried = True
            if time.monotonic() > deadline:
                raise AssertionError(f"{notebook}: cells not all run after {timeout:g} s: {prompts}")
            time.sleep(0.25)
        text = page.inner_text(".jp-Notebook")
        assert "Traceback (most recent call last)" not in text, f"{notebook}: a cell failed:\n{text[-3000:]}"
    return page


def wait_for_text(locator: Any, predicate: Any, what: str, timeout: float = 20.0) -> str:
    """Poll the (re-resolved) locator's text until `predicate(text)`; widgets re-render their DOM."""
    deadline = time.monotonic() + timeout
    while True:
        text = str(locator.inner_text())
        if predicate(text):
            return text
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: still {text!r} after {timeout:g} s")
        time.sleep(0.1)


def assert_widgets_render(page: Any, notebook: str, at_least: int) -> None:
    page.wait_for_timeout(500)  # widget views attach right after their outputs
    assert page.get_by_text("Error displaying widget").count() == 0, f"{notebook}: a widget failed to render"
    rendered = page.locator(".jp-OutputArea-output .jupyter-widgets").count()
    assert rendered >= at_least, f"{notebook}: {rendered} widget views rendered, expected at least {at_least}"


def test_the_stability_explorer_responds_to_its_slider(browser: Any, lab: str) -> None:
    page = open_and_run(browser, lab, "ch02_1_stability.ipynb")
    with screenshot_on_failure(page, "ch02_1_stability"):
        assert_widgets_render(page, "ch02_1_stability", at_least=3)
        bar = page.locator(".widget-hprogress").first  # tqdm.auto's progress bar is a widget here
        assert "100%" in page.locator(".jp-OutputArea-output").filter(has=bar).first.inner_text()
        explorer = page.locator(".widget-vbox").filter(has=page.locator(".widget-slider")).first
        verdict = explorer.locator(".widget-label", has_text="max |z|").first
        assert "→ stable" in verdict.inner_text()
        plot_before = explorer.locator("img").first.get_attribute("src")
        alpha = explorer.locator(".widget-readout").first
        alpha.click()
        page.keyboard.press("Control+A")
        page.keyboard.type("2.8")
        page.keyboard.press("Enter")
        page.wait_for_function("el => el.innerText.includes('unstable')", arg=verdict.element_handle(), timeout=20_000)
        assert "α=2.80" in verdict.inner_text()
        page.wait_for_function(
            "([box, before]) => { const img = box.querySelector('img'); return img && img.src !== before; }",
            arg=[explorer.element_handle(), plot_before], timeout=20_000,
        )
    page.close()


def test_the_score_breakdown_toggle_switches_the_table(browser: Any, lab: str) -> None:
    page = open_and_run(browser, lab, "ch03_3_scoring.ipynb")
    with screenshot_on_failure(page, "ch03_3_scoring"):
        assert_widgets_render(page, "ch03_3_scoring", at_least=1)
        table = page.locator(".minisched-scores").first
        # the chapter opens the view on each plugin's normalized score, before its weight
        normalized = table.inner_text()
        assert "total (weighted)" in normalized and "300" not in normalized.split("\n", 2)[1]
        page.locator(".widget-toggle-button", has_text="weighted").first.click()
        weighted = wait_for_text(table, lambda t: "(weighted)" not in t, "the table after clicking weighted")
        assert "300" in weighted  # TaintToleration 100 × 3
        page.locator(".widget-toggle-button", has_text="normalized").first.click()
        wait_for_text(table, lambda t: t == normalized, "the table after clicking normalized again")
    page.close()

