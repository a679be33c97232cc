"""Prompt prefix reuse for the embedded model: skip re-reading the start a prompt shares with an earlier one.

Most of a step's prompt is the same from call to call (the instructions of the chain's plan,
the agent's action rules); only the end changes (the question, the passages).  llama.cpp keeps
the key/value state of the tokens it has read, but llama-cpp-python only reuses what the
*previous* call left in the context.  With a prompt cache (``llm.prompt_cache_mb``) the state
after each call is kept in RAM, and a new prompt starts from the saved state that shares its
longest prefix: the plan prompt of the next question skips its ~550 tokens of instructions
even after a dozen other calls.

``LightStateLlama.save_state`` leaves out the logits rows the library copies into every saved
state (up to 300 MB with a 150k-token vocabulary): with ``logits_all`` off nothing reads them
back, so a state is only the model's key/value cache for the tokens read (~29 kB a token for
the 1.5B model).
"""
from __future__ import annotations

import ctypes

import llama_cpp
import numpy as np
from llama_cpp import Llama, LlamaRAMCache
from llama_cpp.llama import LlamaState


class LightStateLlama(Llama):
    """A ``Llama`` whose saved states hold no logits rows (unless ``logits_all`` needs them)."""

    def save_state(self) -> LlamaState:
        if self._logits_all:
            return super().save_state()
        size = llama_cpp.llama_state_get_size(self._ctx.ctx)
        buffer = (ctypes.c_uint8 * size)()
        written = int(llama_cpp.llama_state_get_data(self._ctx.ctx, buffer, size))
        return LlamaState(input_ids=self.input_ids.copy(), scores=np.zeros((1, self.n_vocab()), dtype=np.single),
                          n_tokens=self.n_tokens, llama_state=ctypes.string_at(buffer, written),
                          llama_state_size=written, seed=self._seed)


def use_prompt_cache(llama: Llama, megabytes: int) -> None:
    """Keep the states of recent calls (at most ``megabytes`` of them, oldest dropped first); 0 turns it off."""
    llama.set_cache(LlamaRAMCache(capacity_bytes=megabytes << 20) if megabytes > 0 else None)
