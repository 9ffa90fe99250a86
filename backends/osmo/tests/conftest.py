"""The OSMO tests' fixtures, for every module here: ``fake_models`` (the fake model plugins'
server tasks registered) and ``fake_osmo`` (a scripted ``osmo`` CLI on PATH), both defined
in :mod:`osmo_testkit` beside the helpers the modules import."""

from osmo_testkit import fake_models, fake_osmo

__all__ = ["fake_models", "fake_osmo"]
