"""Team sharing: what each session's user agreed to share (sharing), where each record came from
(provenance: the agent, the repository's identity, a salted hash of the author), and many people's
stores merged into one team store (merge)."""
