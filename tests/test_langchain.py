"""LangChain where it is natural: our chat model and our store inside an LCEL chain give
the same sources as our own naive RAG; the chat model honours stop, reports usage, streams
and decodes structured output under our grammar."""
from __future__ import annotations

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda, RunnablePassthrough
from pydantic import BaseModel
from scripted import StepScriptedBackend

from helpers.errors import InputError, StructuredOutputError
from helpers.knowledge.embeddings import get_embedder
from helpers.knowledge.langchain_retriever import LabRetriever, document_to_hit, hit_to_document
from helpers.knowledge.retrieval import search_collections
from helpers.models.langchain_chat import LabChatModel
from helpers.models.llm import LLM
from helpers.strategies.naive import run_naive

QUESTION = "When did the show switch to digital ink and paint?"


class Year(BaseModel):
    year: int


def test_stop_usage_and_structured_output_go_through_our_model_layer():
    replies = ["Springfield. Then more text", '{"year": 2002}', "no json", "still no"]
    backend = StepScriptedBackend({"langchain": replies})
    chat = LabChatModel(llm=LLM(backend, retries=1))
    message = chat.invoke("Where do the Simpsons live?", stop=[". Then"])
    assert message.content == "Springfield" and message.usage_metadata["output_tokens"] > 0
    assert backend.calls[0]["stop"] == [". Then"]                           # the backend ends the reply
    assert message.usage_metadata["total_tokens"] == chat.llm.ledger.total_tokens
    assert chat.with_structured_output(Year).invoke("Which year?") == Year(year=2002)
    assert backend.calls[-1]["schema"] == Year.model_json_schema()          # decoded under our grammar
    failed = chat.with_structured_output(Year, include_raw=True).invoke("Which year?")
    assert failed["parsed"] is None and isinstance(failed["parsing_error"], StructuredOutputError)
    assert failed["raw"].content == "still no"
    with pytest.raises(InputError):
        chat.with_structured_output({"type": "object"})


class Tokens(BaseCallbackHandler):
    def __init__(self):
        self.tokens: list[str] = []

    def on_llm_new_token(self, token: str, **kwargs) -> None:
        self.tokens.append(token)


def test_stream_yields_the_reply_piece_by_piece_then_its_usage():
    backend = StepScriptedBackend({"langchain": "Homer works at the power plant. Marge paints."})
    chat = LabChatModel(llm=LLM(backend))
    handler = Tokens()
    chunks = list(chat.stream("Where does Homer work?", stop=[" Marge"], config={"callbacks": [handler]}))
    texts = [c.content for c in chunks]
    assert len(texts) > 3 and "".join(texts) == "Homer works at the power plant."
    assert [t for t in handler.tokens if t] == [t for t in texts if t]
    whole = sum(chunks[1:], chunks[0])
    assert whole.content == "Homer works at the power plant." and chunks[-1].content == ""
    assert whole.usage_metadata["total_tokens"] == chat.llm.ledger.total_tokens > 0
    handler = Tokens()                                   # a plain invoke is one unstreamed call
    assert chat.invoke("Again?", config={"callbacks": [handler]}).content and not handler.tokens
    streaming = LabChatModel(llm=LLM(backend), streaming=True)  # LangChain's switch: invoke streams
    message = streaming.invoke("Again?", config={"callbacks": [handler]})
    assert message.content == "".join(handler.tokens) and len(handler.tokens) > 3
    assert message.usage_metadata["output_tokens"] > 0


def test_a_failing_stream_raises_in_the_reading_thread():
    chat = LabChatModel(llm=LLM(StepScriptedBackend({"other step": "x"})))
    with pytest.raises(AssertionError, match="no reply for step 'langchain'"):
        list(chat.stream("Anything?"))


def test_an_lcel_chain_over_our_store_finds_the_same_sources_as_naive_rag(simpsons_kb):
    config, store, _ = simpsons_kb
    embedder = get_embedder(config.embedding)
    retriever = LabRetriever(store=store, embedder=embedder, k=config.search.top_k)
    backend = StepScriptedBackend({"langchain": "In 2002 [1].", "answer": {"asks_for": "a year", "facts": "In 2002 [1]", "answer": "2002",
                                                                         "sources": [1]}})
    prompt = ChatPromptTemplate.from_messages([("user", "Sources:\n{context}\n\nQuestion: {question}")])
    chain = ({"context": retriever | RunnableLambda(lambda docs: "\n".join(d.page_content for d in docs)),
              "question": RunnablePassthrough()} | prompt | LabChatModel(llm=LLM(backend)) | StrOutputParser())
    assert chain.invoke(QUESTION) == "In 2002 [1]."
    documents = retriever.invoke(QUESTION)
    naive = run_naive(QUESTION, config, llm=LLM(backend), store=store, embedder=embedder)
    assert [d.metadata["id"] for d in documents] == [s.chunk_id for s in naive.sources]
    assert documents[0].metadata["title"] and documents[0].metadata["similarity"] > 0.3


def test_a_retrieved_document_gives_back_its_hit(simpsons_kb):
    config, store, _ = simpsons_kb
    hit = search_collections(store, get_embedder(config.embedding), QUESTION, store.list_collections(), k=1)[0]
    assert document_to_hit(hit_to_document(hit)) == hit
