"""The simulator side: imported only in the Python 3.12 worker, where Isaac Lab is installed."""
