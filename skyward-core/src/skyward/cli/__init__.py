"""The ``skyward`` command: what pools left on every installed provider, removing it,
offers, and a check of the set-up. The command itself lives in :mod:`skyward.cli.app`
(imported only when the command runs); the values a provider plugin gives it are the
provider contract's (:mod:`skyward.providers.resources`, :mod:`skyward.providers.offers`)."""
