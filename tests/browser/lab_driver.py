"""Driving JupyterLab 4 the way a learner does: menus, the editor, the keyboard, the mouse.

Every helper works on a Playwright ``Page`` that shows one open notebook. Selectors are
JupyterLab's and ipywidgets' own CSS classes, plus the classes mhalib gives its widgets
(``mhalib-quiz*`` on quick checks, ``mhalib-verdict`` on a passed test cell's report).
"""

from __future__ import annotations

import re

NOTEBOOK = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook"
CODE_CELL = f"{NOTEBOOK} .jp-CodeCell"
KERNEL_IDLE = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator" \
              "[data-status='idle']"
WIDGET_TROUBLE = re.compile(r"Loading widget|Error displaying widget|model not found"
                            r"|Failed to load model class")
# A widget shown as text (``VBox(children=(...``) means the widget extension did not load.
WIDGET_AS_TEXT = re.compile(r"^\s*(?:[A-Z]\w*Box|interactive|IntSlider|FloatSlider)\(",
                            re.MULTILINE)

LOAD_TIMEOUT_MS = 90_000
RUN_TIMEOUT_MS = 180_000


CONNECTED_JS = ("() => { const bar = document.querySelector('#jp-main-statusbar');"
                " return !!bar && /\\| Idle/.test(bar.textContent); }")


def open_notebook(page, url: str, attempts: int = 3) -> None:
    """Go to ``url`` (a ``/lab/tree/...ipynb`` address) and wait until its kernel is connected
    and idle. Now and then (a few runs in ten, headless, beside other kernels) the page's kernel
    connection stays at "Connecting" although the server reached the kernel; loading the page
    again connects it."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for attempt in range(attempts):
        page.goto(url)
        page.wait_for_selector(f"{NOTEBOOK} .jp-Cell", timeout=LOAD_TIMEOUT_MS)
        page.wait_for_selector(KERNEL_IDLE, timeout=LOAD_TIMEOUT_MS)
        try:
            page.wait_for_function(CONNECTED_JS, timeout=45_000)
            return
        except PlaywrightTimeout:
            if attempt == attempts - 1:
                raise


_FIND = """([selector, part, text]) => Array.from(document.querySelectorAll(selector))
    .map((el, i) => [i, Array.from(el.querySelectorAll(part), p => p.textContent)])
    .filter(([i, texts]) => texts.some(t => t.includes(text))).map(([i]) => i)"""


def _indices(page, selector: str, containing: str, part: str = "*",
             timeout_ms: float = 20_000) -> list[int]:
    """Positions, among the elements matching ``selector``, of those whose ``part`` holds text.

    Waits until there is at least one: JupyterLab draws a long notebook's cells a few at a
    time. Matches the DOM's text (``textContent``), not the rendered text, since cells out of
    view are not rendered (``content-visibility``) and their rendered text is empty.
    """
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    arg = [selector, part, containing]
    try:
        page.wait_for_function(f"(arg) => ({_FIND})(arg).length > 0", arg=arg,
                               timeout=timeout_ms)
    except PlaywrightTimeout:
        return []
    return page.evaluate(_FIND, arg)


def _one(page, selector: str, containing: str, part: str = "*"):
    where = _indices(page, selector, containing, part)
    if len(where) != 1:
        raise AssertionError(f"expected one {selector!r} containing {containing!r}, "
                             f"found {len(where)}")
    return page.locator(selector).nth(where[0])


def code_cell(page, containing: str):
    """The one code cell whose code contains ``containing``."""
    return _one(page, CODE_CELL, containing, ".cm-content")


def code_cells(page):
    return page.locator(CODE_CELL)


def code_cell_before(page, containing: str):
    """The code cell just above the one whose code contains ``containing``."""
    where = _indices(page, CODE_CELL, containing, ".cm-content")
    if len(where) != 1 or where[0] == 0:
        raise AssertionError(f"no single code cell with one above it contains {containing!r}")
    return code_cells(page).nth(where[0] - 1)


def set_source(page, cell, code: str) -> None:
    """Replace the code in ``cell`` with ``code``, typed into its editor."""
    cell.scroll_into_view_if_needed()
    cell.locator(".cm-content").click()
    page.keyboard.press("ControlOrMeta+A")
    page.keyboard.insert_text(code)  # one insertion: no auto-indent or bracket closing
    page.keyboard.press("Escape")


def run_all_cells(page) -> None:
    """Run > Run All Cells, then wait until nothing is queued and the kernel is idle."""
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
    _wait_until_done(page)


def run_cell(page, cell) -> None:
    """Select ``cell`` and run it with Ctrl+Enter; wait until it has run."""
    prompt = cell.locator(".jp-InputPrompt")
    before = prompt.text_content()
    cell.scroll_into_view_if_needed()
    prompt.click()  # selects the cell in command mode
    page.keyboard.press("ControlOrMeta+Enter")
    page.wait_for_function(
        "([el, before]) => { const t = el.textContent; return t !== before && !t.includes('*'); }",
        arg=[prompt.element_handle(), before], timeout=RUN_TIMEOUT_MS)
    page.wait_for_selector(KERNEL_IDLE, timeout=RUN_TIMEOUT_MS)


def _wait_until_done(page) -> None:
    prompts = f"{CODE_CELL} .jp-InputPrompt"
    # First the queue starts (a '*' shows) or is already through (every prompt numbered) ...
    page.wait_for_function(
        """(sel) => {
             const t = Array.from(document.querySelectorAll(sel), e => e.textContent);
             return t.some(x => x.includes('*')) || t.every(x => /\\[\\d+\\]/.test(x)); }""",
        arg=prompts, timeout=RUN_TIMEOUT_MS)
    # ... then it drains.
    page.wait_for_function(
        """(sel) => !Array.from(document.querySelectorAll(sel))
                       .some(e => e.textContent.includes('*'))""",
        arg=prompts, timeout=RUN_TIMEOUT_MS)
    page.wait_for_selector(KERNEL_IDLE, timeout=RUN_TIMEOUT_MS)


def unrun_cells(page) -> list[str]:
    """The start of every non-empty code cell that has no execution number."""
    prompts = code_cells(page).locator(".jp-InputPrompt").all_text_contents()
    codes = code_cells(page).locator(".cm-content").all_text_contents()
    return [code[:60] for prompt, code in zip(prompts, codes)
            if code.strip() and not re.search(r"\[\d+\]", prompt)]


def error_outputs(page) -> list[str]:
    """Texts of the tracebacks shown in the notebook.

    JupyterLab renders an error like a stream to stderr; IPython's traceback header tells them
    apart from warnings.
    """
    return [text for text in stderr_outputs(page.locator(NOTEBOOK)) if "Traceback" in text]


def stderr_outputs(where) -> list[str]:
    """Texts of the stderr-like outputs (errors, warnings) inside ``where`` (page part or cell)."""
    stderr = where.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    return stderr.all_text_contents()


def output_text(cell) -> str:
    """The text of ``cell``'s outputs (``textContent``: also for cells out of view)."""
    return "\n".join(cell.locator(".jp-OutputArea-output").all_text_contents())


def widget_problems(page) -> list[str]:
    """Outputs where a widget did not render (still loading, failed, or shown as text)."""
    texts = page.locator(f"{NOTEBOOK} .jp-OutputArea-output").all_text_contents()
    return [t[:200] for t in texts if WIDGET_TROUBLE.search(t) or WIDGET_AS_TEXT.search(t)]


def image_source(cell) -> str:
    """The ``src`` of the (first) picture in ``cell``'s output."""
    return cell.locator(".jp-OutputArea-output img").first.get_attribute("src")


def drag_slider(page, slider, fraction: float) -> None:
    """Drag the handle of an ipywidgets slider by ``fraction`` of the track's width."""
    slider.scroll_into_view_if_needed()
    handle = slider.locator(".noUi-handle").first
    track = slider.locator(".noUi-base").first.bounding_box()
    box = handle.bounding_box()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x + fraction * track["width"], y, steps=8)
    page.mouse.up()


def validate(page) -> str:
    """Save, press nbgrader's Validate button, return what its dialog says (and close it)."""
    save(page)
    page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Toolbar").get_by_text(
        "Validate", exact=True).click()
    dialog = page.locator(".jp-Dialog")
    dialog.wait_for(timeout=RUN_TIMEOUT_MS)
    text = dialog.locator(".jp-Dialog-body").inner_text()
    dialog.locator(".jp-Dialog-footer button").last.click()
    dialog.wait_for(state="detached")
    return text


def bring_into_view(page, locator) -> None:
    """Scroll ``locator`` to the middle of the window and wait until it is drawn there.

    Cells out of view are drawn lazily and their height is only an estimate until then, so
    scroll, let two frames render, and scroll again to the settled position.
    """
    for _ in range(2):
        locator.evaluate("el => el.scrollIntoView({block: 'center'})")
        page.evaluate("() => new Promise(done => requestAnimationFrame("
                      "() => requestAnimationFrame(done)))")
    locator.wait_for(state="visible")


def quick_check(page, question_id: str):
    """The quick-check form (``.mhalib-quiz``) that shows ``question_id``."""
    return _one(page, f"{NOTEBOOK} .mhalib-quiz", question_id)


def answer_fill_in(page, form, text: str) -> str:
    """Type ``text`` into a fill-in-the-blank form, press its button, return the feedback."""
    form.scroll_into_view_if_needed()
    field = form.locator(".mhalib-quiz-input input")
    field.fill("")
    field.press_sequentially(text)
    return _press_check(page, form, text)


def answer_choice(page, form, option_text: str) -> str:
    """Pick the option that reads ``option_text`` (the order is shuffled per learner), press
    the form's button, return the feedback shown."""
    form.scroll_into_view_if_needed()
    form.locator(".mhalib-quiz-input .widget-radio-box label").filter(
        has_text=option_text).click()
    return _press_check(page, form, option_text)


def _press_check(page, form, answer: str) -> str:
    """Press the form's button; wait for the feedback about ``answer`` (its ``data-answer``),
    not one about an earlier value that the kernel may still have judged first. The field's
    new value reaches the kernel apart from the click, and on a loaded machine the click can
    arrive first and be judged on the old value: then the button is pressed again (three
    presses, 30 s in all)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    note = form.locator(".mhalib-quiz-feedback [data-answer]")
    for attempt in range(3):
        form.locator(".mhalib-quiz-check").click()
        try:
            page.wait_for_function(
                "([el, answer]) => { const n = el.querySelector('[data-answer]');"
                " return n && n.getAttribute('data-answer').includes(answer); }",
                arg=[form.locator(".mhalib-quiz-feedback").element_handle(), answer.strip()],
                timeout=10_000)
            break
        except PlaywrightTimeout:
            if attempt == 2:
                raise
    return note.inner_text()


def recorded_text(page, question_id: str) -> str:
    """What the record under the quick check's form says (it is saved with the notebook)."""
    cell = code_cell(page, f'ask("{question_id}")')
    return cell.locator(".mhalib-quiz-record").text_content()


def save(page) -> None:
    """Ctrl+S, and wait until the tab is no longer marked as changed."""
    page.keyboard.press("ControlOrMeta+S")
    page.wait_for_selector(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current.jp-mod-dirty",
                           state="detached", timeout=30_000)
