"""teachback's trainer: base weights, training on exported feedback pairs, serving adapters.

Needs the optional extra `train` (torch 2.13.0, transformers, peft, accelerate, trl). Nothing
outside this package imports it except the command line, lazily, so the agent runs without it.
"""
