"""Content stored once: hashes that name their algorithm and the JSON texts the store keeps
(hashing), and the large texts of events kept in the blobs table by hash (event_blobs)."""
