"""`RepoMap`: the ranked map of one repository, kept current incrementally.

Tags live in three layers: in memory (this object), in the shared SQLite cache (other sessions
and earlier runs), and in the source itself (parsed only when the content is new). A render
stats every candidate file; only a file whose size or mtime changed is read, and only a file
whose content hash is new anywhere is parsed.

What a render builds from the tags is cached too: the ranking graph, keyed by the *state* (every
file's path, content hash and query, and the code that lists, ranks and renders), and each map,
keyed by its focus and budget and by the state or by the *listing* (every candidate's path, size
and mtime). A new process on unchanged files lists and stats them, and reads its map back without
loading tags, numpy or a grammar; with another focus it loads the graph instead of rebuilding it,
and the tags of only the files the map shows.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agent.config import teachback_home
from agent.languages import language_for_path
from agent.repomap.cache import FileRow, TagCache, content_hash, listing_key, map_key, state_key
from agent.repomap.extract import default_workers, extract_many, extract_one
from agent.repomap.files import list_candidates, wanted
from agent.repomap.render import render_map
from agent.repomap.tags import FileTags, Tagger, query_fingerprint
from agent.safe_write import is_inside

if TYPE_CHECKING:  # rank imports numpy, which a map read back from the cache does not need
    from agent.repomap.rank import FileParts, Graph

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]
CACHE_FILE = "repomap.db"
Listing = dict[str, "os.stat_result | None"]  # candidate path -> its stat (None: gone since listed)


@dataclass(slots=True)
class _Known:
    size: int  # -1 for editor text that is not on disk (kept in memory, never cached)
    mtime_ns: int
    content_hash: str
    query: str  # the tag query's fingerprint: "<language>:<digest>"
    tags: FileTags | None  # None until needed (remembered from the cache, not yet loaded)
    parts: FileParts | None = None  # the graph's view of `tags`, built when first needed


@dataclass(frozen=True, slots=True)
class _Read:
    rel: str
    stat: os.stat_result
    data: bytes
    digest: str
    query: str


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
        self._state: str | None = None  # hash of the code and of every known file's content
        # Only the first graph this object builds is stored: that one serves the next process,
        # and later ones (after edits) would cost a write per turn that no one reads.
        self._store_graph = True
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
        """The map stored for these files' sizes and mtimes, else (after a scan) the one stored for
        their content, else one drawn now and stored under both."""
        self.parsed_files = 0
        focus_paths, edited_paths = list(focus_paths), list(edited_paths)
        names = sorted(set(mentioned))  # the ranking sees them as a set
        request = json.dumps([self._named(focus_paths), self._named(edited_paths), names, tokens])
        listing = self._listing()
        stats = ((p, s.st_size, s.st_mtime_ns) if s else (p, -1, -1) for p, s in listing.items())
        by_listing = map_key(listing_key(self._key, stats), request)
        # Unsaved editor text stays in memory: no map or graph that shows it is stored.
        keep = not self._editor_text
        text = self._cache.load_map(by_listing) if keep else None
        if text is not None:
            return text  # every file has the size and mtime it had when this map was drawn
        self._scan(progress, listing)
        state = self._state_key()
        text = self._cache.load_map(map_key(state, request)) if keep else None
        if text is None:
            text, complete = self._draw(focus_paths, edited_paths, names, tokens, keep)
            keep = keep and complete
        if keep:
            keys = [map_key(self._state_key(), request)]
            if self._state_key() == state:  # else a file was re-read while drawing: newer than listed
                keys.append(by_listing)
            self._cache.store_map(self._key, keys, text)
        return text

    def _draw(
        self, focus_paths: list[str], edited_paths: list[str], names: list[str], tokens: int, keep: bool
    ) -> tuple[str, bool]:
        """The map, and whether every file it reached still had the content scanned."""
        from agent.repomap.rank import rank_definitions  # numpy: only when no map is stored

        graph = self._ranking_graph(keep)
        focus, edited = self._expand(focus_paths), self._expand(edited_paths)
        ranked = rank_definitions(graph, focus=focus, edited=edited, mentioned=names)
        changed: list[str] = []

        def read(rel: str) -> tuple[bytes, FileTags] | None:
            found = self._shown(rel)
            if found is None:
                changed.append(rel)
            return found

        text = render_map(ranked, tokens, read)
        return text, not changed

    def _state_key(self) -> str:
        if self._state is None:
            self._state = state_key((rel, k.content_hash, k.query) for rel, k in sorted(self._known.items()))
        return self._state

    def _ranking_graph(self, keep: bool) -> Graph:
        """The graph of the known files: in memory, stored for this state, or built (and stored)."""
        from agent.repomap.rank import FileParts, Graph, build_graph

        if self._graph is not None:
            return self._graph
        data = self._cache.load_graph(self._key, self._state_key()) if keep else None
        if data is not None:
            try:
                self._graph = Graph.from_bytes(data)
                return self._graph
            except (ValueError, EOFError, TypeError) as exc:
                log.warning("stored repo map graph unreadable (%s); building it again", exc)
        self._load_all_tags()
        for known in self._known.values():
            if known.parts is None and known.tags is not None:
                known.parts = FileParts.of(known.tags, known.query.split(":", 1)[0])
        self._graph = build_graph({rel: k.parts for rel, k in self._known.items() if k.parts is not None})
        if keep and self._store_graph:
            self._store_graph = False
            self._cache.store_graph(self._key, self._state_key(), self._graph.to_bytes())
        return self._graph

    def _load_all_tags(self) -> None:
        """Tags of every known file, from the cache; a file whose tags are no longer cached is
        read (and parsed) again."""
        missing = [rel for rel, known in self._known.items() if known.tags is None]
        if not missing:
            return
        cached = self._cache.root_tags(self._key)
        lost = []
        for rel in missing:
            known = self._known[rel]
            text = cached.get((known.content_hash, known.query))
            if text is None:
                lost.append(rel)
                del self._known[rel]
            else:
                known.tags = FileTags.from_json(text)
        if lost:
            self._changed()
            self._refresh_from_disk(self._listing(lost))

    def _shown(self, rel: str) -> tuple[bytes, FileTags] | None:
        """The content and tags of a file the map reaches; None if it changed since the scan."""
        source = self._source(rel)
        if source is None:
            return None
        known = self._known[rel]
        if known.tags is None:
            key = (known.content_hash, known.query)
            text = self._cache.get_tags([key]).get(key)
            if text is None:  # gone from the cache (pruned): the source in hand is that content
                self.parsed_files += 1
                known.tags = self._extract(known.query.split(":", 1)[0], source)
            else:
                known.tags = FileTags.from_json(text)
        return source, known.tags

    def _changed(self) -> None:
        """The known files changed: the graph and the state key are out of date."""
        self._graph = None
        self._state = None

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
            self._refresh_from_disk(self._listing([rel]))
            return
        data = text.encode("utf-8")
        digest = content_hash(data)
        query = query_fingerprint(language)
        known = self._known.get(rel)
        self._editor_text[rel] = data
        if known is not None and known.content_hash == digest and known.query == query:
            return
        tags = self._extract(language, data)
        self.parsed_files = 1
        self._known[rel] = _Known(-1, 0, digest, query, tags)
        self._changed()

    def scan(self, progress: Progress | None = None) -> None:
        """Bring the tags up to date with the files on disk."""
        with self._lock:
            self.parsed_files = 0
            self._scan(progress, self._listing())

    def _scan(self, progress: Progress | None, listing: Listing) -> None:
        self._load()
        candidates = [p for p in listing if self._language(p) is not None]
        listed = set(candidates)
        gone = [p for p in self._known if p not in listed and p not in self._editor_text]
        for path in gone:
            del self._known[path]
        if gone:
            self._changed()
            self._cache.store(self._key, [], removed=gone)
        self._refresh_from_disk({p: listing[p] for p in candidates if p not in self._editor_text}, progress)

    def close(self) -> None:
        self._cache.close()

    def _listing(self, paths: Iterable[str] | None = None) -> Listing:
        """`paths` (default: every candidate file) with their stats."""
        listing: Listing = {}
        for rel in list_candidates(self.root) if paths is None else paths:
            try:
                listing[rel] = os.stat(os.path.join(self._key, rel))
            except OSError:
                listing[rel] = None
        return listing

    def _refresh_from_disk(self, listing: Listing, progress: Progress | None = None) -> None:
        stale = self._stale(listing)
        if not stale:
            return
        rows: list[FileRow] = []
        changed = self._read_changed(stale, rows)
        if changed:
            self._changed()
            self._adopt(changed, rows, progress)
        self._cache.store(self._key, rows)

    def _stale(self, listing: Listing) -> list[tuple[str, os.stat_result]]:
        """Paths whose size or mtime differ from what is known (the cheap pre-check)."""
        stale: list[tuple[str, os.stat_result]] = []
        for rel, stat in listing.items():
            if stat is None:
                if self._known.pop(rel, None) is not None:
                    self._changed()
                continue
            known = self._known.get(rel)
            if (
                known is None
                or known.size != stat.st_size
                or known.mtime_ns != stat.st_mtime_ns
                or known.query != query_fingerprint(self._language(rel))
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
            query = query_fingerprint(self._language(rel))
            digest = content_hash(data)
            known = self._known.get(rel)
            if known is not None and known.content_hash == digest and known.query == query:
                # Touched but unchanged, or saved editor text (whose tags are not cached yet).
                text = known.tags.to_json() if known.size < 0 and known.tags is not None else None
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
        """Adopt what the shared cache remembers about this root (once per object); tags are
        loaded when first needed."""
        if self._loaded:
            return
        self._loaded = True
        self._cache.prune()
        for row in self._cache.load_root(self._key):
            if self._language(row.path) is not None:
                self._known[row.path] = _Known(row.size, row.mtime_ns, row.content_hash, row.query, None)

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

    def _named(self, paths: list[str]) -> list[str]:
        """`paths` as `_expand` reads them, for a cache key."""
        return sorted({self._relative(p).rstrip("/") for p in paths})

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
