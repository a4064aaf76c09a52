"""Env and secrets on an emulated DigitalOcean pool: the droplets' user-data (readable
through the API and the metadata service) never holds them; the workers do."""

from __future__ import annotations

import os
import secrets

import pytest
from do_support import DropletWorld

import skyward as sky
from skyward_digitalocean import DigitalOcean

pytestmark = pytest.mark.cloud


@sky.compute
def env_of_task() -> tuple[str | None, str | None]:
    return os.environ.get("HF_TOKEN"), os.environ.get("PLAIN")


def test_a_droplet_s_user_data_holds_no_env_value_while_its_tasks_see_them(
    droplets: DropletWorld, do_config: DigitalOcean
) -> None:
    token, plain = f"sekrit-{secrets.token_hex(12)}", f"plain-{secrets.token_hex(6)}"
    fake = droplets.fake
    env = {"HF_TOKEN": sky.Secret(token), "PLAIN": plain}
    with sky.ComputePool(provider=do_config, nodes=1, env=env, display="quiet") as pool:
        assert (env_of_task() >> pool) == (token, plain)
        made = list(fake.droplets.values())
        assert made and all("-m skyward.agent" in d.user_data for d in made)  # the real bootstrap
        # every field of every droplet create the fake recorded: user_data, name, tags...
        recorded = repr(made)
        assert token not in recorded and plain not in recorded
