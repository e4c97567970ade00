"""How inbox agents connect: the frames, the websocket consumer, the long-poll endpoints."""
