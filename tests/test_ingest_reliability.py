"""Ingest reliability (issue 17, knowledge layer): filters safe for any source name, field
limits enforced before insert, one bad file never aborts an ingest, re-ingest exact at any
size, and clear errors for missing paths, named pipes and ingests that read nothing."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hash_embedder import HashEmbedder

from helpers.config import load_config
from helpers.errors import IngestError, VectorStoreError
from helpers.knowledge.chunking import chunk_record, split_to_fit
from helpers.knowledge.embeddings import get_embedder
from helpers.knowledge.ingest import ingest
from helpers.knowledge.loaders import Document
from helpers.knowledge.vectorstore import FIELD_MAX, TEXT_MAX, MilvusStore, milvus_string, stored_source

GOOD = "# Good\n\n## Plant\nHomer works as a safety inspector at the Springfield nuclear power plant.\n"
ODD_NAMES = ["Café – Ünïcode.md", 'say "hi".md', "back\\slash.md", "it's.md", "日本語 ✓.md",
             "ends with backslash\\.md", "two\nlines.md", "\\u2013 literal.md"]


@pytest.fixture(scope="module")
def config():
    return load_config()


@pytest.fixture
def store(tmp_path):
    store = MilvusStore(str(tmp_path / "milvus.db"))
    yield store
    store.close()


def _state(store: MilvusStore, collection: str) -> set[tuple[str, str]]:
    """The collection's (source, text) pairs, read page by page."""
    return {(row["source"], row["text"]) for row in store.rows(collection, ["source", "text"])}


def _run(sources, collection, config, store, embedder=None, **kwargs):
    return ingest([str(s) for s in sources], collection, collection, config, store=store,
                  embedder=embedder or HashEmbedder(), progress=False, **kwargs)


# filters ---------------------------------------------------------------------------
def test_filter_strings_keep_characters_raw_and_escape_only_what_milvus_needs():
    assert milvus_string("Café – x") == '"Café – x"'  # no \u2013 (Milvus rejects \u escapes)
    assert milvus_string('a "b" \\ c\nd') == '"a \\"b\\" \\\\ c\\nd"'


def test_sources_with_accents_dashes_quotes_and_backslashes_are_found(tmp_path, config, store):
    docs = tmp_path / "docs"
    docs.mkdir()
    for number, name in enumerate(ODD_NAMES):
        (docs / name).write_text(f"# Odd {number}\n\nDocument number {number} about a strange name.\n")
    report = _run([docs], "odd", config, store)
    assert report.files_read == len(ODD_NAMES) and not report.skipped
    for number, name in enumerate(ODD_NAMES):
        chunks = store.source_chunks("odd", str(docs / name))  # what the agent's visit reads
        assert [c.source for c in chunks] == [str(docs / name)]
        assert f"number {number} " in chunks[0].text
    for name in ODD_NAMES:  # an edit of every odd name replaces its old chunk
        (docs / name).write_text(f"# Odd\n\nEdited text of {name!r}.\n")
    second = _run([docs], "odd", config, store)
    assert second.chunks_added == second.chunks_removed == len(ODD_NAMES)
    assert {text.split("\n", 1)[1] for _, text in _state(store, "odd")} == {f"Edited text of {n!r}." for n in ODD_NAMES}
    with pytest.raises(VectorStoreError, match="cannot read the rows of source 'x' of collection 'nope'"):
        store.source_chunks("nope", "x")  # a library error comes back as the project's (the agent catches it)


# field limits and bad files ---------------------------------------------------------
@pytest.mark.filterwarnings("ignore:.*token window")  # chunks of one long "word" line embed cut: expected
def test_a_9000_character_title_does_not_abort_the_folder(tmp_path, config, store):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text(GOOD)
    title = " ".join(f"w{i:04d}" for i in range(1500))  # 8,999 characters
    (docs / "huge_title.md").write_text(f"# {title}\n\nThe body of the file with the huge title.\n")
    heading = " ".join(f"é{i:03d}" for i in range(1000))  # 4,999 characters, 5,999 bytes
    (docs / "huge_heading.md").write_text(f"# Fine\n\n## {heading}\nThe body under a huge heading.\n")
    embedder = get_embedder(config.embedding)
    report = _run([docs], "limits", config, store, embedder=embedder)
    assert report.files_read == 3 and not report.skipped
    hits = store.search("limits", "Who is the safety inspector at the nuclear plant?", embedder, k=1)
    assert hits[0].source.endswith("good.md")
    rows = list(store.rows("limits", ["text", "source", "title", "section"]))
    assert all(len(r["text"].encode()) <= TEXT_MAX for r in rows)
    assert all(len(r[f].encode()) <= FIELD_MAX for r in rows for f in ("source", "title", "section"))
    def words(name: str) -> set[str]:
        return {w for r in rows if r["source"].endswith(name) for w in r["text"].split("\n", 1)[1].split()}

    assert set(title.split()) <= words("huge_title.md")  # cut in the title field, whole in the text
    assert set(heading.split()) <= words("huge_heading.md")  # the same for a section heading


def test_an_over_long_record_is_split_not_cut():
    text = "é" * 20000  # 40,000 bytes
    chunks = chunk_record(Document(text, "corpus.json#Long", "Long", {"corpus_record": True}))
    assert len(chunks) > 4 and all(len(c.text.encode()) <= TEXT_MAX for c in chunks)
    assert "".join(c.text.removeprefix("Long\n") for c in chunks) == text
    assert [c.chunk_index for c in chunks] == list(range(len(chunks)))
    assert "".join(split_to_fit("aé" * 10, 5)) == "aé" * 10


def test_a_refused_batch_is_retried_per_source(tmp_path, config, store, monkeypatch):
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("a_good.md", "bad.md", "c_good.md"):
        (docs / name).write_text(f"# {name}\n\nThe text of {name}.\n")
    insert = store.insert

    def refuse_bad(name, rows):
        if any(row["source"].endswith("bad.md") for row in rows):
            raise VectorStoreError("Milvus refused 1 row(s): simulated")
        insert(name, rows)

    monkeypatch.setattr(store, "insert", refuse_bad)
    report = _run([docs], "retry", config, store)
    assert report.chunks_added == 2
    assert dict(report.skipped) == {str(docs / "bad.md"): "not stored: Milvus refused 1 row(s): simulated"}
    assert {Path(source).name for source, _ in _state(store, "retry")} == {"a_good.md", "c_good.md"}


# exact re-ingest ---------------------------------------------------------------------
def test_reingest_leaves_exactly_what_the_folder_holds(tmp_path, config, store):
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("edited", "deleted", "renamed", "kept", "broken"):
        (docs / f"{name}.md").write_text(f"# {name}\n\n## One\nFirst paragraph of {name}.\n\n"
                                         f"## Two\nSecond of {name}.\n")
    (docs / "records.json").write_text('[{"title": "Été – \\"quoted\\"", "text": "A record of a JSON corpus."}]')
    _run([docs], "exact", config, store)
    (docs / "edited.md").write_text("# edited\n\n## One\nA new first paragraph.\n\n## Two\nSecond of edited.\n")
    (docs / "deleted.md").unlink()
    (docs / "renamed.md").rename(docs / "new_name.md")
    (docs / "broken.md").write_bytes(b"\x00\x01 now binary")
    (docs / "records.json").unlink()
    report = _run([docs], "exact", config, store)
    _run([docs], "fresh", config, store)  # the same folder, ingested from scratch
    assert _state(store, "exact") == _state(store, "fresh")
    assert [Path(s).name for s in report.sources_removed] == \
        ["broken.md", "deleted.md", 'records.json#Été – "quoted"', "renamed.md"]
    assert report.chunks_removed == 8 and "no longer there or unreadable" in report.summary()


def test_keep_removed_keeps_the_chunks_of_deleted_files(tmp_path, config, store):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "stays.md").write_text(GOOD)
    (docs / "goes.md").write_text("# Goes\n\nA file that will be deleted.\n")
    _run([docs], "keep", config, store)
    (docs / "goes.md").unlink()
    report = _run([docs], "keep", config, store, keep_removed=True)
    assert report.chunks_removed == 0 and any(s.endswith("goes.md") for s, _ in _state(store, "keep"))
    _run([docs], "keep", config, store)
    assert not any(s.endswith("goes.md") for s, _ in _state(store, "keep"))


def _long_document(paragraphs: int, edited: tuple[int, ...] = ()) -> str:
    parts = [f"Paragraph {i} {'was edited' if i in edited else 'is original'}." for i in range(paragraphs)]
    return "# Big\n\n" + "\n\n".join(parts) + "\n"


def _check_big_source_reingest(tmp_path, store: MilvusStore, paragraphs: int) -> None:
    """One source of ``paragraphs`` chunks (plus two small files): edit two paragraphs, delete one
    file and rename the other; the collection must then equal a fresh ingest, and only the two
    edited chunks are embedded again."""
    docs = tmp_path / "docs"
    docs.mkdir()
    big = docs / "big.md"
    big.write_text(_long_document(paragraphs))
    (docs / "small.md").write_text("# Small\n\nA small file.\n")
    (docs / "other.md").write_text("# Other\n\nAnother file.\n")
    config = load_config(overrides={"chunking.chunk_size": 40, "chunking.chunk_overlap": 0})
    first = _run([docs], "big", config, store)
    assert first.chunks_total == paragraphs + 2
    big.write_text(_long_document(paragraphs, edited=(3, paragraphs - 2)))
    (docs / "small.md").unlink()
    (docs / "other.md").rename(docs / "renamed.md")
    embedder = HashEmbedder()
    second = _run([docs], "big", config, store, embedder=embedder)
    assert embedder.embedded == 2 + 1 and second.chunks_removed == 2 + 2  # 2 paragraphs and 2 files
    assert len(store.source_chunks("big", str(big))) == paragraphs
    _run([docs], "fresh", config, store)
    assert _state(store, "big") == _state(store, "fresh")


def test_reingest_pages_through_every_row(tmp_path):
    store = MilvusStore(str(tmp_path / "paged.db"), page_size=7)
    try:
        _check_big_source_reingest(tmp_path, store, paragraphs=60)
    finally:
        store.close()


def test_reingest_of_a_12000_chunk_source_is_exact(tmp_path, store):
    _check_big_source_reingest(tmp_path, store, paragraphs=12000)


def test_a_source_path_longer_than_the_field_is_cleaned_up(tmp_path, config, store):
    folder = tmp_path / ("d" * 200) / ("é" * 100)
    folder.mkdir(parents=True)
    doc = folder / (("f" * 150) + ".md")
    assert len(str(doc).encode()) > FIELD_MAX
    doc.write_text("# Long path\n\nThe first version.\n")
    _run([tmp_path / ("d" * 200)], "long", config, store)
    doc.write_text("# Long path\n\nThe second version.\n")
    report = _run([tmp_path / ("d" * 200)], "long", config, store)
    assert report.chunks_removed == 1
    [(source, text)] = _state(store, "long")
    assert source == stored_source(str(doc)) and len(source.encode()) <= FIELD_MAX and "second" in text
    assert [c.text for c in store.source_chunks("long", str(doc))] == [text]
    assert [c.text for c in store.source_chunks("long", source)] == [text]  # a hit's stored name works too
    (folder / "other.md").write_text(GOOD)
    doc.unlink()
    _run([tmp_path / ("d" * 200)], "long", config, store)
    assert [Path(s).name for s, _ in _state(store, "long")] == ["other.md"]


# inputs that read nothing -------------------------------------------------------------
def test_a_missing_path_says_it_does_not_exist(tmp_path, config, store):
    with pytest.raises(IngestError, match="does not exist") as info:
        _run([tmp_path / "nowhere" / "docs"], "missing", config, store)
    assert "nothing was ingested" in str(info.value) and "unsupported file type" not in str(info.value)
    assert not store.has_collection("missing")


@pytest.fixture
def alarm():
    """Fail, rather than hang, if something opens a named pipe."""
    def hung(signum, frame):
        raise TimeoutError("the ingest blocked (a named pipe was opened)")
    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def test_a_named_pipe_is_skipped_not_opened(tmp_path, config, store, alarm):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text(GOOD)
    os.mkfifo(docs / "pipe.md")
    report = _run([docs], "fifo", config, store)
    assert report.files_read == 1 and "not a regular file" in dict(report.skipped)[str(docs / "pipe.md")]
    with pytest.raises(IngestError, match="not a regular file"):
        _run([docs / "pipe.md"], "fifo_only", config, store)


def test_an_ingest_that_reads_nothing_raises_and_leaves_no_collection(tmp_path, config, store):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "binary.txt").write_bytes(b"\x00\x01\x02")
    (docs / "empty.md").write_text("  \n")
    with pytest.raises(IngestError, match="nothing was ingested into 'nothing'") as info:
        _run([docs], "nothing", config, store)
    assert "binary file" in str(info.value) and "empty" in str(info.value)
    assert not store.has_collection("nothing")
    (docs / "good.md").write_text(GOOD)
    _run([docs], "kept", config, store)
    (docs / "good.md").unlink()
    with pytest.raises(IngestError):  # even with force, a bad re-run leaves the old collection alone
        _run([docs], "kept", config, store, force=True)
    assert len(_state(store, "kept")) == 1


def test_an_ingest_whose_every_source_is_refused_leaves_no_collection(tmp_path, config, store, monkeypatch):
    (tmp_path / "only.md").write_text(GOOD)

    def refuse(name, rows):
        raise VectorStoreError("Milvus refused it: simulated")

    monkeypatch.setattr(store, "insert", refuse)
    with pytest.raises(IngestError, match="nothing was ingested.*simulated"):
        _run([tmp_path / "only.md"], "refused", config, store)
    assert not store.has_collection("refused")


KILLED_INGEST = """
import os, signal, sys
sys.path.insert(0, {tests!r})
from hash_embedder import HashEmbedder
from helpers.config import load_config
from helpers.knowledge.ingest import ingest
from helpers.knowledge.vectorstore import MilvusStore

db, folder, method, after = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
original, calls = getattr(MilvusStore, method), []

def dying(self, *args, **kwargs):
    calls.append(method)
    if after >= 0 and len(calls) > after:
        os.kill(os.getpid(), signal.SIGKILL)  # kill -9: no cleanup, no flush, no atexit
    return original(self, *args, **kwargs)

setattr(MilvusStore, method, dying)
store = MilvusStore(db)
ingest([folder], "killed", "killed", load_config(), store=store, embedder=HashEmbedder(), progress=False,
       batch_size=4)
store.close()
"""


def _ingest_in_a_child(tmp_path: Path, db: Path, folder: Path, method: str = "insert", after: int = -1) -> int:
    script = tmp_path / "killed_ingest.py"
    script.write_text(KILLED_INGEST.format(tests=str(Path(__file__).parent)))
    done = subprocess.run([sys.executable, str(script), str(db), str(folder), method, str(after)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, -signal.SIGKILL), done.stderr[-2000:]
    return done.returncode


@pytest.mark.slow
@pytest.mark.parametrize("method, after", [
    ("insert", 0),       # before the first row is written
    ("insert", 2),       # after two batches of the new chunks are in
    ("delete_ids", 0),   # every new chunk is in, the stale ones not yet removed
    ("flush", 0),        # everything written, nothing flushed
])
def test_kill_9_at_any_point_of_an_ingest_then_a_rerun_restores_exactly_the_folder(tmp_path, config, method, after):
    docs = tmp_path / "docs"
    docs.mkdir()
    for n in range(30):
        (docs / f"doc{n:02d}.md").write_text(f"# Doc {n}\n\n## One\nFirst paragraph of document {n}.\n\n"
                                             f"## Two\nSecond paragraph of document {n}.\n")
    db = tmp_path / "killed.db"
    assert _ingest_in_a_child(tmp_path, db, docs) == 0
    for n in range(0, 30, 3):  # the next ingest edits ten files, deletes five and adds five
        (docs / f"doc{n:02d}.md").write_text(f"# Doc {n}\n\n## One\nAn edited paragraph of document {n}.\n")
    for n in (1, 4, 7, 10, 13):
        (docs / f"doc{n:02d}.md").unlink()
    for n in range(30, 35):
        (docs / f"doc{n:02d}.md").write_text(f"# Doc {n}\n\n## One\nA new document, number {n}.\n")
    assert _ingest_in_a_child(tmp_path, db, docs, method, after) == -signal.SIGKILL
    assert _ingest_in_a_child(tmp_path, db, docs) == 0      # the re-run
    store = MilvusStore(str(db))
    try:
        _run([docs], "fresh", config, store)
        assert _state(store, "killed") == _state(store, "fresh")
        assert store.info("killed").count == store.info("fresh").count
    finally:
        store.close()


def test_langchain_document_loaders_are_sources_and_one_that_fails_is_skipped(tmp_path, config, store):
    from langchain_community.document_loaders import TextLoader
    notes = tmp_path / "notes.txt"
    notes.write_text("Homer works as a safety inspector at the Springfield nuclear power plant.\n")
    good = tmp_path / "good.md"
    good.write_text(GOOD)
    report = ingest([TextLoader(str(notes)), TextLoader(str(tmp_path / "missing.txt")), str(good)], "loaders",
                    "loaders", config, store=store, embedder=HashEmbedder(), progress=False)
    assert report.files_read == 2 and report.chunks_added == 2
    assert [name for name, _ in report.skipped] == [f"TextLoader({tmp_path / 'missing.txt'})"]
    stored = _state(store, "loaders")
    assert any(source == str(notes) and "safety inspector" in text for source, text in stored)
