"""Secret redaction for exports: the rules (secret_rules.toml) and the engine that applies them."""
