"""The hub as an A2A 1.0 server: the a2a-sdk RequestHandler, card rewriting, the ASGI mount."""
