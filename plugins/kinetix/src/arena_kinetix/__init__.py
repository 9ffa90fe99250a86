"""arena plugin for Kinetix (kinetix-env 3.0.2): environment ``kinetix`` and its baselines."""
