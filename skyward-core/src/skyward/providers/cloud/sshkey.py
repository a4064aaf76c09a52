"""A throwaway SSH public key for clouds that want one on every instance.

DigitalOcean emails a root password (and enables password logins) for a droplet created
without a key; Verda's deploy call requires ``ssh_key_ids``. Registering a public key whose
private half is discarded at once satisfies both without giving anyone a way in; the key
is deleted with the pool. Needs ``cryptography``, which a plugin using this depends on
(skyward-core does not: only a plugin imports this module).
"""

from __future__ import annotations

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat


def throwaway_public_key(comment: str) -> str:
    """An OpenSSH ``ssh-ed25519`` public key line; the private key is never kept."""
    public = Ed25519PrivateKey.generate().public_key()
    line = public.public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode("ascii")
    return f"{line} {comment}"
