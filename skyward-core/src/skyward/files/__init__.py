"""The user's project files, shipped to every node by content (``Image(includes=...)``).

``patterns`` checks and matches the include and exclude patterns (``.gitignore`` rules
respected); ``manifest`` walks the matches into a frozen, sorted list of (path, sha256,
size, mode); ``sender`` (client) and ``receiver`` (agent) exchange the manifest and the
blobs a node lacks over the pool's CURVE-authenticated control channel, and ``store`` is
the node's content store and the working directory built from it.
"""
