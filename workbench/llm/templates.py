"""Prompt templates stored as files in ``workbench/llm/prompts/``.

A template file has a ``[system]`` section and a ``[user]`` section; placeholders use ``string.Template``
syntax (``$goal`` or ``${memory}``), chosen over ``str.format`` because prompts quote JSON and its braces
must stay literal. Rendering is strict both ways: a missing field and an unused field are errors naming
the file and the field, so a template and its stage cannot drift apart silently.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

from workbench.llm.errors import LLMConfigError
from workbench.llm.protocol import Message

__all__ = ["PromptTemplate", "load_template", "list_templates", "PROMPTS_DIR"]

PROMPTS_DIR = Path(str(resources.files("workbench.llm") / "prompts"))
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

    def render(self, **fields: str) -> list[Message]:
        """Fill the placeholders and return ``[system, user]`` messages.

        Raises:
            LLMConfigError: a placeholder has no value, or a value has no placeholder.
        """
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
