"""Sessions other coding agents kept on disk (Claude Code and Codex CLI logs, ATIF trajectories),
read into the store as teachback sessions: each log's lines checked (log_lines), turned into the
events of a Trail (trail), and recorded with the recorder's rules plus the pairs only a log shows
(log_pairs); `imports.import_logs` and `atif.import_trajectories` are what the command line calls."""
