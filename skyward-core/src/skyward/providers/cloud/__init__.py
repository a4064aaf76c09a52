"""Shared pieces for cloud providers that speak HTTP APIs (DigitalOcean, Verda, ...).

Each plugin keeps what is its own (API shapes, naming, offers); what their rules have in
common (which requests may be retried, how the client's public address is found and
checked) lives here so the plugins cannot drift apart.
"""
