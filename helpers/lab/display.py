"""What notebooks show: HTML tables, a trace step as HTML, small analysis glue (PCA,
confusion matrix, citation checks) and widgets that never block headless execution
(they only do work when a button is pressed)."""
from __future__ import annotations

import difflib
import html
import traceback
from typing import Any, Callable, Iterable

from helpers.errors import DeepSearchLabError
from helpers.lab.workspace import forget_prompt, lab_prompts, save_prompt
from helpers.prompts import check_prompt, get_prompt
from helpers.results import CITATION, on_each_step
from helpers.strategies.run_log import step_log


# -- tables -------------------------------------------------------------------------------
def _cell(value: Any, digits: int) -> str:
    if isinstance(value, float):
        value = f"{value:.{digits}f}"
    elif isinstance(value, (list, tuple, set)):
        value = ", ".join(map(str, value))
    return html.escape(str(value)).replace("\n", "<br>")


def table_html(rows: Iterable[dict], columns: list[str] | None = None, digits: int = 2, title: str | None = None):
    """A list of dicts as an HTML table (no pandas needed)."""
    from IPython.display import HTML

    rows = list(rows)
    columns = columns or list(dict.fromkeys(key for row in rows for key in row))
    head = "".join(f"<th style='text-align:left'>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td style='text-align:left;vertical-align:top'>{_cell(row.get(c, ''), digits)}</td>"
                                    for c in columns) + "</tr>" for row in rows)
    caption = f"<caption style='text-align:left'><b>{html.escape(title)}</b></caption>" if title else ""
    return HTML(f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def usage_table(ledger, title: str | None = None):
    """The per-step usage of a ledger (calls, tokens, seconds) as an HTML table."""
    return table_html(ledger.by_step(), ["step", "calls", "prompt_tokens", "completion_tokens", "seconds"],
                      digits=1, title=title)


# -- small analysis glue ------------------------------------------------------------------
def project_2d(vectors) -> "Any":
    """PCA to two dimensions with numpy's SVD (rows are points)."""
    import numpy as np

    matrix = np.asarray(vectors, dtype=np.float64)
    centred = matrix - matrix.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    return centred @ vt[:2].T


def confusion_matrix(pairs: Iterable[tuple[str, str]], labels: list[str]):
    """Counts of (true, predicted) pairs as a len(labels) x len(labels) array."""
    import numpy as np

    index = {label: i for i, label in enumerate(labels)}
    matrix = np.zeros((len(labels), len(labels)), dtype=int)
    for true, predicted in pairs:
        matrix[index[true], index[predicted]] += 1
    return matrix


def check_citations(answer: str, sources: list) -> dict:
    """Which ``[n]`` in ``answer`` point to one of ``sources`` (numbered from 1), which point nowhere,
    and which sources were never cited."""
    numbers = [int(n) for n in CITATION.findall(answer)]
    valid = sorted({n for n in numbers if 1 <= n <= len(sources)})
    return {"citations": len(numbers), "valid": valid,
            "dangling": sorted({n for n in numbers if not 1 <= n <= len(sources)}),
            "uncited": [n for n in range(1, len(sources) + 1) if n not in valid]}


def renumber_citations(text: str, offset: int) -> str:
    """Shift every ``[n]`` by ``offset`` (to concatenate answers that each numbered from 1)."""
    return CITATION.sub(lambda m: f"[{int(m.group(1)) + offset}]", text)


# -- trace display --------------------------------------------------------------------------
def _pre(text: str, limit: int = 4000) -> str:
    text = text if len(text) <= limit else text[:limit] + f"\n… ({len(text) - limit} more characters)"
    return f"<pre style='white-space:pre-wrap;max-height:22em;overflow:auto'>{html.escape(text)}</pre>"


def format_step(step, number: int | None = None, total: int | None = None) -> str:
    """One ``TraceStep`` as HTML: step, inputs, prompt, raw reply, parsed output, kept/dropped, notes."""
    import json

    position = f"{number} / {total}: " if number is not None else ""
    parts = [f"<h4>{position}{html.escape(step.step)} (iteration {step.iteration}) — {step.calls} call(s), "
             f"{step.prompt_tokens} prompt + {step.completion_tokens} completion tokens, {step.seconds:.1f} s</h4>"]
    if step.inputs:
        parts.append("<b>inputs</b>" + _pre(json.dumps(step.inputs, indent=1, ensure_ascii=False, default=str), 1500))
    if step.messages:
        prompt = "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in step.messages)
        parts.append("<b>prompt</b>" + _pre(prompt))
    if step.raw is not None:
        parts.append("<b>raw reply</b>" + _pre(step.raw or "(empty)"))
    if step.parsed is not None:
        parsed = step.parsed if isinstance(step.parsed, str) else json.dumps(step.parsed, indent=1,
                                                                                 ensure_ascii=False, default=str)
        parts.append("<b>parsed output</b>" + _pre(parsed, 2500))
    if step.kept or step.dropped:
        rows = [f"kept    {h.get('score', 0):.3f}  {h.get('collection', '')}  {h.get('section', '')}"
                for h in step.kept]
        rows += [f"dropped {h.get('score', 0):.3f}  {h.get('collection', '')}  {h.get('section', '')}"
                 for h in step.dropped]
        parts.append("<b>chunks</b>" + _pre("\n".join(rows), 2500))
    if step.notes:
        parts.append("<b>notes</b><ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in step.notes) + "</ul>")
    return "\n".join(parts)


# -- widgets ----------------------------------------------------------------------------------
_PANELS: list[Callable[[], str | None]] = []  # each Run button's action, in the order they were made


def step_line(step) -> str:
    """One line for a finished step: what it did (``step_log``), or its name and first note; then
    its calls, tokens and seconds."""
    where = f" #{step.iteration}" if step.iteration else ""
    what = step_log(step) or f"{step.step}{where}" + (f": {step.notes[0][:100]}" if step.notes else "")
    return f"{what} · {step.calls} call(s), {step.prompt_tokens}+{step.completion_tokens} tokens, {step.seconds:.1f} s"


def stream_steps():
    """``with stream_steps(): run_pipeline(...)`` prints one line per step as it ends, so a long cell
    shows its progress (widget runs do this by themselves)."""
    return on_each_step(lambda step: print(step_line(step), flush=True))


def _run_into(output, button, run: Callable[..., Any], *args: Any, **kwargs: Any) -> str | None:
    """Call ``run`` into ``output`` with ``button`` disabled meanwhile (a second click cannot queue
    another run), printing one line per step as it ends; an exception is shown where the reader
    looks and returned as text."""
    from IPython.display import display

    button.disabled = True
    with output:
        output.clear_output()
        try:
            with stream_steps():
                value = run(*args, **kwargs)
            if value is not None:
                display(value)
            return None
        except DeepSearchLabError as exc:  # a refused input: its message says what to do
            print(f"error: {exc}")
            return str(exc)
        except Exception:  # show the error where the reader looks, not in the kernel log
            error = traceback.format_exc()
            print(error)
            return error
        finally:
            button.disabled = False


def _run_button(label: str, action: Callable[[Any], str | None]):
    """A Run button whose click calls ``action(button)``; the action is also registered for ``press_all``."""
    import ipywidgets as widgets

    button = widgets.Button(description=label, button_style="primary", icon="play")
    button.on_click(action)
    _PANELS.append(lambda: action(button))
    return button


def press_all() -> list[str]:
    """Press every Run button made so far in this kernel, once, in order; return the errors they showed.

    The headless notebook tests call it after the last cell, so every widget callback is exercised."""
    return [error for press in list(_PANELS) if (error := press())]


def _checked(name: str, run: Callable[[str], Any]) -> Callable[[str], Any]:
    """``run(text)`` once ``text`` passes ``check_prompt`` as prompt ``name``: a bad edit is named before any call."""
    def checked(text: str) -> Any:
        check_prompt(name, text)
        return run(text)
    return checked


def prompt_editor(template: str | None, run: Callable[[str], Any], *, label: str = "Run", rows: int = 14,
                  save: Callable[[str], Any] | None = None, name: str | None = None):
    """A text area holding a prompt, a Run button that calls ``run(text)``, a Reset button and an output area;
    with ``save``, a Save button that calls ``save(text)``.  With the prompt's ``name``, the text starts as the
    lab's saved edit of it (when ``template`` is None) and Save adds the edit to the lab's prompt file
    (``save_prompt``), which every run that takes the lab's prompts then uses.

    Nothing runs until a button is pressed, so executing the notebook headless never waits on it.
    """
    import ipywidgets as widgets

    if name is not None:
        template = template if template is not None else lab_prompts().template(name) or get_prompt(name)
        save = save or (lambda text: save_prompt(name, text))
        run = _checked(name, run)
    if template is None:
        raise ValueError("prompt_editor needs a template or a prompt name")

    editor = widgets.Textarea(value=template, layout=widgets.Layout(width="100%", height=f"{rows * 1.4:.0f}em"))
    output = widgets.Output()
    buttons = [_run_button(label, lambda button: _run_into(output, button, run, editor.value))]
    if save is not None:
        buttons.append(_run_button("Save prompt", lambda button: _run_into(output, button, save, editor.value)))
    reset_button = widgets.Button(description="Reset prompt", icon="undo")

    def reset(_):
        editor.value = template

    reset_button.on_click(reset)
    return widgets.VBox([editor, widgets.HBox([*buttons, reset_button]), output])


def prompt_browser(names: list[str], *, rows: int = 14):
    """Every prompt of a step, viewable and editable: a dropdown of prompt ``names``, the chosen one's text
    (the lab's saved edit, else the shipped file), a Save button that adds the edit to the lab's prompt
    file (which the notebooks' runs load and ``python -m helpers demo|query|eval --prompts`` reads), its
    differences from the shipped text, and buttons that forget the saved edit or restore the shipped text."""
    import ipywidgets as widgets

    def text_of(name: str) -> str:
        return lab_prompts().template(name) or get_prompt(name)

    choice = widgets.Dropdown(options=names, value=names[0], description="prompt")
    editor = widgets.Textarea(value=text_of(names[0]),
                              layout=widgets.Layout(width="100%", height=f"{rows * 1.4:.0f}em"))
    output = widgets.Output()
    choice.observe(lambda change: setattr(editor, "value", text_of(change["new"])), names="value")
    save = _run_button("Save prompt", lambda button: _run_into(
        output, button, lambda: save_prompt(choice.value, editor.value)))
    differences = _run_button("Differences", lambda button: _run_into(
        output, button, lambda: print(prompt_diff(choice.value, editor.value))))
    forget = _run_button("Forget saved edit", lambda button: _run_into(
        output, button, lambda: forget_prompt(choice.value)))
    reset = widgets.Button(description="Shipped text", icon="undo")
    reset.on_click(lambda _: setattr(editor, "value", get_prompt(choice.value)))
    return widgets.VBox([choice, editor, widgets.HBox([save, differences, forget, reset]), output])


def prompt_diff(name: str, text: str) -> str:
    """The lines ``text`` changes in the shipped prompt ``name`` (a unified diff), or that it changes none."""
    lines = difflib.unified_diff(get_prompt(name).splitlines(), text.splitlines(), f"{name} (shipped)",
                                 f"{name} (this text)", lineterm="")
    return "\n".join(lines) or f"{name}: the same as the shipped text"


def run_panel(run: Callable[..., Any], controls: dict[str, Any], *, label: str = "Run"):
    """Controls (sliders, dropdowns, ...) plus a Run button that calls ``run(**values)`` into an output area."""
    import ipywidgets as widgets

    output = widgets.Output()
    button = _run_button(label, lambda button: _run_into(
        output, button, run, **{name: w.value for name, w in controls.items()}))
    return widgets.VBox([*controls.values(), button, output])


def trace_viewer(trace: list):
    """Page through a run's trace one step at a time (slider or Previous/Next)."""
    import ipywidgets as widgets

    if not trace:
        return widgets.HTML("<i>empty trace</i>")
    slider = widgets.IntSlider(value=1, min=1, max=len(trace), description="step")
    back = widgets.Button(description="Previous", icon="arrow-left")
    forward = widgets.Button(description="Next", icon="arrow-right")
    view = widgets.HTML()

    def show(change=None):
        view.value = format_step(trace[slider.value - 1], slider.value, len(trace))

    slider.observe(show, names="value")
    back.on_click(lambda _: setattr(slider, "value", max(1, slider.value - 1)))
    forward.on_click(lambda _: setattr(slider, "value", min(len(trace), slider.value + 1)))
    show()
    return widgets.VBox([widgets.HBox([back, slider, forward]), view])
