"""teachback for Harbor (harborframework.com): `teachback_harbor.agent:Teachback` is the installed
agent Harbor loads by import path. This package imports Harbor, so it is imported only where Harbor
is installed (Python 3.12 or newer), never by teachback itself."""
