"""The write path's shared state: what the policy counts and remembers between calls (rate
windows, breakers), in the database or in Redis."""
