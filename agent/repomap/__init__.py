"""The repository map: ranked definitions of a repository, fitted to a token budget.

repo_map = RepoMap(root)            # one per session; tags cached in $TEACHBACK_HOME
text = repo_map.render(tokens=1024, focus_paths=open_files, edited_paths=edited,
                       mentioned=identifiers_in(instruction))
repo_map.update(path, text)         # an editor buffer changed (text=None: re-read the disk)
"""

from agent.repomap.mentions import identifiers_in, split_focus
from agent.repomap.render import estimate_tokens
from agent.repomap.repomap import RepoMap

__all__ = ["RepoMap", "estimate_tokens", "identifiers_in", "split_focus"]
