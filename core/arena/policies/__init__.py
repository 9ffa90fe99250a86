"""Policies: the client side of the policy boundary (see :mod:`arena.policies.base`)."""

from arena.policies.adapters import EmbodimentAdapter
from arena.policies.base import PolicyBase, PolicyConfig

__all__ = ["EmbodimentAdapter", "PolicyBase", "PolicyConfig"]
