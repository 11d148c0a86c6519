"""In-process backend over any model ``workbench.models.load_model`` returns (or any HF causal LM).

Decoding is our own short loop instead of ``generate``: greedy or temperature sampling from a private
``torch.Generator`` seeded per call, so the same seed gives the same text regardless of what else used the
global RNG, and the loop is the same for a tiny random test model and the real SmolLM2.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from workbench.llm.errors import LLMConfigError, LLMContextError
from workbench.llm.protocol import ChatResult, Message, ToolSpec, as_messages
from workbench.llm.tools import json_tool_instructions, text_tool_instructions, tool_calls_from_json
from workbench.models import load_model

__all__ = ["LocalBackend"]


def _with_system_addendum(messages: list[Message], addendum: str) -> list[dict[str, str]]:
    wire = [{"role": m.role if m.role != "tool" else "user", "content": m.content} for m in messages]
    if not addendum:
        return wire
    if wire and wire[0]["role"] == "system":
        wire[0] = {"role": "system", "content": f"{wire[0]['content']}\n\n{addendum}"}
    else:
        wire.insert(0, {"role": "system", "content": addendum})
    return wire


class LocalBackend:
    """:class:`~workbench.llm.protocol.Backend` running a causal LM in this process.

    Args:
        lm: an object with ``hf_model``, ``tokenizer`` and ``name`` (what ``load_model`` returns).
        hf_model: the ``transformers`` model given separately (e.g. a tiny test model), with ``tokenizer`` and
            ``model_name``.
        tokenizer: its tokenizer.
        model_name: its name.

        constrain: decode under the reply's JSON schema (llguidance, :mod:`workbench.llm.grammar`): a structured
            stage's schema, or for a tool stage the schema of a list of calls of its tools
            (:func:`~workbench.llm.tools.tool_calls_schema`). False: the schema or the tools are only described in
            the system prompt (tools answered in the text form), as for a model behind a server without schemas.

    The schema (or the tools) is described in the system prompt either way, and the caller validates the reply.
    """

    name = "local"

    def __init__(self, lm: Any = None, *, hf_model: Any = None, tokenizer: Any = None,
                 model_name: str | None = None, constrain: bool = True) -> None:
        self.hf_model = hf_model if hf_model is not None else getattr(lm, "hf_model", None)
        self.tokenizer = tokenizer if tokenizer is not None else getattr(lm, "tokenizer", None)
        if self.hf_model is None or self.tokenizer is None:
            raise LLMConfigError("LocalBackend needs a loaded model: pass lm=load_model(name) or hf_model= and "
                                 "tokenizer=")
        self.model = model_name or getattr(lm, "name", None) or type(self.hf_model).__name__
        self.n_ctx = int(getattr(lm, "n_ctx", 0) or getattr(self.hf_model.config, "max_position_embeddings", 0)
                         or 2048)
        self.stats: dict[str, int] = {"calls": 0, "generated_tokens": 0}
        self.constrain = bool(constrain)
        self._decoder: Any = None

    @property
    def tool_reply(self) -> str:
        """``json`` when tool calls are decoded as one JSON object (constrained), else ``text``."""
        return "json" if self.constrain else "text"

    @property
    def mode(self) -> str:
        """How replies are shaped: ``grammar:llguidance`` (constrained) or ``prompt`` (described only)."""
        from workbench.llm.grammar import GRAMMAR_ENGINE

        return f"grammar:{GRAMMAR_ENGINE}" if self.constrain else "prompt"

    def _schema_run(self, schema: dict) -> Any:
        from workbench.llm.grammar import SchemaDecoder

        if self._decoder is None:
            self._decoder = SchemaDecoder(self.tokenizer)
        return self._decoder.start(schema)

    @classmethod
    def from_name(cls, model: str, **load_kwargs: Any) -> LocalBackend:
        """Load ``model`` with ``workbench.models.load_model`` (offline, CPU) and wrap it."""
        return cls(load_model(model, **load_kwargs))

    def cache_identity(self) -> dict[str, Any]:
        return {"n_ctx": self.n_ctx, "mode": self.mode}

    def _stop_ids(self) -> set[int]:
        tok = self.tokenizer
        ids = {tok.eos_token_id} if tok.eos_token_id is not None else set()
        for special in ("<|im_end|>", "<|eot_id|>", "<|endoftext|>"):
            tid = tok.convert_tokens_to_ids(special) if special in tok.get_vocab() else None
            if isinstance(tid, int):
                ids.add(tid)
        return ids

    def chat(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] | None = None,
        schema: type[BaseModel] | None = None,
        temperature: float = 0.0,
        max_tokens: int = 512,
        seed: int | None = None,
        context: Mapping[str, Any] | None = None,  # noqa: ARG002 -- a real model reads the prompt only
    ) -> ChatResult:
        """Generate one reply with the tokenizer's chat template (see the Backend protocol)."""
        import torch

        addendum, shape = (text_tool_instructions(tools), None) if tools else ("", None)
        if tools and self.constrain:
            addendum, shape = json_tool_instructions(tools)
        elif schema is not None and not tools:
            shape = schema.model_json_schema()
            addendum = "Reply with only one JSON object matching this JSON schema:\n" + json.dumps(shape,
                                                                                                   sort_keys=True)
        grammar = self._schema_run(shape) if self.constrain and shape is not None else None
        wire = _with_system_addendum(as_messages(messages), addendum)
        prompt = self.tokenizer.apply_chat_template(wire, tokenize=False, add_generation_prompt=True)
        device = next(self.hf_model.parameters()).device
        ids = self.tokenizer(prompt, return_tensors="pt", add_special_tokens=False)["input_ids"].to(device)
        n_prompt = int(ids.shape[1])
        if n_prompt + max_tokens > self.n_ctx:
            raise LLMContextError("request", f"{self.model}: prompt of {n_prompt} tokens + max_tokens={max_tokens} "
                                  f"exceeds n_ctx={self.n_ctx}; shorten the prompt or lower max_tokens")
        gen = torch.Generator().manual_seed(0 if seed is None else int(seed))
        stop, out, finish = self._stop_ids(), [], "length"
        past, step_ids = None, ids
        with torch.no_grad():
            for _ in range(max_tokens):
                res = self.hf_model(input_ids=step_ids, past_key_values=past, use_cache=True)
                past = res.past_key_values
                logits = res.logits[0, -1].float()  # [d_vocab]
                if grammar is not None:
                    grammar.mask(logits)
                    if grammar.may_end:  # the grammar's end is the model's end of turn
                        for t in stop:
                            logits[t] = res.logits[0, -1, t].float()
                if temperature > 0:
                    probs = torch.softmax(logits / temperature, dim=-1)
                    nxt = int(torch.multinomial(probs, 1, generator=gen))
                else:
                    nxt = int(torch.argmax(logits))
                if nxt in stop:
                    finish = "stop"
                    break
                out.append(nxt)
                if grammar is not None:
                    grammar.advance(nxt)
                    if grammar.done:  # the object is closed: nothing but the end may follow
                        finish = "stop"
                        break
                step_ids = torch.tensor([[nxt]], device=device)
        self.stats["calls"] += 1
        self.stats["generated_tokens"] += len(out)
        text = self.tokenizer.decode(out, skip_special_tokens=True)
        calls = tool_calls_from_json(text) if tools and self.constrain else None
        if calls:  # the calls travel as tool calls; an empty list stays as its JSON text (an explicit no call)
            text = ""
        return ChatResult(text=text, tool_calls=tuple(calls or ()), finish_reason=finish, backend=self.name,
                          model=self.model,
                          usage={"prompt_tokens": n_prompt, "completion_tokens": len(out)})
