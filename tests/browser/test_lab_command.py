"""``mhalib lab`` without a browser: what it chooses, and what the server it starts serves.

These run everywhere (no Chromium needed). The server test talks HTTP to the address the
command printed, on a tiny course of two empty lessons.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import nbformat
import pytest

from mhalib.commands import lab
from tests.browser.lab_server import REPO, start_lab


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    lab.add_arguments(parser)
    return parser.parse_args(argv)


def make_course(root):
    """notebooks/ with lessons 02-b and 01-a (and an empty 00-notes), plus grading/."""
    for lesson, name in [("02-b", "second.ipynb"), ("01-a", "first.ipynb")]:
        folder = root / "notebooks" / lesson
        folder.mkdir(parents=True)
        notebook = nbformat.v4.new_notebook()
        notebook.cells = [nbformat.v4.new_markdown_cell(f"# {lesson}")]
        nbformat.write(notebook, folder / name)
    (root / "notebooks" / "00-notes").mkdir()
    (root / "grading").mkdir()
    (root / "grading" / "nbgrader_config.py").write_text("c = get_config()\n")
    return root


def test_first_lesson_is_the_first_folder_holding_a_notebook(tmp_path):
    course = make_course(tmp_path)
    assert lab.first_lesson(course / "notebooks").as_posix() == "01-a/first.ipynb"
    assert lab.first_lesson(course / "grading") is None


def test_learner_layout_serves_notebooks_and_opens_lesson_one(tmp_path, monkeypatch):
    monkeypatch.chdir(make_course(tmp_path))
    root, workdir, url = lab.resolve_layout(parse([]))
    assert root == workdir == tmp_path / "notebooks"
    assert url == "/lab/tree/01-a/first.ipynb"


def test_instructor_layout_serves_the_course_from_grading(tmp_path, monkeypatch):
    monkeypatch.chdir(make_course(tmp_path))
    root, workdir, url = lab.resolve_layout(parse(["--instructor"]))
    assert (root, workdir, url) == (tmp_path, tmp_path / "grading", "/formgrader")


def test_bad_folders_are_named_in_the_error(tmp_path, monkeypatch):
    monkeypatch.chdir(make_course(tmp_path))
    with pytest.raises(ValueError, match=r"--notebook-dir='lessons' is not a folder"):
        lab.resolve_layout(parse(["--notebook-dir", "lessons"]))
    with pytest.raises(ValueError, match=r"--course-dir='notebooks' holds no nbgrader_config"):
        lab.resolve_layout(parse(["--instructor", "--course-dir", "notebooks"]))


def test_jupyter_gets_the_choices_and_the_arguments_after_the_double_dash(tmp_path):
    argv = lab.jupyter_argv(parse(["--no-browser", "--", "--ServerApp.quit_button=False"]),
                            tmp_path, "/lab/tree/x.ipynb", 9999, "secret")
    assert f"--ServerApp.root_dir={tmp_path}" in argv
    assert {"--ServerApp.port=9999", "--ServerApp.open_browser=False",
            "--IdentityProvider.token=secret", "--ServerApp.ip=127.0.0.1"} <= set(argv)
    assert argv[-1] == "--ServerApp.quit_button=False"
    learner_off = {a for a in argv if a.startswith("--ServerApp.jpserver_extensions=")}
    assert learner_off == {f"--ServerApp.jpserver_extensions={name}=False"
                           for name in lab.INSTRUCTOR_SERVER_EXTENSIONS}
    instructor = lab.jupyter_argv(parse(["--instructor"]), tmp_path, "/formgrader", 9999, "t")
    assert not any(a.startswith("--ServerApp.jpserver_extensions=") for a in instructor)


def test_free_port_skips_a_port_in_use():
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        assert lab.free_port("127.0.0.1", start=taken, tries=5) != taken


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, ""


def test_instructor_mode_creates_the_gradebook_folder(tmp_path):
    (tmp_path / "nbgrader_config.py").write_text(
        "c = get_config()\n"
        f"c.CourseDirectory.db_url = 'sqlite:///{tmp_path}/course/class/gradebook.db'\n")
    lab.prepare_gradebook_folder(tmp_path)
    assert (tmp_path / "course" / "class").is_dir()
    assert not (tmp_path / "course" / "class" / "gradebook.db").exists()


@pytest.mark.xdist_group("jupyterlab")
def test_the_printed_address_opens_lesson_one_and_needs_the_token(tmp_path):
    course = make_course(tmp_path / "course")
    opened, fake_browser = tmp_path / "opened.txt", tmp_path / "fake_browser.py"
    fake_browser.write_text(f"import sys\nopen({str(opened)!r}, 'w').write(sys.argv[1])\n")
    server = start_lab(course, [], tmp_path / "jupyter",
                       browser_command=f"{sys.executable} {fake_browser} %s")
    try:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/lab/tree/01-a/first\.ipynb\?token=\w{32,}",
                            server.url), server.url
        status, page = _get(server.url)
        assert status == 200
        config = json.loads(re.search(r'id="jupyter-config-data"[^>]*>\s*(\{.*?\})\s*</script>',
                                      page, re.S).group(1))
        assert config["treePath"] == "01-a/first.ipynb"
        loaded = {extension["name"] for extension in config["federated_extensions"]}
        # ipywidgets' JupyterLab extension is found even with Jupyter's folders isolated.
        assert "@jupyter-widgets/jupyterlab-manager" in loaded, loaded
        assert set(lab.INSTRUCTOR_LAB_PLUGINS) <= set(config["disabledExtensions"])
        # The root is notebooks/, so the lesson is at the top; nothing answers without a token.
        assert _get(server.page_url("/api/contents/01-a/first.ipynb"))[0] == 200
        assert _get(f"{server.base}/api/contents")[0] == 403
        # Formgrader is an instructor tool: not served to learners.
        assert _get(server.page_url("/formgrader"))[0] == 404
        # The browser was sent to the lesson (through Jupyter's redirect file, token inside).
        deadline = time.monotonic() + 20
        while not opened.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        target = opened.read_text()
        if target.startswith("file://"):
            target = Path(urllib.parse.urlparse(target).path).read_text()
        assert f"/lab/tree/01-a/first.ipynb?token={server.token}" in target, target
    finally:
        server.stop()
    assert server.process.returncode is not None


def test_the_course_release_has_lesson_one_where_the_command_looks():
    lesson = lab.first_lesson(REPO / "notebooks")
    assert lesson is not None and lesson.as_posix() == (
        "01-single-head/single_head_attention.ipynb")
