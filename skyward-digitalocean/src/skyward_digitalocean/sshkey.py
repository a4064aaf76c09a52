"""A throwaway SSH public key per pool.

Nothing in skyward logs into a node: the agent is reached over CURVE on its own port.
The key exists because a droplet created without one gets a root password that
DigitalOcean emails to the account owner (one email per droplet) and password logins
enabled. Registering a public key whose private half is discarded at once stops both;
the key is deleted with the pool.
"""

from __future__ import annotations


def throwaway_public_key(comment: str) -> str:
    """An OpenSSH ``ssh-ed25519`` public key line; the private key is never kept."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    public = Ed25519PrivateKey.generate().public_key()
    line = public.public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode("ascii")
    return f"{line} {comment}"
