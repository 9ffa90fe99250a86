"""arena-plugin-lerobot."""
