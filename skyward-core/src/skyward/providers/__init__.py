"""Providers: where nodes come from. Local is in core; clouds are plugins."""
