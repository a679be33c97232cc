"""Turn a model's reply into validated data, or say precisely why not.

Small models wrap JSON in code fences, prepend prose, think aloud in
``<think>`` blocks, stop mid-object, or use slightly wrong keys.  The functions
here clean, extract, repair and validate.  They never evaluate model text as
code: parsing is ``json.loads`` and, failing that, ``json_repair``.
"""
from __future__ import annotations

import json
import re
from typing import Any, TypeVar

import json_repair
from pydantic import BaseModel, ValidationError

T = TypeVar("T", bound=BaseModel)

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)(?:```|$)", re.DOTALL)


class ReplyParseError(ValueError):
    """The reply holds no usable JSON, or the JSON does not fit the schema."""


def strip_reasoning(text: str) -> str:
    """Drop ``<think>…</think>`` blocks; an unclosed ``<think>`` hides everything after it."""
    text = _THINK_BLOCK.sub("", text)
    lowered = text.lower()
    if "<think>" in lowered:
        text = text[: lowered.index("<think>")]
    return text.strip()


def _balanced_span(text: str, start: int) -> str:
    """The JSON value that starts at ``start``, up to its matching bracket (or the end if cut off)."""
    closing = {"{": "}", "[": "]"}
    stack: list[str] = []
    in_string = escaped = False
    for index in range(start, len(text)):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in closing:
            stack.append(closing[char])
        elif stack and char == stack[-1]:
            stack.pop()
            if not stack:
                return text[start : index + 1]
    return text[start:]


def extract_json_text(reply: str) -> str:
    """The most likely JSON text inside a reply: fences removed, surrounding prose cut."""
    text = strip_reasoning(reply)
    fenced = _FENCE.search(text)
    if fenced and fenced.group(1).strip():
        text = fenced.group(1)
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if not starts:
        raise ReplyParseError(f"no JSON object or list in the reply: {reply[:120]!r}")
    return _balanced_span(text, min(starts))


def parse_json(reply: str) -> Any:
    """Parse the JSON inside a reply, repairing truncation and small syntax slips."""
    candidate = extract_json_text(reply)
    try:
        return json.loads(candidate)
    except json.JSONDecodeError:
        repaired = json_repair.loads(candidate)
    if repaired in ("", None) or (isinstance(repaired, (dict, list)) and not repaired and len(candidate) > 2):
        raise ReplyParseError(f"reply is not repairable JSON: {candidate[:120]!r}")
    return repaired


def _fit_shape(data: Any, schema: type[BaseModel]) -> Any:
    """Small, safe reshapes: a bare list for a one-list model, keys that differ in case/spacing."""
    fields = schema.model_fields
    if isinstance(data, list):
        list_fields = [name for name, f in fields.items() if getattr(f.annotation, "__origin__", None) is list]
        if len(fields) == 1 and list_fields:
            return {list_fields[0]: data}
        return data
    if isinstance(data, dict):
        canonical = {name.lower().replace("_", ""): name for name in fields}
        fitted = {}
        for key, value in data.items():
            normal = str(key).strip().lower().replace("_", "").replace(" ", "").replace("-", "")
            fitted[canonical.get(normal, key)] = value
        return fitted
    return data


def parse_reply(reply: str, schema: type[T]) -> T:
    """Parse and validate one reply against a pydantic model, or raise ``ReplyParseError``."""
    data = _fit_shape(parse_json(reply), schema)
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'reply'}: {e['msg']}" for e in exc.errors())
        raise ReplyParseError(f"reply does not match the schema: {problems}") from exc


def schema_for_prompt(schema: type[BaseModel]) -> str:
    """A compact JSON Schema text to show the model what shape is expected."""
    return json.dumps(schema.model_json_schema(), separators=(",", ":"))
