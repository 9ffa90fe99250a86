"""arena's NVIDIA OSMO launch backend: experiments as OSMO workflows (``--backend osmo``)."""

__version__ = "0.1.0"
