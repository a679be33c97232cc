"""Every prompt lives as plain text in ``helpers/prompts/<name>.txt``.

Placeholders use ``$name`` (``string.Template``), so JSON examples inside a
prompt need no escaping.  A notebook can read a prompt, edit the text and pass
it back to a step through its ``template=`` argument, or carry a whole edited
set through a run with a ``PromptSet`` (``prompts=`` of every strategy and of the
evaluation; ``python -m helpers query|eval --prompts FILE``).  Each traced step
records the versions it used as ``name@hash`` (``prompt_version``).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from string import Template
from typing import Mapping

from helpers.errors import InputError
from helpers.files import write_atomically

PROMPT_DIR = Path(__file__).with_name("prompts")


def prompt_names() -> list[str]:
    return sorted(p.stem for p in PROMPT_DIR.glob("*.txt"))


def get_prompt(name: str) -> str:
    """The editable text of prompt ``name``."""
    path = PROMPT_DIR / f"{name}.txt"
    if not path.exists():
        raise KeyError(f"no prompt named '{name}'; known: {', '.join(prompt_names())}")
    return path.read_text()


def _line(text: str, position: int) -> int:
    return text.count("\n", 0, position) + 1


def placeholders(text: str) -> dict[str, int]:
    """The ``$name`` placeholders of ``text``, each with the line it first appears on."""
    found: dict[str, int] = {}
    for match in Template.pattern.finditer(text):
        key = match.group("named") or match.group("braced")
        if key:
            found.setdefault(key, _line(text, match.start()))
    return found


def check_prompt(name: str, text: str) -> None:
    """Refuse an edited text of prompt ``name`` that its step cannot fill as meant: a ``$`` that starts
    no placeholder, a placeholder the step does not fill, or one it fills (the shipped text's) left out.
    The ``InputError`` names the prompt, the line and the fix."""
    filled = placeholders(get_prompt(name))
    known = ", ".join(f"${key}" for key in filled) or "none"
    problems = [f"line {_line(text, m.start())}: {text[m.start():m.start() + 2]!r} starts no placeholder "
                "(write $$ for a dollar sign)"
                for m in Template.pattern.finditer(text) if m.group("invalid") is not None]
    used = placeholders(text)
    problems += [f"line {line}: ${key} is not filled by its step (it fills {known})"
                 for key, line in used.items() if key not in filled]
    missing = [f"${key}" for key in filled if key not in used]
    if missing:
        problems.append(f"{', '.join(missing)} left out, which its step fills with what the model must read: "
                        "put it back")
    if problems:
        raise InputError(f"edited prompt '{name}': {'; '.join(problems)}")


def render(name: str, template: str | None = None, **values: object) -> str:
    """Fill prompt ``name`` (or an edited ``template``) with ``values``; a bad or unfilled
    placeholder is an ``InputError`` naming the prompt and the line."""
    text = template if template is not None else get_prompt(name)
    try:
        return Template(text).substitute({key: str(value) for key, value in values.items()})
    except (KeyError, ValueError):
        if template is not None:
            check_prompt(name, text)  # an edit's fault: named, with its line and the fix
        raise


def prompt_version(name: str, template: str | None = None) -> str:
    """``name@hash``: which text of prompt ``name`` a step used (the hash of the text itself, so an
    edited prompt shows a different version than the shipped one)."""
    text = template if template is not None else get_prompt(name)
    return f"{name}@{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def fence(text: str, label: str = "DATA") -> str:
    """Wrap retrieved or user-supplied text so prompts can tell the model it is data, not instructions."""
    cleaned = text.replace(f"<<<{label}", "").replace(f"{label}>>>", "")
    return f"<<<{label}\n{cleaned.strip()}\n{label}>>>"


class PromptSet:
    """The prompts a run uses: the shipped files, with some replaced by edited texts.

    ``PromptSet({"reflect": my_text})`` changes one prompt; ``save``/``load`` keep the edits
    in a JSON file (``{name: text}``) that the CLI reads with ``--prompts FILE``."""

    def __init__(self, edited: Mapping[str, str] | None = None):
        edited = dict(edited or {})
        unknown = sorted(set(edited) - set(prompt_names()))
        if unknown:
            raise InputError(f"unknown prompt name(s) {', '.join(unknown)}; known: {', '.join(prompt_names())}")
        for name, text in edited.items():
            check_prompt(name, text)
        self.edited = edited
        self._used: list[str] = []  # names rendered since the last take_used()

    def template(self, name: str) -> str | None:
        """The edited text of ``name``, or None for the shipped one (what steps take as ``template=``)."""
        return self.edited.get(name)

    def text(self, name: str) -> str:
        self._used.append(name)
        return self.edited[name] if name in self.edited else get_prompt(name)

    def render(self, name: str, **values: object) -> str:
        self._used.append(name)
        return render(name, self.template(name), **values)

    def take_used(self) -> list[str]:
        """The versions of the prompts rendered since the last call (for the trace of the step
        about to send them), each once."""
        used, self._used = list(dict.fromkeys(self._used)), []
        return [self.version(name) for name in used]

    def version(self, name: str) -> str:
        return prompt_version(name, self.template(name))

    def versions(self) -> list[str]:
        """The versions (``name@hash``) of the prompts whose edited text differs from the shipped one, sorted:
        what sets this prompt set apart from the shipped prompts."""
        return sorted(self.version(name) for name, text in self.edited.items() if text != get_prompt(name))

    def save(self, path: str | Path) -> Path:
        """Write the edited prompts as JSON (``{name: text}``); returns the path."""
        return write_atomically(path, json.dumps(self.edited, indent=2, ensure_ascii=False) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> "PromptSet":
        path = Path(path)
        if not path.is_file():
            raise InputError(f"prompt file {path} does not exist (save one with PromptSet(...).save(path))")
        try:
            edited = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from exc
        if not isinstance(edited, dict) or not all(isinstance(v, str) for v in edited.values()):
            raise InputError(f"{path}: expected a JSON object of prompt name -> prompt text")
        try:
            return cls(edited)
        except InputError as exc:
            raise InputError(f"{path}: {exc}") from exc


def as_prompt_set(prompts: PromptSet | Mapping[str, str] | None) -> PromptSet:
    """``prompts`` as a ``PromptSet`` (a plain ``{name: text}`` mapping is accepted too)."""
    return prompts if isinstance(prompts, PromptSet) else PromptSet(prompts)
