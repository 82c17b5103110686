"""Secret redaction for exports, its parts kept apart as gitleaks keeps its engine from its rules:
the rules (secret_rules.toml, read and compiled by `rules`, with the tests a candidate secret must
pass in `checks`) and the engine that applies them (`redactor.Redactor`, which tries on each text
only what `prefilter` selects and also reads the encoded copies `decode` finds). The commands that
redact (`teachback export`, `stats`, `lessons`) build a Redactor; nothing here prints or parses
arguments."""
