"""Read sources into documents: files (.md, .txt, .pdf, .html), JSON corpora of
``{"title", "text"}`` records, web pages and Wikipedia articles, and anything a
LangChain document loader reads (``load_with_langchain``).

Web sources need the internet; what was fetched is cached under
``data/cache/web`` so later runs work offline.  Every problem with one source
raises ``SourceError`` with the path and the reason, so an ingest of many files
can skip it and go on.
"""
from __future__ import annotations

import hashlib
import json
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from helpers.config import PROJECT_ROOT

FILE_TYPES = {".md", ".markdown", ".txt", ".pdf", ".html", ".htm", ".json"}
WEB_CACHE = PROJECT_ROOT / "data" / "cache" / "web"


class SourceError(Exception):
    """One source cannot be read; ``str()`` says which and why."""


@dataclass
class Document:
    text: str
    source: str
    title: str
    metadata: dict = field(default_factory=dict)


def _decode(path: Path, raw: bytes) -> str:
    if b"\x00" in raw[:4096]:
        raise SourceError(f"{path}: binary file (not text)")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourceError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc


def _title_from_markdown(text: str, fallback: str) -> str:
    for line in text.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return fallback


def _html_to_text(html: str) -> tuple[str, str]:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    for tag in soup(["script", "style", "nav", "footer", "header"]):
        tag.decompose()
    title = soup.title.get_text(strip=True) if soup.title else ""
    lines = [line.strip() for line in soup.get_text("\n").splitlines()]
    return "\n".join(line for line in lines if line), title


def load_json_corpus(path: Path, source: str | None = None) -> list[Document]:
    """A JSON list of ``{"title", "text"}`` records (the 2WikiMultiHopQA / HotpotQA corpus shape); each
    record's source is ``<path>#<title>``, so a folder's clean-up finds the records of its JSON files."""
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SourceError(f"{path}: not a readable JSON corpus ({exc})") from exc
    if not isinstance(records, list) or not all(isinstance(r, dict) and "text" in r for r in records):
        raise SourceError(f'{path}: a JSON corpus must be a list of {{"title", "text"}} objects')
    return [Document(str(r["text"]), source or f"{display_path(path)}#{r.get('title', i)}", str(r.get("title", i)),
                     {"corpus_record": True})
            for i, r in enumerate(records) if str(r["text"]).strip()]


def display_path(path: Path) -> str:
    """Paths inside the project are recorded relative to it (portable between clones)."""
    try:
        return str(path.resolve().relative_to(PROJECT_ROOT))
    except (ValueError, RuntimeError, OSError):  # outside the project, or a symbolic link that loops
        return str(path)


def load_file(path: Path, source: str | None = None) -> list[Document]:
    """One file as documents (a JSON corpus gives one document per record)."""
    source = source or display_path(path)
    if not path.exists():
        if path.is_symlink():
            raise SourceError(f"{path}: a symbolic link that loops or points nowhere; not read")
        raise SourceError(f"{path}: does not exist (check the path)")
    if not path.is_file():  # a named pipe would block the read forever; a device or socket is no document
        raise SourceError(f"{path}: not a regular file (a named pipe, device or socket); not read")
    suffix = path.suffix.lower()
    if suffix not in FILE_TYPES:
        raise SourceError(f"{path}: unsupported file type '{suffix}' (use {', '.join(sorted(FILE_TYPES))})")
    if suffix == ".json":
        return load_json_corpus(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SourceError(f"{path}: cannot be read ({exc.strerror})") from exc
    if suffix == ".pdf":
        from io import BytesIO

        from pypdf import PdfReader
        try:
            reader = PdfReader(BytesIO(raw))
            text = "\n".join(page.extract_text() or "" for page in reader.pages)
            title = (reader.metadata.title if reader.metadata else None) or path.stem
        except Exception as exc:  # pypdf raises many types for damaged files
            raise SourceError(f"{path}: not a readable PDF ({exc})") from exc
    elif suffix in (".html", ".htm"):
        text, title = _html_to_text(_decode(path, raw))
        title = title or path.stem
    else:
        text = _decode(path, raw)
        title = _title_from_markdown(text, path.stem.replace("_", " "))
    if not text.strip():
        raise SourceError(f"{path}: empty (no text)")
    return [Document(text, source, title, {"format": suffix.lstrip(".")})]


def fetch_url(url: str, timeout_s: float = 20.0) -> Path:
    """Download ``url`` once into the web cache and return the cached file."""
    WEB_CACHE.mkdir(parents=True, exist_ok=True)
    cached = WEB_CACHE / (hashlib.sha256(url.encode()).hexdigest()[:20] + ".html")
    if cached.exists():
        return cached
    request = urllib.request.Request(url, headers={"User-Agent": "deepsearch-lab/0.1 (teaching project)"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            cached.write_bytes(response.read())
    except OSError as exc:
        raise SourceError(f"{url}: cannot be fetched ({exc}). This needs the internet; offline, "
                          "ingest local files instead (the Simpsons corpus in data/simpsons works offline).") from exc
    return cached


def wikipedia_url(title: str, language: str = "en") -> str:
    return f"https://{language}.wikipedia.org/wiki/{urllib.parse.quote(title.replace(' ', '_'))}"


def is_web(source: str) -> bool:
    """Whether ``source`` is an ``http(s)://`` URL or ``wikipedia:Title`` rather than a local path."""
    return source.startswith(("http://", "https://", "wikipedia:"))


def load_source(source: str) -> list[Document]:
    """A file path, ``http(s)://`` URL, or ``wikipedia:Title``."""
    if source.startswith("wikipedia:"):
        url = wikipedia_url(source.split(":", 1)[1])
        return [Document(d.text, url, d.title, {"format": "html", "web": True}) for d in load_file(fetch_url(url), url)]
    if is_web(source):
        return [Document(d.text, source, d.title, {"format": "html", "web": True})
                for d in load_file(fetch_url(source), source)]
    return load_file(Path(source))


def expand_sources(sources: list[str]) -> list[str]:
    """Folders become the entries with a supported suffix inside them (sorted; a named pipe is
    listed too, so that it is reported, never opened); other sources stay as given."""
    expanded = []
    for source in sources:
        path = Path(source)
        if path.is_dir():
            expanded.extend(str(p) for p in sorted(path.rglob("*"))
                            if not p.is_dir() and p.suffix.lower() in FILE_TYPES and not p.name.startswith("."))
        else:
            expanded.append(source)
    return expanded


def loader_name(loader) -> str:
    """How a LangChain document loader is named in reports: its class and, when it has one, its path."""
    where = getattr(loader, "file_path", None) or getattr(loader, "web_path", None) or ""
    return f"{type(loader).__name__}({where})" if where else type(loader).__name__


def load_with_langchain(loader) -> list[Document]:
    """The documents a LangChain document loader (``langchain_core.document_loaders.BaseLoader``:
    PDF, web page, ... from langchain-community) yields, as ours: the text, its ``source`` metadata
    (else the loader's name) and its ``title`` (else the source's last part).  A loader that needs a
    package this lab does not pin (``WikipediaLoader`` needs ``wikipedia``; our own ``wikipedia:Title``
    source needs nothing) says so when it runs.  A loader that fails raises ``SourceError`` naming it."""
    try:
        loaded = list(loader.lazy_load())
    except Exception as exc:  # loaders raise whatever their library raises
        raise SourceError(f"{loader_name(loader)}: {type(exc).__name__}: {exc}") from exc
    docs = []
    for item in loaded:
        source = str(item.metadata.get("source") or loader_name(loader))
        title = str(item.metadata.get("title") or Path(source).name or source)
        if item.page_content.strip():
            docs.append(Document(item.page_content, source, title, {"loader": type(loader).__name__}))
    return docs
