"""Fake cloud APIs: stateful HTTP servers on loopback that the provider tests talk to."""
