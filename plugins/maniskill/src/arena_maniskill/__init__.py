"""arena-plugin-maniskill."""
