"""Recording: the recorder that writes each event as a session emits it, the one way a host
attaches it, the feedback pairs and reward-hacking flags built as it goes, and the model calls'
renders. Other coding agents' logs are read by feedback_store.importers."""
