"""skyward-digitalocean: DigitalOcean provider (droplets, GPU droplets)."""
