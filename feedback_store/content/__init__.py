"""Content stored once: hashes that name their algorithm and the JSON texts the store keeps
(hashing), the large texts of events kept in the blobs table by hash (event_blobs), and what the
model was given, its rendered prompt and token ids in shared chunks (renders)."""
