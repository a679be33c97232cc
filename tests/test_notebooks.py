"""The notebook series: structure (fast), headless execution in fast mode (slow), and JupyterLab serving it.

The execution tests run every notebook top to bottom with nbclient, one at a time, with
``DSL_FAST=1`` (the 0.5B model, small budgets) and offline Hugging Face settings.
"""
from __future__ import annotations

import importlib
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import warnings
from pathlib import Path

import nbformat
import pytest
from servers import free_port

from helpers.config import PROJECT_ROOT
from helpers.lab.execution import cells_hash, stale_pages, venv_kernel_name
from helpers.lab.notebooks import (DB_DIR_ENV, NOTEBOOK_DIR, PROMPTS_ENV, check_citations, execute_notebook, kernel_env,
                                   lab_prompts, milvus_path, notebook_config, notebook_paths, prompts_file,
                                   renumber_citations, save_prompt)
from helpers.models.llama_server import wait_for_url
from helpers.prompts import get_prompt, prompt_names, prompt_version

EXPECTED = [
    "00_setup_and_first_call", "01_knowledge_base", "02_decomposition", "03_routing",
    "04_retrieval_and_relevance", "05_reflection_and_the_loop", "06_synthesis", "07_simpsons_end_to_end",
    "08_deepsearch_agent", "09_evaluation", "10_chain_search",
]
NOTEBOOKS = [NOTEBOOK_DIR / f"{name}.ipynb" for name in EXPECTED]
TIMEOUT_S = 300  # per cell in fast mode; a whole notebook may take at least twice that (``time_limit_s``)
COST_FACTOR = 4  # a fast-mode run is expected within an eighth (a prepared database) to four times the minutes stated
FAST_COST = re.compile(r"about (\d+(?:\.\d+)?)(?: to (\d+(?:\.\d+)?))? minutes?")
FAST_CALLS = re.compile(r"(\d+) calls in all")  # a fast-mode total of model calls, where the cost line states one
IMPORT_LINE = re.compile(r"^\s*(import\s+[\w.]+|from\s+[\w.]+\s+import\s)", re.MULTILINE)
ABSOLUTE_PATHS = ("/work", "/home", "/root", "C:\\", "/tmp/", "/Users/")


def _read(path: Path):
    return nbformat.read(path, as_version=4)


def _code_cells(nb):
    return [cell for cell in nb.cells if cell.cell_type == "code"]


# -- structure (fast) ------------------------------------------------------------------
def test_the_series_is_complete():
    assert [p.stem for p in notebook_paths()] == EXPECTED


@pytest.mark.parametrize("path", NOTEBOOKS, ids=EXPECTED)
def test_notebook_structure(path):
    nb = _read(path)
    nbformat.validate(nb)
    ids = [cell.get("id") for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]]
    assert all(ids) and len(set(ids)) == len(ids), "every stored cell has its own id (nbformat 4.5)"
    assert nb.cells[0].cell_type == "markdown", "a notebook opens with a markdown cell"
    opening = nb.cells[0].source
    assert "What you will learn" in opening and "What it costs" in opening and "Helpers used" in opening
    code = _code_cells(nb)
    assert code, "no code cells"
    assert IMPORT_LINE.search(code[0].source), "the first code cell holds the imports"
    for cell in code[1:]:
        stray = IMPORT_LINE.search(cell.source)
        assert stray is None, f"import outside the first code cell: {stray.group(0)!r} in\n{cell.source[:200]}"
    for cell in code:
        assert cell.get("outputs") == [], "notebooks are stored with outputs cleared"
        assert cell.get("execution_count") is None, "notebooks are stored with execution_count null"
        assert not re.search(r"^\s*[!%]\s*pip\s+install", cell.source, re.MULTILINE), "no pip install in notebooks"
    for cell in nb.cells:
        for marker in ABSOLUTE_PATHS:
            assert marker not in cell.source, f"absolute path {marker!r} in a cell"
    assert nb.cells[-1].cell_type == "markdown" and "Try this" in nb.cells[-1].source
    assert any(f'NOTEBOOK = "{path.stem}"' in cell.source for cell in code), \
        "each notebook names itself (its own Milvus Lite directory)"


def _resolve(dotted: str):
    """The module, class or function a dotted ``helpers...`` name points to (AssertionError if none)."""
    parts = dotted.split(".")
    for size in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:size]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[size:]:
            assert hasattr(target, attribute), f"{dotted}: no {attribute!r}"
            target = getattr(target, attribute)
        return target
    raise AssertionError(f"{dotted} does not exist")


def stated_fast_minutes(path: Path) -> tuple[float, float]:
    """The fast-mode time a notebook's "What it costs" states first ("about 2 minutes", "about 1 to 1.5 minutes")."""
    costs = _read(path).cells[0].source.split("What it costs", 1)[1].split("Helpers used", 1)[0]
    found = FAST_COST.search(costs)
    assert found, f"{path.stem}: 'What it costs' states no fast-mode time as 'about N minutes'"
    low = float(found.group(1))
    return low, float(found.group(2) or low)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=EXPECTED)
def test_every_notebook_states_its_fast_mode_cost(path):
    low, high = stated_fast_minutes(path)
    assert 0 < low <= high < 30


def test_every_prompt_has_an_editor_in_a_notebook():
    """Each shipped prompt is listed by a notebook's prompt browser or opened by its prompt editor (notebook 08
    browses every agent prompt by prefix), so a learner can edit it where its step is taught."""
    names, found = set(prompt_names()), set()
    for path in NOTEBOOKS:
        code = "\n".join(cell.source for cell in _code_cells(_read(path)))
        for listed in re.findall(r"prompt_browser\(\[(.*?)\]", code, re.DOTALL):
            found |= set(re.findall(r'"([a-z_]+)"', listed))
        for call in re.findall(r"prompt_editor\((.*)", code):
            found |= set(re.findall(r'(?:name=|get_prompt\()"([a-z_]+)"', call))
        if 'prompt_names() if name.startswith("agent_")' in code:
            found |= {name for name in names if name.startswith("agent_")}
    assert not names - found, f"prompts no notebook lets a learner edit: {sorted(names - found)}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=EXPECTED)
def test_helpers_used_name_things_that_exist(path):
    opening = _read(path).cells[0].source
    listed = opening.split("Helpers used", 1)[1]
    named = re.findall(r"`(helpers(?:\.\w+)+)`(?:\s*\(([^)]*)\))?", listed)
    assert named, "the opening cell names the helpers it uses"
    for dotted, members in named:
        target = _resolve(dotted)
        for member in re.findall(r"`([\w.]+)`", members):
            obj = target
            for part in member.split("."):
                assert hasattr(obj, part), f"{path.stem}: {dotted} has no {member!r}"
                obj = getattr(obj, part)


def test_notebook_config_gives_each_notebook_its_own_database(monkeypatch):
    for var in ("MILVUS_URI", "DSL_MILVUS_URI", DB_DIR_ENV):
        monkeypatch.delenv(var, raising=False)
    first, second = notebook_config("03_routing"), notebook_config("04_retrieval_and_relevance")
    assert Path(first.vector_db.uri) == PROJECT_ROOT / "outputs" / "milvus" / "03_routing.db"
    assert first.vector_db.uri != second.vector_db.uri
    tuned = notebook_config("03_routing", {"llm.temperature": 0.9}, search__top_k=2)
    assert (tuned.llm.temperature, tuned.search.top_k) == (0.9, 2)
    monkeypatch.setenv("DSL_FAST", "1")
    assert notebook_config("03_routing").llm.model == "qwen2.5-coder-0.5b"
    monkeypatch.setenv("DSL_MILVUS_URI", "data/milvus/shared.db")  # an explicit choice wins
    assert notebook_config("03_routing").vector_db.uri == "data/milvus/shared.db"
    monkeypatch.delenv("DSL_MILVUS_URI")
    monkeypatch.setenv(DB_DIR_ENV, "outputs/elsewhere")
    assert milvus_path("x") == PROJECT_ROOT / "outputs" / "elsewhere" / "x.db"


def test_run_buttons_run_their_callback_and_report_errors():
    """What the headless runs rely on: a click runs the callback with the widget's values, the button is
    disabled while it runs (no queued second run), and ``press_all`` returns the errors shown."""
    import ipywidgets as widgets

    from helpers.lab import display

    seen = []
    editor = display.prompt_editor("Question: {question}", lambda text: seen.append((text, button.disabled)))
    button = editor.children[1].children[0]
    editor.children[0].value = "edited {question}"
    button.click()
    assert seen == [("edited {question}", True)] and not button.disabled

    def broken(depth):
        raise ValueError(f"no such depth {depth}")

    display.run_panel(broken, {"depth": widgets.IntSlider(value=3)})
    errors = display.press_all()
    assert len(seen) == 2 and len(errors) == 1 and "ValueError: no such depth 3" in errors[0]


def test_a_saved_prompt_reaches_the_lab_prompt_set(monkeypatch, tmp_path, capsys):
    """Notebook 05's Save button: the edited text joins the prompts saved before, in the file that
    notebook 07 (``lab_prompts``) and the CLI's ``--prompts`` read."""
    from helpers.lab import display

    monkeypatch.setenv(PROMPTS_ENV, str(tmp_path / "lab.json"))
    assert prompts_file() == tmp_path / "lab.json" and lab_prompts().edited == {}
    save_prompt("decompose", "Split $question into $max_subqueries parts ($topics).")
    editor = display.prompt_editor(get_prompt("reflect"), lambda text: None, save=lambda t: save_prompt("reflect", t))
    editor.children[0].value = "Find what is missing for $question: $subqueries $findings"
    save_button = editor.children[1].children[1]
    assert save_button.description == "Save prompt"
    save_button.click()
    assert lab_prompts().edited == {"decompose": "Split $question into $max_subqueries parts ($topics).",
                                    "reflect": "Find what is missing for $question: $subqueries $findings"}
    assert lab_prompts().version("reflect") != prompt_version("reflect")

    browser = display.prompt_browser(["chain_read", "reflect"])   # every prompt of a step, e.g. in notebook 10
    choice, text = browser.children[0], browser.children[1]
    save, differences, forget, shipped = browser.children[2].children
    choice.value = "reflect"
    assert text.value == "Find what is missing for $question: $subqueries $findings"      # the saved edit, not the shipped file
    assert "+Find what is missing for $question: $subqueries $findings" in display.prompt_diff("reflect", text.value)
    differences.click()
    assert "reflect (shipped)" in capsys.readouterr().out          # printed into the output area in a notebook
    shipped.click()
    assert text.value == get_prompt("reflect") and "the same as the shipped text" in display.prompt_diff(
        "reflect", text.value)
    choice.value = "chain_read"
    text.value = "Read $passages again for $step."
    save.click()
    assert lab_prompts().edited["chain_read"] == "Read $passages again for $step." and len(lab_prompts().edited) == 3
    forget.click()                                                   # the saved chain_read edit goes
    assert "chain_read" not in lab_prompts().edited and len(lab_prompts().edited) == 2

    named = display.prompt_editor(None, lambda text: None, name="decompose")  # an editor that knows its prompt
    assert named.children[0].value == "Split $question into $max_subqueries parts ($topics)."   # starts from the lab's saved edit
    named.children[0].value = "Split $question in two ($max_subqueries, $topics)."
    named.children[1].children[1].click()
    assert lab_prompts().edited["decompose"] == "Split $question in two ($max_subqueries, $topics)."
    named.children[0].value = "Split $question."                      # placeholders left out: said, not saved
    named.children[1].children[1].click()
    assert lab_prompts().edited["decompose"] == "Split $question in two ($max_subqueries, $topics)."


def test_every_recorded_call_is_counted_for_the_cost_check():
    from helpers.models.usage import CallRecord, UsageLedger, calls_in_process

    before = calls_in_process()
    UsageLedger().add(CallRecord("reflect", "scripted", "script", 10, 2, 0.1))
    assert calls_in_process() == before + 1


@pytest.mark.parametrize("mode", ["fast", "full"])
def test_no_rendered_page_is_older_than_its_notebook(mode):
    folder = NOTEBOOK_DIR / "rendered" / mode
    stale = stale_pages(folder)
    assert not stale, (f"notebooks/rendered/{mode}: {stale} changed since their page was rendered; run "
                       f"python -m helpers notebooks --render{' --fast' if mode == 'fast' else ''} on them")
    pages = json.loads((folder / "index.json").read_text()) if (folder / "index.json").exists() else {}
    assert all((folder / f"{name}.html").exists() and page["run"] == "ok" for name, page in pages.items())


def test_the_fast_rendering_covers_the_series_at_the_cost_each_notebook_states():
    pages = json.loads((NOTEBOOK_DIR / "rendered" / "fast" / "index.json").read_text())
    assert sorted(pages) == EXPECTED
    for path in NOTEBOOKS:  # the page's run is the one its "What it costs" line describes
        low, high = stated_fast_minutes(path)
        minutes = pages[path.stem]["seconds"] / 60
        assert low / (2 * COST_FACTOR) <= minutes <= high * COST_FACTOR, \
            f"{path.stem}: its page ran {minutes:.1f} minutes; its 'What it costs' says about {low:g}-{high:g}"


def test_the_mode_cell_sets_the_mode_and_says_what_it_costs(monkeypatch):
    from helpers.errors import InputError
    from helpers.lab.notebooks import choose_mode, fast_mode
    monkeypatch.setenv("DSL_FAST", "1")
    assert choose_mode("01_knowledge_base").startswith("FAST mode") and fast_mode()
    said = choose_mode("01_knowledge_base", "full")
    assert said.startswith("FULL mode") and not fast_mode()
    assert "min on" in choose_mode("01_knowledge_base", "fast")          # the fast page's measured time
    with pytest.raises(InputError, match="MODE must be"):
        choose_mode("01_knowledge_base", "quick")


def test_a_page_records_its_notebooks_cells_not_its_outputs(tmp_path):
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(1)")])
    path = tmp_path / "a.ipynb"
    nbformat.write(notebook, path)
    before = cells_hash(path)
    notebook.cells[0].outputs = [nbformat.v4.new_output("stream", text="1\n")]
    nbformat.write(notebook, path)
    assert cells_hash(path) == before
    notebook.cells[0].source = "print(2)"
    nbformat.write(notebook, path)
    assert cells_hash(path) != before


def test_each_step_is_heard_as_it_ends():
    """What ``stream_steps`` and widget runs print: one line per traced step, only inside the block."""
    from helpers.lab.display import step_line
    from helpers.results import on_each_step, traced

    heard, trace = [], []
    with on_each_step(lambda step: heard.append(step.step)):
        with traced(trace, None, "retrieve"):
            pass
        with traced(trace, None, "reflect", iteration=2) as entry:
            entry.notes.append("no gaps: the loop ends")
    with traced(trace, None, "synthesize"):
        pass
    assert heard == ["retrieve", "reflect"]
    assert step_line(trace[1]) == "[round 2] no gap found: the search stops · 0 call(s), 0+0 tokens, 0.0 s"
    with traced(trace, None, "search", iteration=1) as entry:   # a step the log does not describe
        entry.notes.append("pages found by title: Springfield")
    assert step_line(trace[3]) == "search #1: pages found by title: Springfield · 0 call(s), 0+0 tokens, 0.0 s"


def test_citation_helpers():
    sources = ["a", "b", "c"]
    check = check_citations("Born in 1989 [1]. Moved in 2009 [3][5]. Nothing here.", sources)
    assert check == {"citations": 3, "valid": [1, 3], "dangling": [5], "uncited": [2]}
    assert renumber_citations("x [1] y [2][3]", 4) == "x [5] y [6][7]"


def test_the_kernel_runs_this_interpreter():
    from jupyter_client.kernelspec import KernelSpecManager

    name = venv_kernel_name()
    argv0 = KernelSpecManager().get_kernel_spec(name).argv[0]
    assert argv0 in ("python", "python3") or Path(argv0).resolve() == Path(sys.executable).resolve()


# -- execution (slow) --------------------------------------------------------------------
@pytest.fixture(scope="session")
def fast_kernel(tmp_path_factory):
    """Kernel name and environment: fast mode, offline, notebook databases and the lab's prompt file in fresh
    folders for this session (notebook 05's Save button writes it, notebook 07 then loads it)."""
    env = kernel_env(fast=True, extra={DB_DIR_ENV: str(tmp_path_factory.mktemp("notebook_milvus")),
                                       PROMPTS_ENV: str(tmp_path_factory.mktemp("lab_prompts") / "lab_prompts.json")})
    for var in ("DSL_PROVIDER", "DSL_MODEL", "OLLAMA_HOST", "OPENAI_BASE_URL", "MILVUS_URI", "DSL_MILVUS_URI"):
        env.pop(var, None)
    # llama.cpp uses every core (pytest only waits while a notebook runs).  On a machine shared with other
    # busy work, set DSL_THREADS=1: spinning llama.cpp threads then wait on each other (91 s instead of 12 s).
    return venv_kernel_name(), env


def time_limit_s(path: Path) -> int:
    """Seconds a fast-mode run of a notebook may take before its test stops it: COST_FACTOR times the most
    minutes its cost line states, and never under twice TIMEOUT_S."""
    return int(max(2 * TIMEOUT_S, stated_fast_minutes(path)[1] * 60 * COST_FACTOR))


@pytest.mark.slow
@pytest.mark.parametrize("path", [pytest.param(path, id=path.stem, marks=pytest.mark.timeout(time_limit_s(path)))
                                  for path in NOTEBOOKS])
def test_notebook_executes_in_fast_mode(path, fast_kernel, tmp_path):
    """Every cell runs without error, then every Run button of its widgets is pressed once (headless),
    and the model calls agree with its "What it costs" line.  Its time is compared with the line too,
    but only warned about (the CPU sets it; timing goals live in bench/); the test's timeout bounds it."""
    kernel, env = fast_kernel
    run = execute_notebook(path, tmp_path, timeout=max(TIMEOUT_S, time_limit_s(path) // 2), env=env,
                           kernel_name=kernel, html_export=True, press_buttons=True)
    print(f"{run.name}: {run.seconds:.0f} s, {run.calls} model calls")
    assert run.ok, run.error
    low, high = stated_fast_minutes(path)
    if not low * 60 / (2 * COST_FACTOR) <= run.seconds <= high * 60 * COST_FACTOR:  # the CPU sets the time
        warnings.warn(f"{run.name} ran {run.seconds:.0f} s; its 'What it costs' says about {low:g}-{high:g} "
                      "minutes in fast mode: restate the line if this machine is typical")
    stated_calls = FAST_CALLS.search(_read(path).cells[0].source.split("What it costs", 1)[1].split(";")[0])
    if stated_calls:  # the model's replies vary, so within a factor of two
        calls = int(stated_calls.group(1))
        assert calls / 2 <= run.calls <= calls * 2, \
            f"{run.name} made {run.calls} model calls; its 'What it costs' says {calls} in fast mode"
    executed = _read(run.executed)
    errors = [o for cell in _code_cells(executed) for o in cell.outputs if o.output_type == "error"]
    assert not errors
    assert all(cell.execution_count for cell in _code_cells(executed)), "every code cell ran"
    assert run.html.stat().st_size > 10_000


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_render_in_parts_keeps_the_pages_it_did_not_remake(tmp_path):
    """Each page is written as its notebook finishes, and the index keeps the pages of an earlier render
    (a slow machine renders the full series in parts)."""
    from helpers.lab.execution import render_notebooks
    notebook = tmp_path / "99_tiny.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")]), notebook)
    out = tmp_path / "rendered"
    out.mkdir()
    (out / "index.json").write_text(json.dumps({"00_setup": {"run": "ok", "seconds": 9, "commit": "abc1234"}}))
    runs = render_notebooks(out, fast=True, timeout=120, paths=[notebook])
    assert [run.ok for run in runs] == [True] and "42" in (out / "99_tiny.html").read_text()
    pages = json.loads((out / "index.json").read_text())
    assert sorted(pages) == ["00_setup", "99_tiny"] and pages["00_setup"]["commit"] == "abc1234"
    assert pages["99_tiny"]["run"] == "ok" and pages["99_tiny"]["mode"].startswith("fast")
    index = (out / "index.html").read_text()
    assert "<a href='00_setup.html'>" in index and "abc1234" in index and "<a href='99_tiny.html'>" in index


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_a_series_and_its_kernel(tmp_path, signum):
    """nbclient answers SIGTERM / Ctrl-C by shutting the kernel down; the series then went on with the next
    notebook.  Now `notebooks` stops, says so, and no later notebook runs."""
    first, second = tmp_path / "01_sleeps.ipynb", tmp_path / "02_writes.ipynb"
    flag = tmp_path / "flag.txt"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        f"import pathlib, time\npathlib.Path({str(tmp_path / 'started')!r}).touch()\ntime.sleep(120)")]), first)
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        f"import pathlib\npathlib.Path({str(flag)!r}).write_text('ran')")]), second)
    process = subprocess.Popen([sys.executable, "-m", "helpers", "notebooks", str(first), str(second),
                                "--out", str(tmp_path / "out")], cwd=PROJECT_ROOT, env=kernel_env(fast=True),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 180
    while not (tmp_path / "started").exists() and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.5)
    assert (tmp_path / "started").exists(), "the first notebook never started"
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=90)
    assert process.returncode == 130 and "stopped" in stderr
    assert not flag.exists(), "a notebook after the signal still ran"


# -- JupyterLab (fast) ----------------------------------------------------------------------

def _get_json(url: str):
    with urllib.request.urlopen(url, timeout=5) as reply:
        return json.loads(reply.read())


@pytest.mark.timeout(180)
def test_jupyterlab_serves_the_notebooks(tmp_path):
    port, token = free_port(), secrets.token_hex(16)
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"), "JUPYTER_CONFIG_DIR": str(tmp_path / "config")}
    command = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
               f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={PROJECT_ROOT}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # containers and CI run as root; JupyterLab refuses without this
        command.append("--allow-root")
    log = tmp_path / "server.log"
    with open(log, "w") as stream:
        server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stream, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_url(f"{base}/api/contents/notebooks?token={token}", 120, server, log)
        listing = _get_json(f"{base}/api/contents/notebooks?token={token}")
        names = {item["name"] for item in listing["content"]}
        assert {f"{name}.ipynb" for name in EXPECTED} <= names
        model = _get_json(f"{base}/api/contents/notebooks/{EXPECTED[0]}.ipynb?token={token}&content=1")
        assert model["type"] == "notebook" and model["content"]["cells"][0]["cell_type"] == "markdown"
        with urllib.request.urlopen(f"{base}/lab?token={token}", timeout=10) as page:
            assert page.status == 200 and b"JupyterLab" in page.read()
        with pytest.raises(urllib.error.HTTPError):  # the token is required
            _get_json(f"{base}/api/contents/notebooks")
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
