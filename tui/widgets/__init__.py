"""The terminal app's widgets; each one declares the messages it posts."""
