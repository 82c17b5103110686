"""The floor under every package: small helpers that more than one package needs (SQLite waits,
diffs, text shortening, progress bars). It imports nothing of teachback's, so every package may
import it without bending the layering of the others."""
