"""Lessons: recorded failures and their fixes distilled per situation, and found again (scoped by
repository) for the next session's prompt and guards."""
