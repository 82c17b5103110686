"""`RepoMap`: the ranked map of one repository, kept current incrementally.

Tags live in three layers: in memory (this object), in the shared SQLite cache (other sessions
and earlier runs), and in the source itself (parsed only when the content is new). A render
stats every candidate file; only a file whose size or mtime changed is read, and only a file
whose content hash is new anywhere is parsed.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from agent.config import teachback_home
from agent.languages import language_for_path
from agent.repomap.cache import FileRow, TagCache
from agent.repomap.extract import default_workers, extract_many, extract_one
from agent.repomap.files import list_candidates, wanted
from agent.repomap.rank import FileParts, Graph, build_graph, rank_definitions
from agent.repomap.render import render_map
from agent.repomap.tags import FileTags, Tagger, tag_queries
from agent.safe_write import is_inside

Progress = Callable[[int, int], None]
CACHE_FILE = "repomap.db"


@dataclass(slots=True)
class _Known:
    size: int  # -1 for editor text that is not on disk (kept in memory, never cached)
    mtime_ns: int
    content_hash: str
    query: str  # the tag query's fingerprint: "<language>:<digest>"
    tags: FileTags
    parts: FileParts | None = None  # the graph's view of `tags`, built when first needed

    def graph_parts(self) -> FileParts:
        if self.parts is None:
            self.parts = FileParts.of(self.tags, self.query.split(":", 1)[0])
        return self.parts


@dataclass(frozen=True, slots=True)
class _Read:
    rel: str
    stat: os.stat_result
    data: bytes
    digest: str
    query: str


def content_hash(data: bytes) -> str:
    return "sha1:" + hashlib.sha1(data).hexdigest()


class RepoMap:
    """The repository map of `root`. Thread-safe: an editor may call `update` while an agent
    turn renders in another thread (they take turns)."""

    def __init__(self, root: Path, *, cache_path: Path | None = None, workers: int | None = None) -> None:
        self.root = Path(root).resolve()
        self.parsed_files = 0
        # Processes for a large cold scan; None: one per core (up to 8) when it pays, 1: never.
        self.workers = workers
        self._key = str(self.root)
        self._cache = TagCache(cache_path or teachback_home() / CACHE_FILE)
        self._tagger = Tagger()
        self._known: dict[str, _Known] = {}
        self._editor_text: dict[str, bytes] = {}  # path -> content given to update(path, text)
        self._languages: dict[str, str | None] = {}  # path -> language, None if not read
        self._loaded = False
        self._graph: Graph | None = None
        self._lock = threading.RLock()

    def render(
        self,
        *,
        tokens: int = 1024,
        focus_paths: Iterable[str] = (),
        edited_paths: Iterable[str] = (),
        mentioned: Iterable[str] = (),
        progress: Progress | None = None,
    ) -> str:
        """The map: the best-ranked definitions that fit in about `tokens` tokens."""
        with self._lock:
            return self._render(tokens, focus_paths, edited_paths, mentioned, progress)

    def _render(
        self,
        tokens: int,
        focus_paths: Iterable[str],
        edited_paths: Iterable[str],
        mentioned: Iterable[str],
        progress: Progress | None,
    ) -> str:
        self.scan(progress)
        if self._graph is None:
            self._graph = build_graph({p: k.graph_parts() for p, k in self._known.items()})
        ranked = rank_definitions(
            self._graph,
            focus=self._expand(focus_paths),
            edited=self._expand(edited_paths),
            mentioned=list(mentioned),
        )
        return render_map(ranked, {p: k.tags for p, k in self._known.items()}, tokens, self._source)

    def update(self, path: str, text: str | None = None) -> None:
        """Take `text` as the current content of `path` (an editor buffer), or re-read the disk
        (`text=None`: after a save, a close, or a change made outside the editor)."""
        with self._lock:
            self._update(self._relative(path), text)

    def _update(self, rel: str, text: str | None) -> None:
        self.parsed_files = 0
        language = self._language(rel)
        if language is None or not is_inside(self.root, self.root / rel):  # never map code from outside
            return
        self._load()
        if text is None:
            self._editor_text.pop(rel, None)
            self._refresh_from_disk([rel])
            return
        data = text.encode("utf-8")
        digest = content_hash(data)
        query = tag_queries(language).fingerprint
        known = self._known.get(rel)
        self._editor_text[rel] = data
        if known is not None and known.content_hash == digest and known.query == query:
            return
        tags = self._extract(language, data)
        self.parsed_files = 1
        self._known[rel] = _Known(-1, 0, digest, query, tags)
        self._graph = None

    def scan(self, progress: Progress | None = None) -> None:
        """Bring the tags up to date with the files on disk."""
        with self._lock:
            self._scan(progress)

    def _scan(self, progress: Progress | None) -> None:
        self._load()
        candidates = [p for p in list_candidates(self.root) if self._language(p) is not None]
        listed = set(candidates)
        gone = [p for p in self._known if p not in listed and p not in self._editor_text]
        for path in gone:
            del self._known[path]
        if gone:
            self._graph = None
            self._cache.store(self._key, [], removed=gone)
        self._refresh_from_disk([p for p in candidates if p not in self._editor_text], progress)

    def close(self) -> None:
        self._cache.close()

    def _refresh_from_disk(self, paths: list[str], progress: Progress | None = None) -> None:
        self.parsed_files = 0
        stale = self._stale(paths)
        if not stale:
            return
        rows: list[FileRow] = []
        changed = self._read_changed(stale, rows)
        if changed:
            self._graph = None
            self._adopt(changed, rows, progress)
        self._cache.store(self._key, rows)

    def _stale(self, paths: list[str]) -> list[tuple[str, os.stat_result]]:
        """Paths whose size or mtime differ from what is known (the cheap pre-check)."""
        stale: list[tuple[str, os.stat_result]] = []
        for rel in paths:
            try:
                stat = os.stat(self.root / rel)
            except OSError:
                if self._known.pop(rel, None) is not None:
                    self._graph = None
                continue
            known = self._known.get(rel)
            if (
                known is None
                or known.size != stat.st_size
                or known.mtime_ns != stat.st_mtime_ns
                or known.query != tag_queries(self._language(rel)).fingerprint
            ):
                stale.append((rel, stat))
        return stale

    def _read_changed(self, stale: list[tuple[str, os.stat_result]], rows: list[FileRow]) -> list[_Read]:
        """Read `stale` files: those whose content is known are settled into `rows` (their new
        stat); the others are returned."""
        changed: list[_Read] = []
        for rel, stat in stale:
            try:
                data = (self.root / rel).read_bytes()
            except OSError:
                continue
            query = tag_queries(self._language(rel)).fingerprint
            digest = content_hash(data)
            known = self._known.get(rel)
            if known is not None and known.content_hash == digest and known.query == query:
                # Touched but unchanged, or saved editor text (whose tags are not cached yet).
                text = known.tags.to_json() if known.size < 0 else None
                known.size, known.mtime_ns = stat.st_size, stat.st_mtime_ns
                rows.append(FileRow(rel, stat.st_size, stat.st_mtime_ns, digest, query, text))
            else:
                changed.append(_Read(rel, stat, data, digest, query))
        return changed

    def _adopt(self, changed: list[_Read], rows: list[FileRow], progress: Progress | None) -> None:
        """Tags for `changed` files: from the shared cache when their content is there, else parsed."""
        cached = self._cache.get_tags((f.digest, f.query) for f in changed)
        parse: list[_Read] = []
        done = 0
        for f in changed:
            text = cached.get((f.digest, f.query))
            if text is None:
                parse.append(f)
                continue
            self._known[f.rel] = _Known(f.stat.st_size, f.stat.st_mtime_ns, f.digest, f.query, FileTags.from_json(text))
            rows.append(FileRow(f.rel, f.stat.st_size, f.stat.st_mtime_ns, f.digest, f.query, None))
            done += 1
            if progress is not None:
                progress(done, len(changed))
        jobs = [(self._language(f.rel), f.data) for f in parse]
        extracted = extract_many(jobs, workers=self.workers or default_workers(len(jobs)))
        for f, (tags, text) in zip(parse, extracted):
            self._known[f.rel] = _Known(f.stat.st_size, f.stat.st_mtime_ns, f.digest, f.query, tags)
            rows.append(FileRow(f.rel, f.stat.st_size, f.stat.st_mtime_ns, f.digest, f.query, text))
            self.parsed_files += 1
            done += 1
            if progress is not None:
                progress(done, len(changed))

    def _extract(self, language: str, data: bytes) -> FileTags:
        return extract_one(self._tagger, language, data)

    def _load(self) -> None:
        """Adopt what the shared cache remembers about this root (once per object)."""
        if self._loaded:
            return
        self._loaded = True
        self._cache.prune()
        for row in self._cache.load_root(self._key):
            if row.tags is not None and self._language(row.path) is not None:
                tags = FileTags.from_json(row.tags)
                self._known[row.path] = _Known(row.size, row.mtime_ns, row.content_hash, row.query, tags)

    def _language(self, rel: str) -> str | None:
        if rel not in self._languages:
            self._languages[rel] = language_for_path(rel) if wanted(rel) else None
        return self._languages[rel]

    def _source(self, rel: str) -> bytes | None:
        """The content `rel`'s tags were extracted from; None if it changed since the scan."""
        data = self._editor_text.get(rel)
        if data is None:
            try:
                data = (self.root / rel).read_bytes()
            except OSError:
                return None
        known = self._known.get(rel)
        return data if known is not None and content_hash(data) == known.content_hash else None

    def _expand(self, paths: Iterable[str]) -> list[str]:
        """Known files named by `paths`; a folder names every file under it."""
        wanted_paths = [self._relative(p).rstrip("/") for p in paths]
        exact = {p for p in wanted_paths if p in self._known}
        folders = tuple(f"{p}/" for p in wanted_paths if p not in exact and p not in ("", "."))
        everything = any(p in ("", ".") for p in wanted_paths)
        if everything:
            return sorted(self._known)
        return sorted(exact | {p for p in self._known if folders and p.startswith(folders)})

    def _relative(self, path: str) -> str:
        candidate = Path(path)
        if candidate.is_absolute():
            try:
                return candidate.resolve().relative_to(self.root).as_posix()
            except ValueError:
                return candidate.as_posix()
        return candidate.as_posix().removeprefix("./")
