"""arena's Ray launch backend (``launch: {backend: ray}``)."""

__version__ = "0.1.0"
