"""Split documents into chunks sized for the embedding model, with section metadata.

Markdown is first split at ``##`` headings (the section becomes metadata), then
LangChain's ``RecursiveCharacterTextSplitter`` cuts each section to size.
Chunk ids are content hashes of (source, text): ingesting the same source
again produces the same ids, so nothing is added twice.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from langchain_text_splitters import RecursiveCharacterTextSplitter

from helpers.knowledge.loaders import Document

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
        return {"id": self.id, "vector": vector, "text": self.text, "source": self.source[:500],
                "title": self.title[:500], "section": self.section[:500],
                "chunk_index": self.chunk_index, "content_hash": self.id}


def content_id(source: str, text: str) -> str:
    return hashlib.sha256(f"{source}\n{text}".encode()).hexdigest()[:32]


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
    chunks: list[Chunk] = []
    for heading, body in sections(doc.text):
        # drop a leading "# Title" line: the title is metadata already
        body = re.sub(r"^#\s+.*\n?", "", body).strip()
        for piece in splitter.split_text(body):
            text = f"{doc.title} — {heading}\n{piece}" if heading else f"{doc.title}\n{piece}"
            chunks.append(Chunk(content_id(doc.source, text), text, doc.source, doc.title, heading, len(chunks)))
    return chunks


def chunk_documents(docs: list[Document], chunk_size: int = 900, chunk_overlap: int = 120) -> list[Chunk]:
    return [chunk for doc in docs for chunk in chunk_document(doc, chunk_size, chunk_overlap)]
