"""Backends for the LLM stages of every method: OpenAI-compatible servers, in-process models and
deterministic offline algorithms, with typed prompts/outputs, structured-output repair and a response cache.

Typical use::

    from workbench.llm import ReflectorInput, get_backend, run_stage
    backend = get_backend("openai", base_url="http://127.0.0.1:8080/v1", model="qwen",
                          api_key_env="OPENAI_API_KEY", cache_dir="runs/llm-cache")
    payload = ReflectorInput(memory=entry, trajectory=traj, expert_plan=plan)
    reflection = run_stage(backend, "reflector_failure", payload).value   # a FailureReflection
    metadata["llm_cache"] = backend.stats()                               # hits / misses / writes

Swap the backend for ``get_backend("offline-alfworld")`` (deterministic ALFWorld rules, for CI) or
``get_backend("local", model="smollm2-135m-instruct")`` (in-process) without touching the caller.
``run_stage`` renders ``prompts/<stage>.txt`` from the typed payload and sends the payload itself as
``context``; model backends read only the messages, offline backends compute from the payload. Either
way the reply goes through the same parsing, validation and one repair retry.
"""

from workbench.llm.cache import CachedBackend, ResponseCache
from workbench.llm.errors import (
    LLMConfigError,
    LLMContextError,
    LLMError,
    LLMOutputError,
    LLMTimeoutError,
    LLMTransportError,
    ToolCallError,
)
from workbench.llm.local import LocalBackend
from workbench.llm.offline import OfflineALFWorldBackend
from workbench.llm.openai_client import OpenAIBackend, OpenAIConfig
from workbench.llm.parsing import (
    extract_json_candidates,
    parse_json_as,
    parse_text_tool_calls,
    validate_tool_calls,
)
from workbench.llm.protocol import (
    Backend,
    ChatResult,
    Message,
    ToolCall,
    ToolSpec,
    as_messages,
)
from workbench.llm.registry import get_backend, list_backends, register_backend
from workbench.llm.scripted import ScriptedBackend
from workbench.llm.stages import (
    Stage,
    get_stage,
    list_stages,
    register_stage,
    render_stage,
    run_stage,
)
from workbench.llm.structured import Parsed, chat_json, chat_tools
from workbench.llm.templates import PromptTemplate, list_templates, load_template
from workbench.llm.tools import format_text_tool_call, text_tool_instructions
from workbench.memory.segment_text import parse_segment_text, segment_text

__all__ = ["Backend", "ChatResult", "Message", "ToolCall", "ToolSpec", "as_messages", "get_backend", "list_backends", "register_backend", "OpenAIBackend", "OpenAIConfig", "LocalBackend", "OfflineALFWorldBackend", "ScriptedBackend", "CachedBackend", "ResponseCache", "Parsed", "chat_json", "chat_tools", "extract_json_candidates", "parse_json_as", "parse_text_tool_calls", "validate_tool_calls", "Stage", "get_stage", "list_stages", "register_stage", "render_stage", "run_stage", "PromptTemplate", "list_templates", "load_template", "format_text_tool_call", "text_tool_instructions", "parse_segment_text", "segment_text", "LLMError", "LLMConfigError", "LLMTransportError", "LLMTimeoutError", "LLMOutputError", "ToolCallError", "LLMContextError"]
