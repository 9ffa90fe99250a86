"""Empty stand-in for torch: deploy.py imports it, the stubbed model needs none of it."""
