"""Ingestion and search with real Milvus Lite and the real embedding model."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import TEST_PROFILE
from servers import free_port, wait_for_port

from helpers.config import PROJECT_ROOT, load_config
from helpers.errors import EmbeddingMismatchError
from helpers.knowledge.embeddings import Embedder, get_embedder
from helpers.knowledge.ingest import ingest, ingest_manifest
from helpers.knowledge.retrieval import best_part, query_beside_title, search_collections
from helpers.knowledge.vectorstore import MilvusStore, open_store
from helpers.strategies.chain import run_chain

DATA = PROJECT_ROOT / "data"
CHECKS = [json.loads(line) for line in (DATA / "qa" / "search_checks.jsonl").read_text().splitlines() if line.strip()]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(PROJECT_ROOT)}


@pytest.fixture(scope="module")
def kb(simpsons_kb):
    return simpsons_kb


def test_manifest_collections_are_described_and_filled(kb):
    config, store, _reports = kb
    infos = {info.name: info for info in store.describe_all()}
    assert {"simpsons_production", "simpsons_characters", "simpsons_storytelling", "simpsons_reception",
            "volcanoes", "sourdough"} <= set(infos)
    for info in infos.values():
        assert info.count > 5 and len(info.description) > 40
        assert (info.embedding_model, info.dimension) == ("all-MiniLM-L6-v2", 384)


@pytest.mark.parametrize("check", CHECKS, ids=[c["query"][:40] for c in CHECKS])
def test_search_finds_the_right_document(kb, check):
    config, store, _ = kb
    embedder = get_embedder(config.embedding)
    hits = store.search(check["collection"], check["query"], embedder, k=5)
    sources = [h.source for h in hits]
    assert any(s.endswith(check["expected_source"]) for s in sources), sources
    assert all(h.collection == check["collection"] and h.title and h.text for h in hits)


def test_hybrid_search_returns_fused_hits(kb):
    config, store, _ = kb
    hits = store.search("simpsons_reception", "D'oh Oxford English Dictionary", get_embedder(config.embedding),
                        k=4, mode="hybrid")
    assert len(hits) == 4 and any("Oxford" in h.text for h in hits)


def test_hybrid_hits_carry_cosine_similarity_for_thresholds_and_merging(kb):
    """Fusion scores rank chunks inside one collection only; the cosine similarity that
    hybrid hits also carry is what thresholds and cross-collection merging use."""
    config, store, _ = kb
    embedder = get_embedder(config.embedding)
    query = "Who voices Homer Simpson?"
    dense = {h.id: h.score for h in store.search("simpsons_characters", query, embedder, k=10, mode="dense")}
    hybrid = store.search("simpsons_characters", query, embedder, k=4, mode="hybrid")
    assert all(h.score < 0.05 for h in hybrid)  # reciprocal-rank fusion scores
    for hit in hybrid:
        if hit.id in dense:
            assert hit.similarity == pytest.approx(dense[hit.id], abs=1e-3)
    merged = search_collections(store, embedder, query, ["simpsons_characters", "volcanoes"], k=3, mode="hybrid")
    assert merged[0].collection == "simpsons_characters"
    assert [h.similarity for h in merged] == sorted((h.similarity for h in merged), reverse=True)
    assert merged[-1].collection == "volcanoes"


def test_reingest_adds_nothing(kb):
    config, store, _ = kb
    reports = ingest_manifest(config, progress=False)
    assert all(r.chunks_added == 0 and r.chunks_present == r.chunks_total > 0 for r in reports)


class OtherEmbedder(Embedder):
    name, dimension = "other-model", 8

    def embed(self, texts):
        return np.ones((len(texts), 8), dtype=np.float32) / np.sqrt(8)


def test_embedding_mismatch_names_both_models(kb):
    config, store, _ = kb
    with pytest.raises(EmbeddingMismatchError) as info:
        store.search("simpsons_reception", "ratings", OtherEmbedder())
    message = str(info.value)
    assert "all-MiniLM-L6-v2" in message and "other-model" in message and "--force" in message
    with pytest.raises(EmbeddingMismatchError):
        ingest([str(DATA / "distractors" / "volcanoes")], "volcanoes", "v", config, embedder=OtherEmbedder(),
               progress=False)


def test_second_process_gets_a_lock_message(kb):
    config, store, _ = kb
    result = subprocess.run([sys.executable, "-m", "helpers", "collections"], capture_output=True, text=True,
                            env={**ENV, "DSL_MILVUS_URI": config.vector_db.uri}, timeout=120)
    assert result.returncode == 2
    assert "locked by pid" in result.stderr and str(os.getpid()) in result.stderr
    assert "server mode" in result.stderr or "milvus-lite server" in result.stderr


def test_bad_files_are_skipped_with_a_summary(tmp_path, kb):
    config, _, _ = kb
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text("# Good\n\n## Part\nA readable document about Springfield's power plant.\n")
    (docs / "binary.txt").write_bytes(b"\x00\x01\x02 not text")
    (docs / "empty.md").write_text("   \n")
    (docs / "latin1.txt").write_bytes("caf\xe9 cr\xe8me".encode("latin-1"))
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    (docs / "locked.md").write_text("# Locked\n\nsecret")
    (docs / "locked.md").chmod(0)
    store = MilvusStore(str(tmp_path / "bad.db"))
    try:
        report = ingest([str(docs)], "mixed", "mixed files", config, store=store, progress=False)
    finally:
        store.close()
    assert report.files_read >= 1 and report.chunks_added >= 1
    reasons = dict(report.skipped)
    skipped_names = {Path(p).name for p in reasons}
    assert {"binary.txt", "empty.md", "latin1.txt", "broken.pdf"} <= skipped_names
    if os.geteuid() != 0:  # root can read a file with mode 000
        assert "locked.md" in skipped_names
    summary = report.summary()
    assert "binary file" in summary and "empty" in summary and "UTF-8" in summary and "PDF" in summary


def test_json_corpus_one_record_per_chunk(tmp_path, kb):
    config, _, _ = kb
    corpus = DATA / "multihop_sample" / "corpus.json"
    records = json.loads(corpus.read_text())
    store = MilvusStore(str(tmp_path / "corpus.db"))
    try:
        report = ingest([str(corpus)], "sample", "sample corpus", config, store=store, progress=False)
        assert report.chunks_added == len(records)
        hit = store.search("sample", records[3]["text"][:120], get_embedder(config.embedding), k=1)[0]
        assert hit.title == records[3]["title"]
    finally:
        store.close()



@pytest.mark.slow
def test_server_mode_uri(tmp_path, kb):
    """The code path of a server URI (``http://host:port``: no local path, no lock, the server's own
    consistency after insert) against a Milvus Lite server started here: ingest, dense and hybrid
    search, the chain, and a second client at once.  A Milvus standalone or cluster is reached the same
    way (docs/scale.md)."""
    config, _, _ = kb
    port = free_port()
    milvus_lite = Path(sys.executable).with_name("milvus-lite")
    server = subprocess.Popen([str(milvus_lite), "server", "--data-dir", str(tmp_path / "srv"),
                               "--host", "127.0.0.1", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_for_port(port, 30), "milvus-lite server did not start"
        server_config = load_config(overrides={"vector_db.uri": f"http://127.0.0.1:{port}"})
        store = open_store(server_config)
        report = ingest([str(DATA / "distractors" / "volcanoes")], "volcanoes", "volcano facts", server_config,
                        store=store, progress=False)
        assert report.chunks_added > 5
        embedder = get_embedder(config.embedding)
        hits = store.search("volcanoes", "Mount St. Helens eruption", embedder, k=3)
        assert any("famous_eruptions" in h.source for h in hits)
        hybrid = store.search("volcanoes", "Mount St. Helens eruption", embedder, k=3, mode="hybrid")
        assert any("famous_eruptions" in h.source for h in hybrid) and all(h.similarity is not None for h in hybrid)
        # the chain, with the real small model, reads its passages from the server
        chain = run_chain("How many people died when Mount St. Helens erupted in 1980?",
                          load_config(overrides={**TEST_PROFILE, "vector_db.uri": f"http://127.0.0.1:{port}"}),
                          store=store, embedder=embedder, collections=["volcanoes"])
        assert not chain.error and any("famous_eruptions" in s.source for s in chain.sources[:5])
        # a second client (another process) can use the same server at once
        result = subprocess.run([sys.executable, "-m", "helpers", "collections"], capture_output=True, text=True,
                                env={**ENV, "MILVUS_URI": f"http://127.0.0.1:{port}"}, timeout=120)
        assert result.returncode == 0 and "volcanoes" in result.stdout
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_an_edited_file_replaces_its_old_chunks(tmp_path, kb):
    config, _, _ = kb
    doc = tmp_path / "notes.md"
    doc.write_text("# Notes\n\n## One\nThe first version says the plant is in sector 7G.\n")
    store = MilvusStore(str(tmp_path / "edit.db"))
    try:
        first = ingest([str(doc)], "notes", "notes", config, store=store, progress=False)
        doc.write_text("# Notes\n\n## One\nThe second version moves Homer to sector 8H.\n")
        second = ingest([str(doc)], "notes", "notes", config, store=store, progress=False)
        texts = [row["text"] for row in store.client.query("notes", filter="", output_fields=["text"], limit=100)]
    finally:
        store.close()
    assert first.chunks_added == second.chunks_added == second.chunks_removed == 1
    assert len(texts) == 1 and "8H" in texts[0]


def test_a_long_page_shows_the_sentence_a_step_asks_for():
    """The page's own name is in every sentence; what picks the sentences shown is the rest of the step."""
    assert query_beside_title("Where was Nicki Minaj born?", "Nicki Minaj") == "Where was born?"
    assert query_beside_title("Nicki Minaj", "Nicki Minaj") == "Nicki Minaj"
    page = next(p for p in json.loads((DATA / "2wiki" / "corpus.json").read_text()) if p["title"] == "Nicki Minaj")
    embedder = get_embedder(load_config().embedding)
    shown = best_part(page["text"], "Where was Nicki Minaj born?", 600, embedder, title="Nicki Minaj")
    assert len(shown) <= 620 and shown.startswith(page["text"].split(". ")[0])
    assert "Born in Saint James, Port of Spain" in shown
