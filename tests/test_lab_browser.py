"""`make lab` in a real browser: JupyterLab started as `make lab` starts it (sqlitelab.lab,
loopback, a token, --allow-root when root), Debian's Chromium driven by Playwright, notebook 01
with tiny parameters run from the Run menu. Asserts the `sqlitelab` kernel, tqdm's widget
progress bar, the rendered figures and no error output; screenshots are kept under
data/test-output/lab-browser/ (they are the test's output, not committed)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from sqlitelab.core import config, processes
from sqlitelab import lab

from test_notebooks import SMOKE  # the same tiny parameters as the papermill smoke run

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
NOTEBOOK = "01-linear-writes"
SHOTS = config.PROJ_ROOT / "data" / "test-output" / "lab-browser"
RUN_TIMEOUT = 900  # s: the notebook's cells, a first calibration of the generators included

pytestmark = [pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="make setup installs chromium")]


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except OSError:  # not listening yet
        return 0, b""


@pytest.fixture
def jupyterlab(tmp_path):
    """`make lab`'s server on a free loopback port over a folder holding notebook 01 with the
    smoke parameters injected as papermill would; stopped by its group's PID afterwards."""
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook
    root = tmp_path / "notebooks"
    root.mkdir()
    nb = load_notebook_node(str(config.NOTEBOOKS_DIR / f"{NOTEBOOK}.ipynb"))
    nb = parameterize_notebook(nb, {"scale": "quick", **SMOKE[NOTEBOOK]})
    nbformat.write(nb, root / f"{NOTEBOOK}.ipynb")
    port, token = processes.free_port(), "lab-browser-test-token"
    runtime = tempfile.mkdtemp(prefix="lab-rt-")
    env = {**os.environ, "LAB_DATA_DIR": str(tmp_path / "data"),
           "LAB_FIGURES_DIR": str(tmp_path / "figures"),
           "JUPYTER_RUNTIME_DIR": runtime,  # short: kernels' IPC sockets live there
           "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces")}
    log = tmp_path / "jupyterlab.log"
    cmd = lab.lab_command(port, token, root_dir=root) + ["--LabApp.expose_app_in_browser=True"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while _get(f"http://127.0.0.1:{port}/api/status?token={token}")[0] != 200:
            assert proc.poll() is None, f"JupyterLab exited:\n{processes.log_tail(log)}"
            assert time.monotonic() < deadline, f"JupyterLab did not answer:\n{processes.log_tail(log)}"
            time.sleep(0.5)
        yield {"port": port, "token": token, "root": root, "log": log, "tmp": tmp_path}
    finally:
        processes.stop(proc)
        kernels = subprocess.run(["pgrep", "-f", runtime], capture_output=True,
                                 text=True).stdout.split()
        for pid in kernels:  # a kernel the server failed to shut down (its own session)
            os.kill(int(pid), 9)
        shutil.rmtree(runtime, ignore_errors=True)
        assert not kernels, f"kernels left running after JupyterLab stopped: {kernels}"


def test_lab_command_binds_loopback_with_a_token():
    cmd = lab.lab_command(8888, "t0ken")
    assert "--ServerApp.ip=127.0.0.1" in cmd and "--IdentityProvider.token=t0ken" in cmd
    assert "--ServerApp.port_retries=0" in cmd and "--no-browser" in cmd
    assert ("--allow-root" in cmd) == (os.geteuid() == 0)
    assert lab.lab_url(8888, "t0ken") == "http://127.0.0.1:8888/lab?token=t0ken"


def test_make_lab_refuses_a_busy_port(capsys):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert lab.main(["--port", str(s.getsockname()[1])]) == 2
    assert "in use" in capsys.readouterr().err


def _wait_idle(lab_info: dict, timeout: float = 120) -> None:
    """The notebook's kernel has started and is idle, as the server's sessions API says."""
    url = f"http://127.0.0.1:{lab_info['port']}/api/sessions?token={lab_info['token']}"
    deadline, seen = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        status, body = _get(url)
        seen = [s["kernel"].get("execution_state") for s in json.loads(body)] if status == 200 else status
        if seen and isinstance(seen, list) and all(s == "idle" for s in seen):
            return
        time.sleep(0.5)
    raise AssertionError(f"the notebook's kernel is not idle after {timeout} s: {seen}\n"
                         f"{processes.log_tail(lab_info['log'], 40)}")


_STATE_JS = """() => {
  const nb = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook');
  if (!nb) return null;
  const prompts = [...nb.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')].map(e => e.textContent.trim());
  const kernel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Toolbar-kernelName');
  return {prompts, kernel: kernel ? kernel.textContent.trim() : null,
          busy: !!document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Toolbar-kernelStatus [data-status="busy"], .jp-NotebookPanel:not(.lm-mod-hidden) .jp-KernelStatus-busy'),
          progress: nb.querySelectorAll('.jp-OutputArea-output .widget-progress, .jp-OutputArea-output .widget-hprogress').length,
          images: [...nb.querySelectorAll('.jp-RenderedImage img')].map(i => i.naturalWidth),
          errors: nb.querySelectorAll('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.error"]').length};
}"""


@pytest.mark.notebook
@pytest.mark.timeout(RUN_TIMEOUT + 900)  # the run, and the starts of JupyterLab, its kernel and Chromium
def test_notebook_runs_in_jupyterlab_in_chromium(jupyterlab):
    from playwright.sync_api import sync_playwright
    lab_info = jupyterlab
    shots = SHOTS
    shutil.rmtree(shots, ignore_errors=True)
    shots.mkdir(parents=True)
    url = (f"http://127.0.0.1:{lab_info['port']}/lab/tree/{NOTEBOOK}.ipynb"
           f"?token={lab_info['token']}&reset")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(url)
            page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-Cell", timeout=60_000)
            page.wait_for_function(
                "() => { const k = document.querySelector('.jp-NotebookPanel .jp-Toolbar-kernelName');"
                " return k && k.textContent.includes('sqlitelab'); }", timeout=60_000)
            _wait_idle(lab_info)
            page.screenshot(path=str(shots / "1-opened.png"))
            news = page.get_by_role("button", name="No", exact=True)  # JupyterLab's news prompt
            if news.count():
                news.first.click()
            dialog = page.locator(".jp-Dialog")
            assert not dialog.count(), f"JupyterLab opened a dialog: {dialog.first.inner_text()}"
            page.get_by_role("menuitem", name="Run", exact=True).click()
            page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
            seen_progress, state, deadline = False, None, time.monotonic() + RUN_TIMEOUT
            while time.monotonic() < deadline:
                state = page.evaluate(_STATE_JS)
                if state["progress"] and not seen_progress:
                    seen_progress = True
                    bar = page.locator(".jp-OutputArea-output .widget-hprogress, "
                                       ".jp-OutputArea-output .widget-progress").first
                    bar.scroll_into_view_if_needed()
                    page.screenshot(path=str(shots / "2-progress-bar.png"))
                done = state["prompts"] and all(p.strip("[]: ").isdigit() for p in state["prompts"])
                if done or state["errors"]:
                    break
                time.sleep(1)
            assert state and state["prompts"], "no code cells rendered"
            page.screenshot(path=str(shots / "3-finished.png"))
            images = page.locator(".jp-RenderedImage img")
            if images.count():
                images.first.scroll_into_view_if_needed()
                page.screenshot(path=str(shots / "4-figure.png"))
            page.keyboard.press("Control+s")
            time.sleep(2)
        finally:
            browser.close()
    log_tail = processes.log_tail(lab_info["log"], 40)
    assert not state["errors"], f"error output in the notebook:\n{log_tail}"
    assert all(p.strip("[]: ").isdigit() for p in state["prompts"]), \
        f"not every cell ran within {RUN_TIMEOUT} s: {state['prompts']}\n{log_tail}"
    assert "Python (sqlitelab)" in state["kernel"], state["kernel"]
    assert seen_progress, "no tqdm widget progress bar was rendered"
    assert state["images"] and all(w > 0 for w in state["images"]), "no figure rendered"
    # the kernel the server ran, by name, and the saved notebook: outputs without an error
    status, body = _get(f"http://127.0.0.1:{lab_info['port']}/api/sessions?token={lab_info['token']}")
    assert status == 200 and any(s["kernel"]["name"] == config.KERNEL_NAME for s in json.loads(body))
    saved = nbformat.read(lab_info["root"] / f"{NOTEBOOK}.ipynb", as_version=4)
    outputs = [o for c in saved.cells for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs)
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs)
    figures = sorted((lab_info["tmp"] / "figures" / NOTEBOOK).glob("*.png"))
    assert figures, "the notebook saved no figure"
    for figure in figures:
        assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", figure
    for shot in ("1-opened.png", "2-progress-bar.png", "3-finished.png", "4-figure.png"):
        assert (shots / shot).stat().st_size > 10_000, shot


def test_kernels_use_ipc_unless_the_runtime_folder_is_too_deep(monkeypatch, tmp_path):
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", "/tmp/rt")
    assert lab.kernel_transport() == config.KERNEL_TRANSPORT == "ipc"
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / ("deep" * 20)))
    assert lab.kernel_transport() == "tcp"  # a Unix socket's path would be too long
