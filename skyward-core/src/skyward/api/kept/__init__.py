"""Pools this machine knows: their records in the skyward home (``record``), the open
pool's entry while a client holds it (``registration``)."""
