"""One module per measure; each has ``run(session) -> list[Measurement]``."""
