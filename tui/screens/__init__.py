"""The terminal app's screens and modal dialogs."""
