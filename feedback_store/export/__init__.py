"""Export: pairs and whole sessions as training files, one record per format (format_table), the
views of a conversation a record carries, the corrections that fit a failed turn's prompt, and
the dataset card. Nothing heavy loads here: the command line reads the format table at start-up."""
