"""The notebooks' widgets in a real browser: JupyterLab on 127.0.0.1, Debian's Chromium driven by
Playwright. For every notebook the test opens its student version, with the course's solution and
its check added after each check (tests/one_run.py), runs all cells from the Run menu and saves it:
every unsolved check must fail as unsolved and nothing else, and every cell of the course notebook
must give its stored outputs (each notebook's only run in the suite: this run is its strict nbval
test too). Then, where the notebook shows widgets, it uses each as a student would
(types a sentence, moves a slider with the keyboard, picks from a drop-down, presses a button) and
waits for the kernel's answer to appear in the page. After each step the kernel must still be
alive and idle; at the end no Python traceback may show in the notebook, besides the failing
checks', or in JupyterLab's log console (where errors in widget callbacks go). Pictures of each
step go to tests/screenshots/ (git-ignored), with the seconds each notebook took in timings.json.

Every request outside 127.0.0.1 is blocked, so the views are shown to need no network: bertviz's
too, whose pages carry the scripts the package ships (onehot2gpt.vendor) instead of asking a CDN.

Needs `apt-get install -y chromium` and `pip install playwright` (never `playwright install`).
Without them the test fails under CI=true and is skipped elsewhere.
"""

import json
import os
import re
import time
from pathlib import Path

import pytest
from browser_helpers import (
    BERTVIZ_SCRIPTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    ROOT,
    SCREENSHOTS,
    JupyterLab,
    LabPage,
    Notebook,
    block_the_internet,
    choose,
    control,
    copy_notebooks,
    dropdown_options,
    dropdown_value,
    exact,
    image_src,
    press_slider,
    require,
    slider_value,
    type_text,
    type_textarea,
    wait_until,
)
from one_run import course_run_problems, is_solved_copy, student_run_problems
from onehot2gpt_teach.student import cell_tags

try:
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import expect, sync_playwright
except ImportError:  # reported by the fixtures: a failure in CI, a skip elsewhere
    sync_playwright = None

NOTEBOOKS = {p.stem: p for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))}
ANSWER_S = 90  # the kernel's answer to one interaction (a probe may train first)
RUN_ALL_S = 900  # all cells of one notebook (≈10–180 s on 2 cores)
TIMINGS: dict[str, dict[str, float]] = {}


def answer(locator, text, what: str, timeout: float = ANSWER_S):
    """Wait for `text` (a string or pattern) to appear in `locator`: the kernel's answer to `what`."""
    expect(locator, f"the kernel's answer to {what}").to_contain_text(text, timeout=timeout * 1000)


def settled(nb: Notebook, root, what: str):
    """After `what`: no error message in the widget, and the kernel alive and idle."""
    text = root.inner_text()
    assert "⚠" not in text, f"after {what} the widget shows an error: {text[:500]!r}"
    nb.assert_kernel_alive()


def changed(read, before, what: str, timeout: float = ANSWER_S):
    """Wait until `read()` differs from `before` (and is not empty): the kernel redrew after `what`."""
    return wait_until(
        lambda: (value := read()) and value != before and value, timeout, f"the kernel's answer to {what}"
    )


# -- one scenario per notebook: what a student does with its widgets ---------------------------------


def token_explorer(nb: Notebook):
    from onehot2gpt.vocab import tokenize_chars, tokenize_words

    root = nb.widget("explorer = TokenExplorer(")
    answer(root, "zyzzyva", "the notebook's own sentence")
    nb.screenshot(root, "after-run-all")
    sentence = "The quokka paid the bank."
    type_text(root, "Sentence", sentence)
    n_words = len(tokenize_words(sentence))
    answer(root, re.compile(rf"(?<!\d){n_words} tokens, vocabulary"), "typing a sentence")
    answer(root, "quokka", "typing a sentence")
    nb.screenshot(root, "typed-sentence")
    root.locator(".widget-toggle-buttons button", has_text="characters").click()
    n_chars = len(tokenize_chars(sentence, keep_spaces=False))
    answer(root, re.compile(rf"(?<!\d){n_chars} tokens, vocabulary"), "choosing characters")
    settled(nb, root, "choosing characters")
    nb.screenshot(root, "characters")


def embedding_explorer(nb: Notebook):
    root = nb.widget("explorer = EmbeddingExplorer(")
    image, table = root.locator("img.widget-image"), root.locator("table")
    before = changed(lambda: image_src(image), None, "running the cell (a PNG)")
    nb.screenshot(root, "after-run-all")
    type_text(root, "Words", "january, february")
    changed(lambda: image_src(image), before, "typing two words (a new picture)")
    answer(table, "january", "typing two words")
    answer(table, "february", "typing two words")

    def neighbours_per_row():
        rows = table.locator("tr").all_inner_texts()[1:]
        return [len(re.findall(r"\(-?\d\.\d\d\)", r)) for r in rows]

    start = slider_value(root, "Neighbours")
    assert press_slider(root, "Neighbours", "ArrowRight") == str(int(start) + 1)
    wait_until(
        lambda: neighbours_per_row() == [int(start) + 1] * 2,
        ANSWER_S,
        f"two rows of {int(start) + 1} neighbours after moving the slider",
    )
    settled(nb, root, "moving the Neighbours slider")
    nb.screenshot(root, "neighbours")
    type_text(root, "Words", "january, qzxjv")  # a student's typo
    answer(root, "not in the vocabulary", "a word the model never saw")
    answer(root, "qzxjv", "a word the model never saw")
    nb.screenshot(root, "unknown-word")


def layer_weight_explorer(nb: Notebook):
    root = nb.widget("explorer = LayerWeightExplorer(")
    image, summary = root.locator("img.widget-image"), root.locator(".widget-html").last
    answer(summary, "sentiment (SST-2)", "the notebook's choice of both tasks")
    nb.screenshot(root, "after-run-all")
    before = image_src(image)
    root.locator(".widget-select-multiple select").select_option(label=["POS (UD EWT)"])
    expect(summary, "one task left after picking POS only").not_to_contain_text("sentiment", timeout=ANSWER_S * 1000)
    before = changed(lambda: image_src(image), before, "picking one task (a new picture)")
    text = summary.inner_text()
    lam = press_slider(root, "λ", "ArrowLeft")  # 10 → 1: a probe trains first
    assert lam == "1.0", f"λ slider reads {lam!r} after one step left from 10"
    changed(lambda: image_src(image), before, "moving the λ slider (a probe trains)", timeout=300)
    changed(summary.inner_text, text, "moving the λ slider")
    settled(nb, root, "moving the λ slider")
    nb.screenshot(root, "lambda")


def attention_explorer(nb: Notebook, source: str):
    """Shared by notebooks 05, 06 and 08: layer and head sliders, query token, mean of heads."""
    root = nb.widget(source)
    image, top = root.locator("img.widget-image"), root.locator(".widget-html").last
    before = changed(lambda: image_src(image), None, "running the cell (a PNG)")
    answer(top, "attends most to", "running the cell")
    for label, key in (("Layer", "ArrowRight"), ("Head", "ArrowRight")):
        start = slider_value(root, label)
        new = press_slider(root, label, key)
        if new == start:  # at the right end: step back
            new = press_slider(root, label, "ArrowLeft")
        assert new != start, f"the {label} slider did not move"
        before = changed(lambda: image_src(image), before, f"moving the {label} slider to {new}")
    options = dropdown_options(root, "Query token")
    current = options.index(dropdown_value(root, "Query token"))
    query = options[(current + len(options) // 2) % len(options)]  # another token
    choose(root, "Query token", query)
    index, token = query.split(": ", 1)
    answer(top, f"{token} (token {index}) attends most to", f"picking query token {query!r}")
    before = changed(lambda: image_src(image), before, "picking a query token")
    mean = root.locator(".widget-checkbox input[type=checkbox]")
    mean.check()
    head_slider = control(root, "slider", "Head")
    wait_until(
        lambda: head_slider.locator(".noUi-target[disabled]").count(),
        ANSWER_S,
        "the Head slider to be disabled when the mean of heads is shown",
    )
    changed(lambda: image_src(image), before, "ticking mean of heads")
    settled(nb, root, "using the attention explorer")
    nb.screenshot(root, "layer-head-token")
    return root


def bertviz_drawn(view, what: str, layers: int | None = None, timeout: float = ANSWER_S):
    """Wait until the bertviz page `view` (its root <div id="bertviz-…">) has drawn: attention lines
    in its SVG and, for a head view (`layers` given), one Layer option per layer."""

    def drawn():
        lines, options = view.locator("svg line").count(), view.locator("#layer option").count()
        return lines > 0 and (layers is None or options == layers) and (lines, options)

    return wait_until(drawn, timeout, what)


def check_bertviz(nb: Notebook, source: str, layers: int | None = None):
    """bertviz draws with every request outside 127.0.0.1 blocked, and asks the network for nothing:
    its page carries its scripts (onehot2gpt.vendor)."""
    cell = nb.cell(source)
    view = cell.locator("[id^='bertviz-']")
    view.wait_for(state="attached", timeout=30_000)
    try:
        bertviz_drawn(view, "bertviz to draw its SVG with no network", layers)
    except AssertionError as exc:
        raise AssertionError(
            f"{exc}; requests outside 127.0.0.1: {nb.external}; its output reads "
            f"{cell.locator('.jp-OutputArea').inner_text()[:300]!r}"
        ) from None
    asked = [u for u in nb.external if u.startswith(BERTVIZ_SCRIPTS)]
    assert not asked, f"bertviz asked a CDN for {asked}"
    view.scroll_into_view_if_needed()
    nb.screenshot(cell.locator(".jp-OutputArea"), "bertviz")


def notebook_05(nb: Notebook):
    root = attention_explorer(nb, '{"all-MiniLM-L6-v2": minilm_source()},')
    type_text(root, "Sentence", "The animal didn't cross the street because it was too wide.")
    wait_until(
        lambda: any(o.endswith(": wide") for o in dropdown_options(root, "Query token")),
        ANSWER_S,
        "the query tokens of a new sentence",
    )
    type_text(root, "Sentence", "")  # an empty sentence: a message, no crash
    answer(root, "the sentence is empty", "an empty sentence")
    nb.screenshot(root, "empty-sentence")
    check_bertviz(nb, 'bertviz_view(attentions, tokens, view="head"', layers=6)  # MiniLM: 6 layers


def notebook_06(nb: Notebook):
    root = attention_explorer(nb, '{"date encoder (ours)": attention_source(')
    type_text(root, "Sentence", "Mon 1 Jan 2024")
    wait_until(
        lambda: "6: J" in dropdown_options(root, "Query token"), ANSWER_S, "the character tokens of 'Mon 1 Jan 2024'"
    )
    type_text(root, "Sentence", "Mon 1 Jan 2024 ✓")  # a character the date model never saw
    answer(root, "vocabulary", "a character outside the date model's vocabulary")
    choose(root, "Model", "all-MiniLM-L6-v2")  # MiniLM reads it as [UNK]
    wait_until(
        lambda: "0: [CLS]" in dropdown_options(root, "Query token"),
        ANSWER_S,
        "MiniLM's tokens after choosing it from the Model menu",
    )
    wait_until(lambda: "⚠" not in root.inner_text(), ANSWER_S, "the error to clear with MiniLM")
    nb.screenshot(root, "minilm")


def notebook_07(nb: Notebook):
    from onehot2gpt.checkpoints import checkpoint_path
    from onehot2gpt.subword import WordPieceTokenizer
    from onehot2gpt.widgets import MaskingExplorer

    masking = nb.widget("masking = MaskingExplorer(")
    nb.screenshot(masking, "masking-after-run-all")
    # The same widget in this process says what the kernel must show (setting .value runs it).
    tokenizer = WordPieceTokenizer.load(checkpoint_path("bert-wikitext2") / "vocab.txt")
    sentence = "The castle was rebuilt in the nineteenth century by a famous architect ."
    local = MaskingExplorer(tokenizer, text=sentence, seed=int(slider_value(masking, "Draw (seed)")))
    reads = masking.locator("table tr").nth(1)  # the row "model reads"

    def shown():
        return [t.strip() for t in reads.locator("td").all_inner_texts()[1:]]

    def expected():
        return [i if k else "" for i, k in zip(local.inputs, local.kinds)]

    type_text(masking, "Sentence", sentence)
    wait_until(lambda: shown() == expected(), ANSWER_S, f"the masking of {sentence!r}")
    seed = press_slider(masking, "Draw (seed)", "ArrowRight")
    local.seed.value = int(seed)
    wait_until(lambda: shown() == expected(), ANSWER_S, f"the masking drawn with seed {seed}")
    expect(masking.locator(".widget-html").nth(1)).to_have_text(local.summary.value)
    settled(nb, masking, "drawing another masking")
    nb.screenshot(masking, "masking-new-seed")

    blank = nb.widget("blank = FillInTheBlank(")
    output = blank.locator(".widget-html").last
    answer(output, "[MASK] 1", "running the cell")
    type_text(blank, "Sentence", "the [MASK] was released in [MASK] 2011 .")
    answer(output, "[MASK] 2", "a sentence with two blanks")
    k = int(press_slider(blank, "Top k", "ArrowRight"))
    wait_until(
        lambda: (
            output.locator("table").count() == 2
            and all(t.locator("tr").count() == k for t in output.locator("table").all())
        ),
        ANSWER_S,
        f"two blanks with {k} guesses each after moving Top k",
    )
    type_text(blank, "Sentence", "no blank here")  # a student forgets [MASK]
    answer(blank.locator(".widget-html").first, "⚠ ValueError: no [MASK]", "a sentence without a blank")
    nb.screenshot(blank, "fill-in-the-blank")

    stepper = nb.widget("bert_stepper = ForwardStepper(")
    header = stepper.locator(".widget-html").nth(1)
    answer(header, re.compile(r"Step (\d+) of \1: probabilities"), "the notebook's last stage")
    answer(header, "shown: position 6: [MASK]", "the notebook's choice of the [MASK]")
    stepper.locator("button.jupyter-button", has_text=exact("◀")).click()
    answer(header, "temperature", "pressing ◀")
    answer(stepper, "matches the library's forward", "running the cell")
    settled(nb, stepper, "stepping through the BERT")
    nb.screenshot(stepper, "bert-stepper")


def notebook_08(nb: Notebook):
    root = nb.widget("explorer = AttentionExplorer(\n    sources,")
    image = root.locator("img.widget-image")
    before = changed(lambda: image_src(image), None, "running the cell (a PNG)")
    assert slider_value(root, "Layer") == "3"
    choose(root, "Model", "all-MiniLM-L6-v2")
    before = changed(lambda: image_src(image), before, "choosing MiniLM in the Model menu")
    # The course BERT has 4 layers (0–3), MiniLM 6: the kernel must have widened the slider.
    assert press_slider(root, "Layer", "ArrowRight") == "4", "the Layer slider stops at the course BERT's 3"
    changed(lambda: image_src(image), before, "moving the Layer slider to 4")
    settled(nb, root, "choosing MiniLM")
    nb.screenshot(root, "minilm-layer-4")
    attention_explorer(nb, "explorer = AttentionExplorer(\n    sources,")
    check_bertviz(nb, 'bertviz_view(maps, tokens, view="model"')


def notebook_09(nb: Notebook):
    root = nb.widget("sampler = SamplingExplorer(")
    status, table, output = (root.locator(":scope > .widget-html").nth(i) for i in range(3))
    answer(output, "150 tokens, greedy", "the notebook's greedy run")
    nb.screenshot(root, "after-run-all")
    type_textarea(root, "Prompt", "JULIET:\n")
    answer(table, "JULIET:", "typing a prompt")
    temperature = press_slider(root, "Temperature", "ArrowRight")
    assert temperature == "0.05", f"Temperature reads {temperature!r} after one step right from 0"
    answer(table, "temperature 0.05, top-k 10", "moving the Temperature slider")
    seed = control(root, "text", "Seed").locator("input")
    seed.fill("7")
    seed.press("Enter")
    root.locator("button.jupyter-button", has_text="Generate").click()
    answer(output, "150 tokens, seed 7, temperature 0.05, top-k 10", "pressing Generate")
    answer(output, "JULIET:", "pressing Generate")
    settled(nb, root, "pressing Generate")
    nb.screenshot(root, "generated")
    type_textarea(root, "Prompt", "猫")  # a character Shakespeare never wrote
    answer(status, "cannot encode", "a prompt the tokenizer cannot encode")
    nb.screenshot(root, "unknown-character")
    look_inside(nb)


def all_heads_view(nb: Notebook, source: str, pick: str):
    """Press one head's button: the large picture and its caption follow."""
    root = nb.widget(source)
    image, caption = root.locator("img.widget-image").last, root.locator(".widget-html").last
    thumbs = root.locator("img.widget-image")
    wait_until(
        lambda: thumbs.count() > 2 and all(image_src(t) for t in thumbs.all()), ANSWER_S, "every thumbnail drawn"
    )
    before = image_src(image)
    root.locator("button.jupyter-button", has_text=exact(pick)).click()
    layer, head = pick[1:].split(" H")
    answer(caption, f"Layer {layer}, head {head}", f"pressing {pick}")
    changed(lambda: image_src(image), before, f"pressing {pick} (a new picture)")
    settled(nb, root, f"pressing {pick}")
    nb.screenshot(root, f"all-heads-{pick.replace(' ', '')}")


def look_inside(nb: Notebook):
    """Notebook 09, section 9: the forward-pass stepper, the logit lens, interventions, all heads."""
    stepper = nb.widget("stepper = ForwardStepper(")
    header = stepper.locator(".widget-html").nth(1)
    answer(stepper, "matches the library's forward", "running the cell")
    answer(header, "Step 10 of 66: layer 0 · softmax", "the notebook's next cell choosing a step")
    for _ in range(4):
        stepper.locator("button.jupyter-button", has_text=exact("▶")).click()
    answer(header, "Step 14 of 66: layer 0 · LayerNorm 2", "pressing ▶ four times")
    type_text(stepper, "Prompt", "the river flows into the")
    answer(header, "shown: position 5: the", "a new prompt (its last piece)")
    assert slider_value(stepper, "Position") == "5", "the position must move to the new prompt's last piece"
    settled(nb, stepper, "stepping and a new prompt")
    nb.screenshot(stepper, "stepper")
    type_text(stepper, "Prompt", 'he said "')  # a quote token shows as a quote, not as &quot;
    answer(header, re.compile(r'shown: position \d+: "'), "a prompt ending in a quote")
    assert "&quot;" not in stepper.inner_text(), "the stepper shows a quote escaped twice"
    type_text(stepper, "Prompt", "")  # an empty prompt: a message, no crash
    answer(stepper, "the prompt is empty", "an empty prompt")

    lens = nb.widget("lens_view = LogitLens(")
    table = lens.locator(".widget-html").last
    answer(table, "layer 3", "running the cell")
    type_text(lens, "Prompt", "he was born in new")
    answer(table, "york", "a prompt ending in 'new'")
    press_slider(lens, "Position", "ArrowLeft")  # one piece back: the next piece is known
    answer(table, "next is “new”", "moving the position back one piece")
    type_text(lens, "Prompt", 'he said "')
    press_slider(lens, "Position", "ArrowLeft")  # the quote is now the next piece
    answer(table, 'next is “"”', "a prompt with a quote")
    assert "&quot;" not in lens.inner_text(), "the logit lens shows a quote escaped twice"
    settled(nb, lens, "the logit lens")
    nb.screenshot(lens, "logit-lens")

    ablation = nb.widget("ablation = InterventionExplorer(")
    result = ablation.locator(".widget-html").last
    answer(result, "Switched off: nothing", "running the cell")
    control(ablation, "select-multiple", "MLPs off").locator("select").select_option(label=["layer 0 MLP"])
    answer(result, "Switched off: layer 0 MLP", "switching the first MLP off")
    control(ablation, "select-multiple", "Tokens off").locator("select").select_option(index=[1])
    answer(result, "token 1:", "switching a token off")
    settled(nb, ablation, "switching parts off")
    nb.screenshot(ablation, "interventions")
    all_heads_view(nb, "all_heads = AllHeadsView(", "L4 H7")


def notebook_11(nb: Notebook):
    all_heads_view(nb, "induction_view = AllHeadsView(", "L0 H1")


def notebook_10(nb: Notebook):
    root = nb.widget("prompter = ZeroShotPrompter(")
    status, output = root.locator(":scope > .widget-html").first, root.locator(":scope > .widget-html").last
    prompt = control(root, "textarea", "Prompt").locator("textarea")
    answer(output, "course, Q/A 10% continues", "the notebook's own run")
    nb.screenshot(root, "after-run-all")
    choose(root, "Template", "TL;DR:")
    wait_until(lambda: prompt.input_value().endswith("TL;DR:"), ANSWER_S, "a TL;DR: prompt")
    expect(control(root, "text", "Question"), "the Question box hidden for TL;DR:").to_be_hidden(
        timeout=ANSWER_S * 1000
    )
    zero_shot = prompt.input_value()
    assert press_slider(root, "Examples", "ArrowRight") == "1"
    wait_until(
        lambda: (p := prompt.input_value()).endswith(zero_shot) and len(p) > len(zero_shot),
        ANSWER_S,
        "one solved example before the passage",
    )
    choose(root, "Template", "Q: … A:")
    type_text(root, "Question", "what does mira keep ?")
    wait_until(
        lambda: prompt.input_value().endswith("Q: what does mira keep ?\nA:"), ANSWER_S, "the question in the prompt"
    )
    models = [m for m in dropdown_options(root, "Model") if m.startswith("course")]
    choose(root, "Model", models[0])
    root.locator("button.jupyter-button", has_text="Continue").click()
    answer(output, f"{models[0]} continues", "pressing Continue")
    settled(nb, root, "pressing Continue")
    nb.screenshot(root, "continued")
    # GPT-2 is not in the Hugging Face cache offline: a message, and the course model stays chosen.
    choose(root, "Model", "GPT-2 (downloads once)")
    wait_until(
        lambda: (
            "⚠" in status.inner_text()
            or not status.inner_text().strip()
            and dropdown_value(root, "Model").startswith("GPT-2")
        ),
        120,
        "GPT-2 to load or fail",
    )
    if "⚠" in status.inner_text():
        wait_until(
            lambda: dropdown_value(root, "Model") == models[0],
            ANSWER_S,
            "the Model menu to return to the course model after GPT-2 failed",
        )
    nb.screenshot(root, "gpt2")


SCENARIOS = {
    "01_onehot": token_explorer,
    "02_word2vec": embedding_explorer,
    "04_elmo": layer_weight_explorer,
    "05_attention": notebook_05,
    "06_transformer": notebook_06,
    "07_bert_pretraining": notebook_07,
    "08_bert_finetuning": notebook_08,
    "09_gpt": notebook_09,
    "10_zero_shot": notebook_10,
    "11_beyond": notebook_11,
}


def widget_names() -> list[str]:
    import inspect

    import ipywidgets
    from onehot2gpt import widgets

    classes = [
        n
        for n, c in vars(widgets).items()
        if inspect.isclass(c) and c.__module__.startswith(widgets.__name__) and issubclass(c, ipywidgets.Widget)
    ]
    return classes + ["bertviz_view"]


def code_cells(path: Path) -> list[str]:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    sources = [
        "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        for c in cells
        if c["cell_type"] == "code"
    ]
    return [s for s in sources if s.strip()]


def test_every_notebook_with_a_widget_has_a_browser_scenario():
    names = widget_names()
    assert "AttentionExplorer" in names and "ZeroShotPrompter" in names
    with_widgets = {
        stem
        for stem, path in NOTEBOOKS.items()
        if any(re.search(rf"\b{n}\(", s) for s in code_cells(path) for n in names)
    }
    assert with_widgets == set(SCENARIOS), (
        f"notebooks showing widgets {sorted(with_widgets)} and browser scenarios {sorted(SCENARIOS)} differ"
    )


# -- the server, the browser, and the test ------------------------------------------------------------


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    require(sync_playwright is not None, "Python Playwright is not installed (pip install playwright)")
    require(Path(CHROMIUM).exists(), f"no Chromium at {CHROMIUM} (apt-get install -y chromium)")
    home = tmp_path_factory.mktemp("browser")
    copy_notebooks(home / "root")
    server = JupyterLab(home / "root", home)
    server.start()
    yield server
    server.stop()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    timings = SCREENSHOTS / "timings.json"  # `make test` runs two halves, one per worker: merge
    try:
        earlier = json.loads(timings.read_text())
    except (OSError, ValueError):
        earlier = {}
    timings.write_text(json.dumps({**earlier, **TIMINGS}, indent=1, sort_keys=True))


@pytest.fixture(scope="module")
def chromium():
    """One Chromium for the module's tests: Playwright's sync API runs one instance per thread."""
    require(sync_playwright is not None, "Python Playwright is not installed (pip install playwright)")
    require(Path(CHROMIUM).exists(), f"no Chromium at {CHROMIUM} (apt-get install -y chromium)")
    playwright = sync_playwright().start()
    try:
        try:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, timeout=60_000)
        except PlaywrightError as exc:
            require(False, f"Chromium at {CHROMIUM} does not start under Playwright: {exc}")
        yield browser
        browser.close()
    finally:
        playwright.stop()


@pytest.fixture(scope="module")
def lab_page(lab, chromium):
    context = chromium.new_context(viewport={"width": 1400, "height": 1200})
    block_the_internet(context)
    # One tab with JupyterLab loaded once for all the notebooks of this worker (see LabPage).
    lab_page = LabPage(context, lab, f"browser-{os.getpid()}")
    lab_page.load()
    yield lab_page
    context.close()


@pytest.mark.parametrize("stem", sorted(NOTEBOOKS))
def test_student_version_runs_and_its_widgets_answer_in_the_browser(lab, lab_page, stem):
    """The notebook's one run in the suite, as a student meets it: its student version opened in
    JupyterLab, Run All Cells, with the course's solution and the check again after each unsolved
    check (tests/one_run.py). Saved, every unsolved check must have failed with "not written yet"
    and no other cell at all, and every cell of the course notebook must have given its stored
    outputs (strict nbval's comparison); then the notebook's widget scenario, if it has one, with no
    traceback besides the unsolved checks'. Without a browser, outside CI, tests/test_notebooks.py
    makes the same run with nbclient instead."""
    path = NOTEBOOKS[stem]
    for old in SCREENSHOTS.glob(f"{stem}-*.png"):
        old.unlink()
    started = time.monotonic()
    run = lab.root / "notebooks" / "student" / path.name  # the student version with the solutions added
    nb = Notebook(lab_page, lab, f"notebooks/student/{path.name}")
    try:
        nb.open()
        figures_render_offline(nb, run)
        opened = time.monotonic()
        cells = [c for c in json.loads(run.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code"]
        unsolved = ["check" in cell_tags(c) and not is_solved_copy(c) for c in cells]
        nb.run_all(len(code_cells(run)), RUN_ALL_S, may_fail=unsolved)
        ran = time.monotonic()
        saved = nb.save()
        problems = student_run_problems(saved, f"student/{path.name}") + course_run_problems(
            saved, json.loads(path.read_text(encoding="utf-8")), f"notebooks/{path.name}"
        )
        assert not problems, "\n".join(problems)
        checks = nb.tracebacks()  # each failing check shows its traceback
        assert len(checks) == sum(unsolved), f"{len(checks)} tracebacks in the page, {sum(unsolved)} unsolved checks"
        if stem in SCENARIOS:
            SCENARIOS[stem](nb)
        nb.assert_kernel_alive()
        nb.assert_no_traceback(log_console=True, besides=checks)
        TIMINGS[stem] = {
            "open_s": round(opened - started, 1),
            "run_all_s": round(ran - opened, 1),
            "widgets_s": round(time.monotonic() - ran, 1),
        }
    except BaseException:
        try:
            nb.screenshot(nb.page, "failure")
        except Exception:  # the picture is a help, never the reason a test fails
            pass
        raise
    finally:
        nb.close()


def figure_alts(path: Path) -> list[str]:
    """The alt texts of the architecture figures embedded in a notebook's markdown."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [
        re.search(r'alt="([^"]*)"', "".join(c["source"])).group(1)
        for c in cells
        if c.get("metadata", {}).get("onehot2gpt", {}).get("figure")
    ]


WITH_FIGURES = sorted(stem for stem, path in NOTEBOOKS.items() if figure_alts(path))


def test_model_notebooks_have_figures():
    """The figures are checked to render by the student-version test above (on the same markdown)."""
    assert {s[:2] for s in WITH_FIGURES} >= {"02", "03", "04", "05", "06", "07", "08", "09"}
    for stem in WITH_FIGURES:
        student = ROOT / "notebooks" / "student" / NOTEBOOKS[stem].name
        assert figure_alts(student) == figure_alts(NOTEBOOKS[stem]), f"{student.name}: its figures differ"


def figures_render_offline(nb: Notebook, path: Path):
    """Opened in JupyterLab with every request outside 127.0.0.1 blocked, each architecture figure's
    image decodes: it is inside the notebook, not fetched from anywhere. (The student version's
    markdown is the course notebook's, as tests/test_notebooks.py checks, so its figures are too.)"""
    expected = {alt: True for alt in figure_alts(path)}
    if not expected:
        return
    wait_until(
        lambda: nb.figures_shown() == expected,
        30,
        lambda: f"the figures of {path.name} to render: {nb.figures_shown()} != {expected}",
    )
    nb.screenshot(nb.page.locator(".jp-MarkdownOutput img").first, "figure")


BERTVIZ_CELLS = [
    "import torch\nfrom onehot2gpt.widgets import bertviz_view\n\n"
    "tokens = ['[CLS]', 'the', 'cat', '</script>', '[SEP]', 'it', 'purred', '[SEP]']\n"
    "maps = [torch.softmax(torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(i)), -1) for i in range(2)]",
    'bertviz_view(maps, tokens, view="head", html_action="view")',
    'bertviz_view(maps, tokens, view="model", sentence_b_start=5)',
]


def test_bertviz_draws_with_no_network(lab, lab_page, tmp_path):
    """A head view and a model view, in JupyterLab and in the notebook exported to HTML, draw with
    every request outside 127.0.0.1 blocked, and ask the network for nothing (block_the_internet
    makes no exception for them)."""
    import nbformat
    from nbconvert import HTMLExporter

    path = lab.root / "bertviz_offline.ipynb"
    kernel = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
    nbformat.write(
        nbformat.v4.new_notebook(
            cells=[nbformat.v4.new_code_cell(c) for c in BERTVIZ_CELLS], metadata={"kernelspec": kernel}
        ),
        path,
    )
    nb = Notebook(lab_page, lab, path.name)
    try:
        nb.open()
        nb.run_all(len(BERTVIZ_CELLS), 120, may_fail=[False] * len(BERTVIZ_CELLS))
        head = nb.cell('view="head"').locator("[id^='bertviz-']")
        model = nb.cell('view="model"').locator("[id^='bertviz-']")
        lines, options = bertviz_drawn(head, "the head view to draw in JupyterLab", layers=2)
        assert lines >= 8 * 8 and options == 2, f"head view: {lines} lines, {options} Layer options"
        assert head.locator("svg text").count() >= 2 * 8, "the head view must show both columns of tokens"
        lines, _ = bertviz_drawn(model, "the model view to draw in JupyterLab")
        assert lines >= 2 * 3 * 8 * 8, f"model view: {lines} lines for 2 layers × 3 heads of 8 × 8"
        assert model.locator("#filter option").count() == 5, "the sentence-pair menu (All, A→A, …)"
        nb.screenshot(nb.page.locator(".jp-Notebook"), "bertviz-jupyterlab")
        saved = nb.save()
        assert not nb.external, f"requests outside 127.0.0.1: {nb.external}"
        nb.assert_no_traceback(log_console=True)
    finally:
        nb.close()
    # The saved notebook exported as a static HTML page, opened from disk in the same offline browser.
    page_html, _ = HTMLExporter().from_notebook_node(nbformat.reads(json.dumps(saved), as_version=4))
    exported = tmp_path / "bertviz_offline.html"
    exported.write_text(page_html, encoding="utf-8")
    page = lab_page.context.new_page()
    try:
        page.goto(exported.as_uri())
        views = page.locator("[id^='bertviz-']")
        wait_until(lambda: views.count() == 2, 30, "both bertviz views in the exported page")
        bertviz_drawn(views.nth(0), "the head view to draw in the exported HTML", layers=2)
        bertviz_drawn(views.nth(1), "the model view to draw in the exported HTML")
        page.screenshot(path=str(SCREENSHOTS / "bertviz-exported.png"), full_page=True)
    finally:
        page.close()


# Every slide of a deck, visited in order: its position, whether it is then the one shown, the height
# of its content (scrollHeight: a slide that overflows shows its full height) and its number of cells,
# with reveal.js's transitions off.
VISIT_EVERY_SLIDE = """() => {
    Reveal.configure({transition: "none"});
    return Reveal.getSlides().map((slide) => {
        const at = Reveal.getIndices(slide);
        Reveal.slide(at.h, at.v);
        const current = Reveal.getCurrentSlide();
        return [at.h, at.v || 0, current === slide, current.scrollHeight, current.querySelectorAll(".jp-Cell").length];
    });
}"""
# Headings that do not open their slide: every #/##/### heading must be its slide's first heading,
# in its first cell.
STRAY_HEADINGS = """() => Array.from(document.querySelectorAll(".reveal .slides section h1, section h2, section h3"))
    .filter((h) => {
        const slide = h.closest("section");
        const cell = slide.querySelector(".jp-Cell");
        return !cell || !cell.contains(h) || cell.querySelector("h1, h2, h3") !== h;
    })
    .map((h) => h.textContent)"""


def open_deck(browser, index, outside):
    """A 1280 × 720 page showing the deck at `index`, every request that is not for a file refused (and
    recorded in `outside`); returns the page and the lists of failed requests and page errors."""
    context = browser.new_context(viewport={"width": 1280, "height": 720})

    def refuse(route):
        outside.append(route.request.url)
        route.abort("blockedbyclient")

    context.route(re.compile(r"^(?!file:)"), refuse)
    page = context.new_page()
    failed, errors = [], []
    page.on("requestfailed", lambda request: failed.append(request.url))
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(index.as_uri())
    page.wait_for_function("window.onehot2gptDeck && (onehot2gptDeck.ready || onehot2gptDeck.error)", timeout=180_000)
    return page, failed, errors


def test_a_lecture_deck_fits_1280_by_720_and_needs_no_network(chromium, tmp_path):
    """Notebook 05's deck (onehot2gpt-slides) in Chromium at 1280 × 720 with every request that is not
    for a file refused: reveal.js starts, the formulas are typeset, nothing is asked of the network and
    no file is missing, every heading opens a slide, and no slide is taller than 720 px. The same deck
    without its split (--no-fit) has slides taller than that: the measurement sees an overflow.
    Screenshots: tests/screenshots/slides-*.png."""
    from onehot2gpt_teach.slides import HEIGHT, build_deck

    notebook = ROOT / "notebooks" / "05_attention.ipynb"
    fitted = build_deck(notebook, tmp_path / "deck")
    whole = build_deck(notebook, tmp_path / "whole", fit=False)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    browser = chromium
    outside = []
    page, failed, errors = open_deck(browser, fitted, outside)
    deck = page.evaluate("window.onehot2gptDeck")
    assert deck["error"] is None and page.evaluate("Reveal.isReady()"), deck
    assert outside == [] and failed == [] and errors == [], (outside, failed, errors)
    assert page.locator("mjx-container svg").count() >= 10, "MathJax typeset the formulas"
    assert page.evaluate(STRAY_HEADINGS) == []
    slides = page.evaluate(VISIT_EVERY_SLIDE)
    assert len(slides) == page.evaluate("Reveal.getTotalSlides()") and all(s[2] for s in slides)
    assert len(slides) >= 10 and deck["split"] >= 1
    assert [s for s in slides if s[4] == 0] == [], "slides without a cell"
    tall = [s for s in slides if s[3] > HEIGHT]
    assert tall == [], f"slides (h, v, shown, height, cells) taller than {HEIGHT} px: {tall}"
    page.evaluate("Reveal.slide(0, 0)")
    page.screenshot(path=str(SCREENSHOTS / "slides-05-first.png"))
    h, v = max(slides, key=lambda s: s[3])[:2]
    page.evaluate(f"Reveal.slide({h}, {v})")
    page.screenshot(path=str(SCREENSHOTS / "slides-05-fullest.png"))
    page.context.close()

    page, failed, errors = open_deck(browser, whole, outside)
    assert page.evaluate("onehot2gptDeck.ready") and outside == []
    heights = [s[3] for s in page.evaluate(VISIT_EVERY_SLIDE)]
    assert max(heights) > HEIGHT, f"the deck without its split should overflow: {heights}"
    page.context.close()
