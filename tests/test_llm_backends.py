"""The three backends, for real where this machine allows it.

* embedded llama.cpp: the real 0.5B model
* OpenAI-compatible: a real ``llama_cpp.server`` started here on 127.0.0.1
* Ollama: no Ollama server can run on these machines, so the client path is
  tested against Ollama HTTP exchanges stored in tests/fixtures (see the note there).
"""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import httpx
import pytest
from pydantic import BaseModel
from servers import free_port

from helpers.errors import BackendUnreachableError, ModelNotFoundError
from helpers.models.llama_server import llama_server as serve
from helpers.models.llm import LLM, get_backend
from helpers.models.model_files import ensure_model
from helpers.models.ollama_backend import OllamaBackend
from helpers.models.openai_backend import OpenAIBackend

FIXTURES = json.loads((Path(__file__).parent / "fixtures" / "ollama_exchanges.json").read_text())


class Decomposition(BaseModel):
    queries: list[str]


class RouteItem(BaseModel):
    collection: str
    query: str


class Routing(BaseModel):
    routes: list[RouteItem]


DECOMPOSE = [{"role": "user", "content": (
    "Split the question 'How have The Simpsons changed over time?' into 3 short search queries. "
    'Reply with JSON: {"queries": [...]}')}]


@pytest.mark.slow
def test_embedded_chat_and_accounting(small_backend):
    llm = LLM(small_backend, temperature=0.0, max_tokens=40)
    text = llm.chat([{"role": "user", "content": "Reply with the single word: hello"}], step="greet")
    assert "hello" in text.lower()
    (record,) = llm.ledger.records
    assert record.step == "greet" and record.backend == "llamacpp" and record.model == "qwen2.5-coder-0.5b"
    assert 5 < record.prompt_tokens < 60 and 0 < record.completion_tokens <= 40 and record.seconds > 0
    assert "greet" in llm.ledger.table() and "total" in llm.ledger.table()


@pytest.mark.slow
def test_embedded_streaming_and_stop_give_what_a_plain_call_gives(small_backend):
    """Streamed, the reply arrives in pieces and is the same text as unstreamed (greedy decoding);
    the token counts agree within the stop string's tokens; a stop string ends the reply before it."""
    llm = LLM(small_backend, temperature=0.0, max_tokens=40)
    colours = [{"role": "user", "content": "Name three colours, separated by commas."}]
    plain = llm.chat(colours, step="plain")
    pieces: list[str] = []
    streamed = llm.chat(colours, step="streamed", on_text=pieces.append)
    assert len(pieces) > 2 and "".join(pieces) == streamed == plain
    first, second = llm.ledger.records
    assert abs(first.prompt_tokens - second.prompt_tokens) <= 2
    assert abs(first.completion_tokens - second.completion_tokens) <= 2
    assert "," in plain
    cut = llm.chat(colours, step="stopped", stop=[","], on_text=pieces.append)
    assert cut == plain[: plain.index(",")] and llm.ledger.records[-1].completion_tokens < first.completion_tokens


@pytest.mark.slow
def test_embedded_structured_decomposition_and_routing(small_backend):
    llm = LLM(small_backend, temperature=0.0, max_tokens=200)
    reply = llm.structured(DECOMPOSE, Decomposition, step="decompose")
    assert 1 <= len(reply.value.queries) and all(q.strip() for q in reply.value.queries)
    routing = llm.structured([{"role": "user", "content": (
        "Collections: simpsons_reception (ratings, awards), volcanoes (eruptions). Which collection fits "
        "'Emmy awards won by the show'? Reply as JSON {\"routes\": [{\"collection\": ..., \"query\": ...}]}")}],
        Routing, step="route")
    assert routing.value.routes and routing.value.routes[0].collection
    assert [r.step for r in llm.ledger.records][-1] == "route"


@pytest.mark.slow
def test_checked_grammar_gives_what_the_full_grammar_gives(small_backend):
    """Greedy decoding: checking the grammar on the chosen token only picks exactly the tokens that
    filtering the whole vocabulary picks (llama-cpp-python's own path), and refused tokens are re-picked."""
    from llama_cpp import Llama, LlamaGrammar

    grammar = LlamaGrammar.from_json_schema(json.dumps(Routing.model_json_schema()), verbose=False)
    # a prompt asking for a shape the schema forbids, so the model's favourite tokens get refused
    prompt = small_backend.llama.tokenize(b"<|im_start|>user\nList three volcanoes as a YAML list.<|im_end|>\n"
                                          b"<|im_start|>assistant\n", special=True)
    full = Llama(model_path=str(small_backend.model_path), n_ctx=512, n_threads=small_backend.threads,
                 seed=7, verbose=False)

    def greedy(llama) -> list[int]:
        out = []
        for token in llama.generate(prompt, temp=0.0, repeat_penalty=1.1, grammar=grammar):
            if token == llama.token_eos() or len(out) == 40:
                break
            out.append(token)
        return out

    checked_tokens, full_tokens = greedy(small_backend.llama), greedy(full)
    sampler = small_backend.llama._sampler
    assert checked_tokens == full_tokens and len(checked_tokens) > 5
    assert sampler.refused > 0 and sampler.checked >= len(checked_tokens)
    assert small_backend.llama.detokenize(checked_tokens).decode().lstrip().startswith("{")



@pytest.mark.slow
def test_prompt_cache_starts_a_prompt_from_the_state_of_a_shared_prefix(small_backend, monkeypatch):
    """With ``llm.prompt_cache_mb`` (on by default) a prompt that starts like an earlier one, even with
    another call in between, is read from that call's saved state; saved states carry no logits rows."""
    llama = small_backend.llama
    assert llama.cache is not None, "the prompt cache is on by default"
    rules = ("You answer questions about volcanoes in one short sentence. " * 20).strip()
    llm = LLM(small_backend, temperature=0.0, max_tokens=20)
    llm.chat([{"role": "system", "content": rules}, {"role": "user", "content": "What is lava?"}], step="first")
    llm.chat([{"role": "user", "content": "Reply with the single word: hello"}], step="between")
    loaded = []
    monkeypatch.setattr(llama, "load_state", lambda state, load=llama.load_state: (loaded.append(state), load(state)))
    reply = llm.chat([{"role": "system", "content": rules}, {"role": "user", "content": "What is ash?"}],
                     step="again")
    shared = len(llama.tokenize(rules.encode(), add_bos=False))
    assert len(loaded) == 1 and loaded[0].n_tokens > shared, "the third call starts from the first call's state"
    assert reply.strip() and llm.ledger.records[-1].prompt_tokens > shared  # accounting counts the whole prompt
    assert loaded[0].llama_state_size < 50 * 2**20 and loaded[0].scores.size == llama.n_vocab()


@pytest.fixture(scope="module")
def llama_server():
    with serve(ensure_model("qwen2.5-coder-0.5b"), "small", context_size=4096, threads=2, seconds=60) as base:
        yield base


@pytest.mark.slow
def test_openai_compatible_backend_against_llama_cpp_server(llama_server):
    backend = OpenAIBackend("small", context_size=2048, base_url=llama_server, structured_mode="auto")
    llm = LLM(backend, temperature=0.0, max_tokens=120)
    reply = llm.structured(DECOMPOSE, Decomposition, step="decompose")
    assert reply.value.queries
    # llama_cpp.server answers json_schema with HTTP 500; the backend fell back and remembers it
    assert backend.modes[0] == "json_object"
    assert llm.ledger.records[-1].prompt_tokens > 10
    pieces: list[str] = []
    text = llm.chat([{"role": "user", "content": "Name three colours, separated by commas."}], step="streamed",
                    stop=["\n\n"], on_text=pieces.append)
    assert len(pieces) > 2 and "".join(pieces) == text and "\n\n" not in text
    assert llm.ledger.records[-1].completion_tokens > 0


@pytest.mark.slow
def test_every_strategy_is_evaluated_through_the_server_with_one_and_two_workers(llama_server, small_config,
                                                                                tmp_path):
    """The evaluation through the ``openai`` backend against a real llama.cpp server: two questions of each
    strategy, with 1 and then 2 workers; the rows are complete, the same in count and ids, and every run has
    its trace and its own cost."""
    from helpers.config import PROJECT_ROOT, with_overrides
    from helpers.evaluation.harness import load_questions, prepare_corpus, run_evaluation
    from helpers.evaluation.rows import trace_path
    from helpers.results import Result
    sample = PROJECT_ROOT / "data" / "multihop_sample"
    config = with_overrides(small_config, {
        "llm.provider": "openai", "llm.base_url": llama_server, "llm.model": "small",
        "vector_db.uri": str(tmp_path / "milvus.db"), "pipeline.max_iter": 1, "pipeline.max_calls": 6,
        "agent.max_steps": 3, "agent.token_budget": 5000})
    prepare_corpus(sample / "corpus.json", config)
    questions = load_questions(sample / "questions.json")[:2]
    strategies = ["naive", "chain", "deepsearcher:1", "deepsearch", "oracle"]
    rows = {}
    for workers in (1, 2):
        out = tmp_path / f"workers{workers}"
        summary = run_evaluation(questions, strategies, config, out, progress=False, workers=workers)
        rows[workers] = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
        assert all(summary[spec]["questions"] == 2 for spec in strategies)
        for row in rows[workers]:
            assert row["provider"] == "openai" and row["calls"] >= 1 and row["prompt_tokens"] > 0, row
            trace = Result.load(trace_path(out / "traces", row["strategy"], row["id"]))
            assert trace.trace and trace.usage.calls == row["calls"]      # its own ledger, its own steps
    assert sorted((r["strategy"], r["id"]) for r in rows[2]) == sorted((r["strategy"], r["id"]) for r in rows[1])
    assert len(rows[2]) == len(strategies) * len(questions)


def test_openai_backend_unreachable_says_what_to_do():
    backend = OpenAIBackend("m", context_size=2048, base_url=f"http://127.0.0.1:{free_port()}/v1")
    with pytest.raises(BackendUnreachableError, match="llama_cpp.server"):
        LLM(backend).chat([{"role": "user", "content": "hi"}])


def _replay(exchange: str, seen: list):
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        recorded = FIXTURES[exchange]
        if "response_lines" in recorded:  # a streamed reply: newline-delimited JSON
            return httpx.Response(200, content="".join(json.dumps(line) + "\n" for line in recorded["response_lines"]))
        return httpx.Response(recorded.get("status", 200), json=recorded["response"])
    return httpx.MockTransport(handler)


def test_ollama_client_path_against_recorded_exchange():
    seen: list = []
    backend = OllamaBackend("qwen2.5-coder-0.5b", context_size=4096, host="http://127.0.0.1:11434",
                            transport=_replay("chat_structured", seen))
    llm = LLM(backend, temperature=0.0, max_tokens=256)
    reply = llm.structured(DECOMPOSE, Decomposition, step="decompose")
    assert reply.value.queries == ["Simpsons animation changes", "Simpsons voice cast changes"]
    sent = seen[0]
    expected = FIXTURES["chat_structured"]["request"]
    assert sent["model"] == expected["model"]          # catalogue name mapped to the Ollama tag
    assert sent["options"] == expected["options"]      # num_ctx always sent
    assert sent["format"]["properties"]["queries"]["type"] == "array"  # schema-constrained decoding
    record = llm.ledger.records[0]
    assert (record.prompt_tokens, record.completion_tokens) == (61, 19)


def test_ollama_streamed_reply_and_stop():
    seen: list = []
    backend = OllamaBackend("qwen2.5-coder-0.5b", context_size=4096, transport=_replay("chat_streamed", seen))
    llm = LLM(backend, temperature=0.0, max_tokens=64)
    pieces: list[str] = []
    assert llm.chat([{"role": "user", "content": "Where do the Simpsons live?"}], stop=["."],
                    on_text=pieces.append) == "Springfield, a town"
    assert pieces == ["Spring", "field", ", a", " town"]
    expected = FIXTURES["chat_streamed"]["request"]
    assert seen[0]["stream"] is True and seen[0]["options"] == expected["options"]   # stop sent to the server
    record = llm.ledger.records[0]
    assert (record.prompt_tokens, record.completion_tokens) == (24, 4)              # from the last part


def test_ollama_missing_model_and_unreachable_server():
    backend = OllamaBackend("qwen2.5-coder-0.5b", context_size=4096, transport=_replay("model_missing", []))
    with pytest.raises(ModelNotFoundError, match="ollama pull qwen2.5-coder:0.5b"):
        LLM(backend).chat([{"role": "user", "content": "hi"}])
    dead = OllamaBackend("x", context_size=4096, host=f"http://127.0.0.1:{free_port()}")
    with pytest.raises(BackendUnreachableError, match="ollama serve"):
        LLM(dead).chat([{"role": "user", "content": "hi"}])


def test_missing_gguf_path_names_the_fix(tmp_path):
    from helpers.models.model_files import resolve_gguf
    with pytest.raises(ModelNotFoundError, match="catalogue name"):
        resolve_gguf(str(tmp_path / "nope.gguf"))


def test_the_backend_is_the_one_configured_even_with_an_ollama_server_answering(monkeypatch, small_config,
                                                                                 small_backend):
    class Answering(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b'{"version": "0.5.0"}')

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", free_port()), Answering)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("OLLAMA_HOST", f"http://127.0.0.1:{server.server_port}")
        assert get_backend(small_config.llm) is small_backend and small_backend.name == "llamacpp"
    finally:
        server.shutdown()
    other_seed = get_backend(small_config.llm.model_copy(update={"seed": small_config.llm.seed + 1}))
    assert other_seed is not small_backend   # a backend is kept per seed: the cache never mixes them up


@pytest.mark.slow
def test_the_order_in_which_strategies_run_does_not_change_their_answers(simpsons_kb):
    """Every run in a process shares the model's prompt cache and the key/value state llama.cpp
    reuses, so naive then chain must answer as chain then naive does (greedy, a fresh model each)."""
    from helpers.knowledge.embeddings import get_embedder
    from helpers.models.llamacpp_backend import LlamaCppBackend
    from helpers.models.llm import Budget
    from helpers.strategies.chain import run_chain
    from helpers.strategies.naive import run_naive

    config, store, _ = simpsons_kb
    runs = {"naive": run_naive, "chain": run_chain}

    def answers(order: list[str]) -> dict[str, str]:
        c = config.llm
        backend = LlamaCppBackend(c.model, c.context_size, c.threads, c.seed, c.repeat_penalty, c.prompt_cache_mb)
        return {name: runs[name]("Who voices Homer Simpson?", config, store=store, embedder=get_embedder(
                    config.embedding), llm=LLM(backend, budget=Budget(max_calls=config.chain.max_calls))).short_answer
                for name in order}

    assert answers(["naive", "chain"]) == answers(["chain", "naive"])
