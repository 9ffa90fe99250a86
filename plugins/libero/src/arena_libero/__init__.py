"""arena plugin for the LIBERO benchmark: the ``libero`` environment, a scripted expert, its venv."""
