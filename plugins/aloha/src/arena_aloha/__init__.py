"""arena plugin for the ALOHA sim benchmark (gym-aloha): environment ``aloha``, the scripted
policy ``aloha_transfer_cube_expert`` and ``arena aloha setup``."""
