"""Every prompt lives as plain text in ``helpers/prompts/<name>.txt``.

Placeholders use ``$name`` (``string.Template``), so JSON examples inside a
prompt need no escaping.  A notebook can read a prompt, edit the text and pass
it back to a step through its ``template=`` argument.
"""
from __future__ import annotations

from pathlib import Path
from string import Template

PROMPT_DIR = Path(__file__).with_name("prompts")


def prompt_names() -> list[str]:
    return sorted(p.stem for p in PROMPT_DIR.glob("*.txt"))


def get_prompt(name: str) -> str:
    """The editable text of prompt ``name``."""
    path = PROMPT_DIR / f"{name}.txt"
    if not path.exists():
        raise KeyError(f"no prompt named '{name}'; known: {', '.join(prompt_names())}")
    return path.read_text()


def render(name: str, template: str | None = None, **values: object) -> str:
    """Fill prompt ``name`` (or an edited ``template``) with ``values``; a missing value is an error."""
    return Template(template if template is not None else get_prompt(name)).substitute(
        {key: str(value) for key, value in values.items()})


def fence(text: str, label: str = "DATA") -> str:
    """Wrap retrieved or user-supplied text so prompts can tell the model it is data, not instructions."""
    cleaned = text.replace(f"<<<{label}", "").replace(f"{label}>>>", "")
    return f"<<<{label}\n{cleaned.strip()}\n{label}>>>"
