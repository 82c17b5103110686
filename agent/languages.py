"""Tree-sitter languages known to teachback, by file extension.

Grammars come from the per-language packages (offline, no download). Each `Language` is built
once per process and cached.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from pathlib import PurePath

from tree_sitter import Language, Parser


@dataclass(frozen=True)
class LanguageSpec:
    name: str
    module: str
    factory: str = "language"


SPECS: dict[str, LanguageSpec] = {
    "python": LanguageSpec("python", "tree_sitter_python"),
    "javascript": LanguageSpec("javascript", "tree_sitter_javascript"),
    "typescript": LanguageSpec("typescript", "tree_sitter_typescript", "language_typescript"),
    "tsx": LanguageSpec("tsx", "tree_sitter_typescript", "language_tsx"),
    "go": LanguageSpec("go", "tree_sitter_go"),
    "rust": LanguageSpec("rust", "tree_sitter_rust"),
    "java": LanguageSpec("java", "tree_sitter_java"),
    "c": LanguageSpec("c", "tree_sitter_c"),
    "cpp": LanguageSpec("cpp", "tree_sitter_cpp"),
}

EXTENSIONS: dict[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".hpp": "cpp",
    ".hh": "cpp",
    ".hxx": "cpp",
}


def language_for_path(path: str | PurePath) -> str | None:
    """The language name for a file path, or None when teachback has no grammar for it."""
    return EXTENSIONS.get(PurePath(path).suffix.lower())


@functools.cache
def get_language(name: str) -> Language:
    spec = SPECS[name]
    module = importlib.import_module(spec.module)
    return Language(getattr(module, spec.factory)())


def get_parser(name: str) -> Parser:
    """A new parser for `name` (parsers are cheap; languages are cached)."""
    return Parser(get_language(name))
