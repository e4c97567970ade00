"""The tamper-evident record's pure parts: canonical entries, hashes, the Merkle tree
(RFC 9162), and the checks anyone can run on an export or a receipt with the hub's JWKS.

No Django, no database: `a2a_core.services.ledger` writes and seals the log,
`a2a_core.services.ledger_audit` checks the database against it."""
