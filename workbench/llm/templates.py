"""Prompt templates stored as files in ``workbench/llm/prompts/``.

A template file has a ``[system]`` section and a ``[user]`` section; placeholders use ``string.Template``
syntax (``$goal`` or ``${memory}``), chosen over ``str.format`` because prompts quote JSON and its braces
must stay literal. Rendering is strict both ways: a missing field and an unused field are errors naming
the file and the field, so a template and its stage cannot drift apart silently.
"""

from __future__ import annotations

import json
import re
import string
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

from workbench.llm.errors import LLMConfigError
from workbench.llm.protocol import Message

__all__ = ["PromptTemplate", "load_template", "list_templates", "vocabulary", "PROMPTS_DIR", "VOCABULARY_FILE"]

PROMPTS_DIR = Path(str(resources.files("workbench.llm") / "prompts"))
VOCABULARY_FILE = PROMPTS_DIR / "vocabulary.json"
_SECTION = re.compile(r"^\[(system|user)\]\s*$", re.MULTILINE)


@dataclass(frozen=True)
class PromptTemplate:
    """A parsed template file.

    Attributes:
        name: file stem, e.g. ``reflector_failure``.
        path: the file it came from (for error messages).
        system: system section (string.Template source).
        user: user section (string.Template source).
    """

    name: str
    path: Path
    system: str
    user: str

    @property
    def fields(self) -> frozenset[str]:
        """Every placeholder the template uses."""
        ids: set[str] = set()
        for src in (self.system, self.user):
            ids.update(string.Template(src).get_identifiers())
        return frozenset(ids)

    def render(self, benchmark: str = "alfworld", **fields: str) -> list[Message]:
        """Fill the placeholders and return ``[system, user]`` messages. A placeholder named in the benchmark's
        :func:`vocabulary` (``$agent_kind`` ...) takes the benchmark's words; every other one is a field.

        Raises:
            LLMConfigError: a placeholder has no value, a value has no placeholder, or a field takes a vocabulary
                word's name.
        """
        words = vocabulary(benchmark)
        clash = sorted(fields.keys() & words.keys())
        if clash:
            raise LLMConfigError(f"{self.path}: fields {clash} are vocabulary words of {VOCABULARY_FILE.name}")
        fields = fields | {k: v for k, v in words.items() if k in self.fields}
        missing = sorted(self.fields - fields.keys())
        unused = sorted(fields.keys() - self.fields)
        if missing or unused:
            raise LLMConfigError(f"{self.path}: missing values for {missing}, no placeholder for {unused}")
        sub = {k: str(v) for k, v in fields.items()}
        return [
            Message(role="system", content=string.Template(self.system).substitute(sub).strip()),
            Message(role="user", content=string.Template(self.user).substitute(sub).strip()),
        ]


def _parse(name: str, path: Path, text: str) -> PromptTemplate:
    parts = _SECTION.split(text)
    # split() -> [preamble, "system", body, "user", body]; the preamble is a comment area and is ignored.
    sections = dict(zip(parts[1::2], parts[2::2]))
    if set(sections) != {"system", "user"} or len(parts) != 5:
        raise LLMConfigError(f"{path}: a template needs exactly one [system] and one [user] section, in that order")
    for key, body in sections.items():
        try:
            string.Template(body).substitute({i: "" for i in string.Template(body).get_identifiers()})
        except ValueError as e:
            raise LLMConfigError(f"{path}: [{key}] has a bad placeholder ({e}); write $$ for a literal $") from None
    return PromptTemplate(name=name, path=path, system=sections["system"], user=sections["user"])


@cache
def load_template(name: str, directory: str | None = None) -> PromptTemplate:
    """Load ``prompts/<name>.txt`` (or from ``directory``).

    Raises:
        LLMConfigError: no such template (the message lists the available ones) or a malformed file.
    """
    root = Path(directory) if directory else PROMPTS_DIR
    path = root / f"{name}.txt"
    if not path.is_file():
        raise LLMConfigError(f"no prompt template '{name}' in {root}; available: {list_templates(directory)}")
    return _parse(name, path, path.read_text(encoding="utf-8"))


def list_templates(directory: str | None = None) -> list[str]:
    """Names of the template files available."""
    root = Path(directory) if directory else PROMPTS_DIR
    return sorted(p.stem for p in root.glob("*.txt"))


@cache
def vocabulary(benchmark: str = "alfworld") -> dict[str, str]:
    """The words the prompts use for ``benchmark``'s world (``prompts/vocabulary.json``): what the agent is, the
    examples of a constraint and of a fact about the world, an example memory item. ``scienceworld:none`` is
    ``scienceworld``'s.

    Raises:
        LLMConfigError: the file is unreadable, or names no such benchmark (the message lists those it names).
    """
    try:
        data = json.loads(VOCABULARY_FILE.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise LLMConfigError(f"{VOCABULARY_FILE}: unreadable ({e})") from None
    name = benchmark.partition(":")[0]
    words = data.get(name)
    if not isinstance(words, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in words.items()):
        known = ", ".join(k for k in data if not k.startswith("_"))
        raise LLMConfigError(f"{VOCABULARY_FILE}: no prompt vocabulary for benchmark '{name}' (it has: {known}); "
                             "add one (the words for what its agent is, its constraints and facts, an example item)")
    return dict(words)
