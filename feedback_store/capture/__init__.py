"""Other coding agents' sessions recorded live through their hooks: what a hook sends arrives in the
database's inbox (or, while another process holds its write lock, in a queue beside it), and is then
turned into a teachback session with the importers' rules."""
