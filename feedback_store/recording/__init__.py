"""Recording: the recorder that writes each event as a session emits it, the one way a host
attaches it, and the feedback pairs and reward-hacking flags built as it goes. What the model was
given is stored by feedback_store.content.renders; other agents' logs are read by feedback_store.importers."""
