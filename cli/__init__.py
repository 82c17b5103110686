"""The `teachback` command (cli.entry): the composition root, the one package that wires the
others together. Importing it imports nothing else, so a command's module loads only its own needs."""
