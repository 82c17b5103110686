"""Recording: the recorder that writes each event as a session emits it, the one way a host
attaches it, the feedback pairs and reward-hacking flags built as it goes, the model calls'
renders, and sessions imported from other coding agents' logs."""
