"""Skyward (and plugins) from a local checkout reach cloud nodes as wheels built once on
the client: ``cache`` builds and keeps them, ``stage`` receives them on a node, and the
client's handshake (``skyward.transport.handshake``) sends them when a node asks."""
