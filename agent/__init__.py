"""teachback's agent core: protocol, session loop, model adapter, tools and workspace."""
