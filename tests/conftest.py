"""Shared fixtures.  Models and embeddings are the real ones, loaded offline."""
from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
for var in ("DSL_PROVIDER", "DSL_MODEL", "OLLAMA_HOST", "OPENAI_BASE_URL", "MILVUS_URI", "DSL_MILVUS_URI", "DSL_FAST"):
    os.environ.pop(var, None)

import pytest  # noqa: E402

from helpers.config import FAST_OVERRIDES, load_config  # noqa: E402

# the fast profile (what DSL_FAST=1, --fast and the notebooks' fast mode use) with greedy decoding,
# so that a test's model replies repeat from run to run
TEST_PROFILE = {**FAST_OVERRIDES, "llm.temperature": 0.0}


@pytest.fixture(scope="session")
def small_config():
    """The configuration tests use: the fast profile (the 0.5B model, a modest context), greedy."""
    return load_config(overrides=TEST_PROFILE)


@pytest.fixture(scope="session")
def small_backend(small_config):
    from helpers.models.llm import get_backend
    return get_backend(small_config.llm)


@pytest.fixture(scope="session")
def simpsons_kb(tmp_path_factory):
    """The Simpsons knowledge base in a fresh Milvus Lite directory (once per test session): a copy of the
    prepared, fingerprinted one the notebooks use (built on first use), completed by an ingest that
    adds nothing when the copy is current."""
    from helpers.knowledge.ingest import ingest_manifest
    from helpers.knowledge.vectorstore import open_store
    from helpers.lab.workspace import copy_prepared_knowledge_base
    path = tmp_path_factory.mktemp("milvus") / "kb.db"
    config = load_config(overrides={**TEST_PROFILE, "vector_db.uri": str(path)})
    copy_prepared_knowledge_base(config, path)
    reports = ingest_manifest(config, progress=False)
    return config, open_store(config), reports
