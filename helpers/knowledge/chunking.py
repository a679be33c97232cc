"""Split documents into chunks sized for the embedding model, with section metadata.

Markdown is first split at ``##`` headings (the section becomes metadata), then
LangChain's ``RecursiveCharacterTextSplitter`` cuts each section to size.
Chunk ids are content hashes of (source, text): ingesting the same source
again produces the same ids, so nothing is added twice.

Every chunk fits the vector store's fields: a title or heading too long for its
field is cut in the metadata and kept whole in the text, and a text too long for
the text field is split (nothing is dropped).
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from langchain_text_splitters import RecursiveCharacterTextSplitter

from helpers.knowledge.loaders import Document
from helpers.knowledge.vectorstore import TEXT_MAX, clip, stored_source

_HEADING = re.compile(r"^(#{1,3})\s+(.*)$", re.MULTILINE)


@dataclass
class Chunk:
    id: str
    text: str
    source: str
    title: str
    section: str
    chunk_index: int

    def row(self, vector: list[float]) -> dict:
        """The Milvus row for this chunk."""
        return {"id": self.id, "vector": vector, "text": self.text, "source": stored_source(self.source),
                "title": clip(self.title), "section": clip(self.section),
                "chunk_index": self.chunk_index, "content_hash": self.id}


def content_id(source: str, text: str) -> str:
    return hashlib.sha256(f"{source}\n{text}".encode()).hexdigest()[:32]


def split_to_fit(text: str, limit: int = TEXT_MAX) -> list[str]:
    """``text`` in consecutive parts of at most ``limit`` UTF-8 bytes (one part when it fits)."""
    parts = []
    while text:
        parts.append(clip(text, limit))
        text = text[len(parts[-1]):]
    return parts


def header_line(title: str, section: str = "") -> str:
    """The line every chunk's text starts with, naming its page (and section), so a chunk read
    alone, or embedded, says what it is about."""
    return f"{title} — {section}\n" if section else f"{title}\n"


def body_of(text: str, title: str, section: str = "") -> str:
    """A chunk's text without its ``header_line``."""
    header = header_line(title, section)
    return text[len(header):] if text.startswith(header) else text


def _with_prefix(prefix: str, body: str) -> list[str]:
    """``prefix`` + ``body``, split so that every text fits the text field."""
    return [prefix + part for part in split_to_fit(body, TEXT_MAX - len(prefix.encode()))]


def sections(text: str) -> list[tuple[str, str]]:
    """(section heading, body) pairs; text before the first ``##`` belongs to section ''."""
    marks = [m for m in _HEADING.finditer(text) if len(m.group(1)) >= 2]
    if not marks:
        return [("", text)]
    parts = [("", text[: marks[0].start()])]
    for mark, following in zip(marks, [*marks[1:], None]):
        end = following.start() if following else len(text)
        parts.append((mark.group(2).strip(), text[mark.end(): end]))
    return [(heading, body.strip()) for heading, body in parts if body.strip()]


def chunk_document(doc: Document, chunk_size: int = 900, chunk_overlap: int = 120) -> list[Chunk]:
    splitter = RecursiveCharacterTextSplitter(chunk_size=chunk_size, chunk_overlap=chunk_overlap)
    title = clip(doc.title)
    chunks: list[Chunk] = []
    for heading, body in sections(doc.text):
        section = clip(heading)
        if section != heading:  # too long for the section field: keep it whole in the text
            body = f"{heading}\n{body}"
        if title == doc.title:  # drop a leading "# Title" line: the title is metadata already
            body = re.sub(r"^#\s+.*\n?", "", body).strip()
        prefix = header_line(title, section)
        for piece in splitter.split_text(body):
            for text in _with_prefix(prefix, piece):
                chunks.append(Chunk(content_id(doc.source, text), text, doc.source, title, section, len(chunks)))
    return chunks


def chunk_record(doc: Document) -> list[Chunk]:
    """A benchmark corpus record: one paragraph, one chunk (titles are what recall is measured on);
    split only if it is too long for the text field."""
    title = clip(doc.title)
    return [Chunk(content_id(doc.source, text), text, doc.source, title, "", index)
            for index, text in enumerate(_with_prefix(header_line(title), doc.text.strip()))]


def chunk_documents(docs: list[Document], chunk_size: int = 900, chunk_overlap: int = 120) -> list[Chunk]:
    return [chunk for doc in docs for chunk in chunk_document(doc, chunk_size, chunk_overlap)]
