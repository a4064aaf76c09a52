"""A throwaway SSH public key per pool.

Nothing in skyward logs into a node: the agent is reached over CURVE on its own port.
The key exists because Verda's deploy call requires ``ssh_key_ids``. Registering a
public key whose private half is discarded at once satisfies it without giving anyone a
way in; the key is deleted with the pool. ``Verda(ssh_key_ids=[...])`` uses keys of
your own instead (to log in and debug).
"""

from __future__ import annotations


def throwaway_public_key(comment: str) -> str:
    """An OpenSSH ``ssh-ed25519`` public key line; the private key is never kept."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    public = Ed25519PrivateKey.generate().public_key()
    line = public.public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode("ascii")
    return f"{line} {comment}"
