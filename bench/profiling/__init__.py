"""Tools to find where Skyward's time goes: a cross-process stage tracer and py-spy runs."""
