"""arena's Slurm launch backend: ``arena run exp.yaml --backend slurm``."""

__version__ = "0.1.0"
