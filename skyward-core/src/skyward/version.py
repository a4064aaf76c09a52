"""The version of skyward-core, in a module of its own: the node's agent reports it to the
client, and reading it from the ``skyward`` package would make the agent depend, for
import-linter, on everything the package re-exports."""

__version__ = "0.1.0"
