"""What a computation can ask about where it runs."""
