"""Entry point ``aloha`` of group ``arena``: the environment, the scripted expert, ``arena aloha``."""

from arena.declare import VenvGroup, declare

declare(
    __name__,
    environments={"aloha": "arena_aloha.env:AlohaEnvironment"},
    policies={"aloha_transfer_cube_expert": "arena_aloha.expert:AlohaTransferCubeExpert"},
    commands={"aloha": VenvGroup("arena_aloha.venv:VENV", "The ALOHA sim benchmark (gym-aloha): its venv.")},
)
