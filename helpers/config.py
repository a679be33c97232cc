"""Configuration: one YAML file plus environment overrides.

Like DeepSearcher's config file, ``deepsearch.yaml`` (project root) picks the LLM,
the embedding model and the vector database.  Environment variables override
it (see ``ENV_OVERRIDES``), and a notebook can override any field::

    config = load_config(overrides={"llm.model": "qwen2.5-coder-0.5b", "search.top_k": 3})

``DSL_FAST=1`` selects the small model and small budgets (tests, CI, quick tries).
"""
from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, model_validator

from helpers.errors import ConfigError, InputError

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG_FILE = PROJECT_ROOT / "deepsearch.yaml"


class LLMConfig(BaseModel):
    provider: Literal["llamacpp", "ollama", "openai"] = "llamacpp"
    model: str = "qwen2.5-coder-1.5b"  # catalogue name, GGUF path, Ollama model or OpenAI model
    context_size: int = Field(8192, ge=256)
    temperature: float = Field(0.2, ge=0.0, le=2.0)
    max_tokens: int = Field(768, ge=16)
    threads: int = Field(0, ge=0)  # 0: every core this process may use
    seed: int = 7
    # llama.cpp: RAM for the states of recent prompts, so a prompt that starts like an earlier one
    # skips re-reading the shared start (helpers.models.prompt_cache); 0 turns it off
    prompt_cache_mb: int = Field(1024, ge=0)
    repeat_penalty: float = Field(1.1, gt=0.0)  # >1 discourages the loops small models fall into (llama.cpp and Ollama)
    base_url: str | None = None  # Ollama host or OpenAI-compatible base URL
    api_key: str | None = None
    structured_mode: Literal["auto", "json_schema", "json_object", "prompt"] = "auto"
    retries: int = Field(2, ge=0, le=10)  # extra attempts after an invalid structured reply
    timeout_s: float = Field(600.0, gt=0)


class EmbeddingConfig(BaseModel):
    provider: Literal["huggingface", "ollama"] = "huggingface"
    model: str = "all-MiniLM-L6-v2"  # shipped model name, a sentence-transformers folder, or an Ollama model
    batch_size: int = Field(32, ge=1)


class VectorDBConfig(BaseModel):
    uri: str = "data/milvus/deepsearch.db"  # Milvus Lite directory, or http://host:port for a server
    token: str = ""


class ChunkingConfig(BaseModel):
    chunk_size: int = Field(900, ge=10)  # characters; ~200 tokens, inside MiniLM's 256-token window
    chunk_overlap: int = Field(120, ge=0)

    @model_validator(mode="after")
    def _overlap_below_size(self) -> "ChunkingConfig":
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError(f"chunk_overlap ({self.chunk_overlap}) must be smaller than chunk_size "
                             f"({self.chunk_size}): lower chunking.chunk_overlap")
        return self


class SearchConfig(BaseModel):
    top_k: int = Field(5, ge=1, le=200)
    mode: Literal["dense", "hybrid"] = "dense"
    ranker: Literal["rrf", "weighted"] = "rrf"
    # pipeline retrieval: at most this many chunks of one document per search (0: any)
    max_per_document: int = Field(2, ge=0)


class PipelineConfig(BaseModel):
    max_iter: int = Field(3, ge=1, le=20)
    max_calls: int = Field(20, ge=1)
    max_prompt_tokens: int = Field(15000, ge=500)
    max_subqueries: int = Field(4, ge=1, le=20)
    # drop sub-queries less similar to the question than this share of the closest one's similarity
    subquery_focus: float = Field(0.5, ge=0.0, le=1.0)
    route_check: bool = True  # also search the collection that matches a sub-query best when the router left it out
    relevance: Literal["batch", "per_chunk", "threshold", "none"] = "batch"
    # cosine similarity: chunks under it are demoted without a model call
    relevance_threshold: float = Field(0.35, ge=-1.0, le=1.0)
    # batch method: chunks at or above it are kept without asking the model
    relevance_accept: float = Field(0.65, ge=-1.0, le=1.0)
    synthesis_chunks: int = Field(12, ge=1)
    synthesis_style: Literal["structured", "prose"] = "structured"
    answer: Literal["report", "short"] = "report"  # a report with sections, or a short answer (evaluation)
    # sections: one short call per section (the passages of one sub-query each), then an overview;
    # single: one call writes the whole report (DeepSearcher's way)
    report_style: Literal["sections", "single"] = "sections"
    report_sections: int = Field(6, ge=1, le=8)
    section_passages: int = Field(3, ge=2, le=6)
    # per_passage: one sentence from each of a section's passages in turn (every passage shown is cited
    # unless a check drops it); free: 2-3 points, each citing any of its passages
    section_points: Literal["per_passage", "free"] = "per_passage"
    # per_passage: the decoding grammar ends each sentence by this many characters (0: no cap), so a
    # passage copied whole cannot use up the section's reply
    section_point_chars: int = Field(220, ge=0, le=2000)
    report_max_tokens: int = Field(1024, ge=64)  # reply limit for the final report (longer than other replies)
    # auto: a question that asks how something changed gets a story in time order (report_story);
    # topics: every report by topic (sections as above)
    report_shape: Literal["auto", "topics"] = "auto"
    story_passages: int = Field(5, ge=2, le=8)  # a story's section: passages (one sentence each), in time order
    story_point_chars: int = Field(300, ge=0, le=2000)  # a story's sentence ends by this many characters (0: no cap)
    timeline_passages: int = Field(12, ge=0)  # a story: passages of each collection the timeline search adds (0: none)


class ChainConfig(BaseModel):
    max_hops: int = Field(4, ge=1, le=12)  # at most this many planned steps, each searched and read once
    max_names: int = Field(3, ge=0)  # names in the question searched on their own (0: none)
    pages: int = Field(2, ge=0, le=10)  # pages titled by a step's entity, read before its search hits (0: none)
    hop_passages: int = Field(3, ge=1)  # best passages of a step's search that the model reads
    passage_chars: int = Field(600, ge=100)  # each passage read is cut to this many characters
    max_calls: int = Field(8, ge=2)
    max_prompt_tokens: int = Field(8000, ge=500)


class AgentConfig(BaseModel):
    token_budget: int = Field(20000, ge=500)
    max_bad_attempts: int = Field(2, ge=1)
    strict_check: bool = False  # add the strict reviewer (reads the cited passages) to every evaluation
    max_steps: int = Field(12, ge=1)
    draft_every: int = Field(0, ge=0)  # steps without an answer attempt before one is required (0: never)
    max_stalls: int = Field(1, ge=0)  # stalled steps in a row before an answer is required (0: never)
    pages: int = Field(2, ge=0, le=10)  # pages titled by each name in the question, read with its search (0: none)
    rewrite: Literal["questions", "always"] = "questions"  # rewrite only requests written as questions, or all
    queue_policy: Literal["front", "rotate"] = "front"
    max_gap_questions: int = Field(4, ge=0)
    dedup_threshold: float = Field(0.86, ge=0.0, le=1.0)
    web_search_url: str = ""  # a SearXNG instance (e.g. http://127.0.0.1:8888) the agent may search; "": off


class Config(BaseModel):
    llm: LLMConfig = LLMConfig()
    embedding: EmbeddingConfig = EmbeddingConfig()
    vector_db: VectorDBConfig = VectorDBConfig()
    chunking: ChunkingConfig = ChunkingConfig()
    search: SearchConfig = SearchConfig()
    pipeline: PipelineConfig = PipelineConfig()
    chain: ChainConfig = ChainConfig()
    agent: AgentConfig = AgentConfig()

    def resolve_path(self, value: str) -> Path:
        """Paths in the config are relative to the project root."""
        path = Path(value).expanduser()
        return path if path.is_absolute() else PROJECT_ROOT / path


# environment variable -> dotted config key
ENV_OVERRIDES = {
    "DSL_PROVIDER": "llm.provider",
    "DSL_MODEL": "llm.model",
    "DSL_CONTEXT_SIZE": "llm.context_size",
    "DSL_TEMPERATURE": "llm.temperature",
    "DSL_THREADS": "llm.threads",
    "DSL_BASE_URL": "llm.base_url",
    "OLLAMA_HOST": "llm.base_url",
    "OPENAI_BASE_URL": "llm.base_url",
    "OPENAI_API_KEY": "llm.api_key",
    "DSL_EMBEDDING_PROVIDER": "embedding.provider",
    "DSL_EMBEDDING_MODEL": "embedding.model",
    "MILVUS_URI": "vector_db.uri",  # a server (http://host:port); pymilvus itself reads it too
    "DSL_MILVUS_URI": "vector_db.uri",  # a Milvus Lite directory (pymilvus rejects paths in MILVUS_URI)
    "MILVUS_TOKEN": "vector_db.token",
}

# what DSL_FAST=1 changes: the small model and small budgets
FAST_OVERRIDES = {
    "llm.model": "qwen2.5-coder-0.5b",
    "llm.context_size": 4096,
    "llm.max_tokens": 512,
    "pipeline.max_iter": 1,
    "pipeline.max_calls": 10,
    "pipeline.report_sections": 2,
    "pipeline.synthesis_chunks": 6,
    "pipeline.report_max_tokens": 768,
    "agent.token_budget": 8000,
    "agent.max_steps": 5,
}


def check_question_fits(question: str, config: Config, where: str = "the question") -> None:
    """Refuse a question longer than a quarter of the model's context (about ``context_size``
    characters at ~4 per token), which would leave no room for the passages it is answered from."""
    if len(question) > config.llm.context_size:
        raise InputError(f"{where} is {len(question):,} characters long; at most {config.llm.context_size:,} fit "
                         f"beside the passages in the model's {config.llm.context_size:,}-token context: shorten "
                         "it (or raise llm.context_size)")


def is_server_uri(uri: str) -> bool:
    """True for a Milvus server address (``http://host:port``), False for a Milvus Lite path."""
    return uri.startswith(("http://", "https://", "tcp://"))


def fast_mode(environ: dict[str, str] | None = None) -> bool:
    """True when ``DSL_FAST`` asks for the fast profile (``FAST_OVERRIDES``): the one test of it."""
    environ = os.environ if environ is None else environ
    return environ.get("DSL_FAST", "") not in ("", "0")


def _set_dotted(tree: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    node = tree
    for key in parents:
        node = node.setdefault(key, {})
        if not isinstance(node, dict):
            raise ConfigError(f"cannot set '{dotted}': '{key}' is not a section")
    node[leaf] = value


def _env_overrides(environ: dict[str, str]) -> dict[str, str]:
    overrides: dict[str, str] = {}
    provider = environ.get("DSL_PROVIDER", "")
    for var, key in ENV_OVERRIDES.items():
        if not environ.get(var):
            continue
        # OLLAMA_HOST / OPENAI_BASE_URL only apply to their own provider
        if var == "OLLAMA_HOST" and provider != "ollama":
            continue
        if var == "OPENAI_BASE_URL" and provider != "openai":
            continue
        if var == "MILVUS_URI" and not is_server_uri(environ[var]):
            raise ConfigError(
                f"MILVUS_URI={environ[var]!r}: pymilvus only accepts server URIs (http://host:port) in "
                "MILVUS_URI. For a Milvus Lite directory set DSL_MILVUS_URI or vector_db.uri instead.")
        overrides[key] = environ[var]
    return overrides


def unknown_keys(tree: dict[str, Any], model: type[BaseModel] = None, prefix: str = "") -> list[str]:
    """One line per key of ``tree`` that is not a setting, naming the closest valid key."""
    model = model or Config
    problems = []
    for key, value in tree.items():
        fields = model.model_fields
        if key not in fields:
            close = difflib.get_close_matches(str(key), list(fields), n=1, cutoff=0.5)
            hint = f"did you mean '{prefix}{close[0]}'?" if close else f"valid here: {', '.join(fields)}"
            problems.append(f"'{prefix}{key}' is not a setting ({hint})")
            continue
        section = fields[key].annotation
        if isinstance(value, dict) and isinstance(section, type) and issubclass(section, BaseModel):
            problems += unknown_keys(value, section, f"{prefix}{key}.")
    return problems


def _validated(tree: dict[str, Any], overrides: dict[str, Any], where: str) -> Config:
    """``tree`` with dotted ``overrides`` applied, validated; ``where`` names the source in errors.
    Unknown keys and values out of range are refused, naming the key and what it accepts."""
    for key, value in overrides.items():
        _set_dotted(tree, key, value)
    unknown = unknown_keys(tree)
    if unknown:
        raise ConfigError(f"invalid configuration ({where}): " + "; ".join(unknown))
    try:
        return Config.model_validate(tree)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']} (got {e.get('input')!r})"
                             for e in exc.errors())
        raise ConfigError(f"invalid configuration ({where}): {problems}") from exc


def with_overrides(config: Config, overrides: dict[str, Any]) -> Config:
    """A validated copy of ``config`` with dotted ``overrides`` applied (``{"search.top_k": 3}``)."""
    return _validated(config.model_dump(), overrides, f"overrides {overrides}")


def load_config(
    path: str | Path | None = None,
    overrides: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
) -> Config:
    """Read the YAML file, then apply DSL_FAST, environment variables and ``overrides`` (in that order)."""
    environ = dict(os.environ) if environ is None else environ
    file = Path(path) if path else DEFAULT_CONFIG_FILE
    tree: dict[str, Any] = {}
    if file.exists():
        try:
            tree = yaml.safe_load(file.read_text()) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"{file}: not valid YAML ({exc})") from exc
        if not isinstance(tree, dict):
            raise ConfigError(f"{file}: the top level is a {type(tree).__name__}, not a mapping of sections; "
                              f"write sections such as 'llm:' and 'search:' at the start of lines "
                              f"(see the shipped deepsearch.yaml)")
    elif path:
        raise ConfigError(f"config file {file} does not exist")
    layered: dict[str, Any] = {}
    if fast_mode(environ):
        layered.update(FAST_OVERRIDES)
    layered.update(_env_overrides(environ))
    layered.update(overrides or {})
    return _validated(tree, layered, f"{file.name} + overrides")
