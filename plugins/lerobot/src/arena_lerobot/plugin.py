"""Entry point ``lerobot`` of group ``arena``: LeRobot serving, the PushT environment, the
LeRobot environment bridge, the LeRobot embodiment adapters, export.

- serving (``arena_lerobot.model``, ``.policy``, ``.servertask``): ``arena serve lerobot``,
  the policy ``lerobot_remote``;
- PushT (``arena_lerobot.pusht``): the environment ``pusht`` and its scripted expert;
- the environment bridge (``arena_lerobot.bridge``): ``lerobot_env``;
- embodiment adapters (``arena_lerobot.adapters``): family ``lerobot``;
- ``arena export lerobot`` (``arena_lerobot.export``): recorded episodes as a LeRobotDataset;
- ``arena pusht setup`` and ``arena lerobot setup``: the aliases of ``arena venv setup pusht``
  and ``arena venv setup lerobot`` (docs/commands.md: "each one's alias").
"""

from arena.declare import VenvGroup, declare

declare(
    __name__,
    servers={"lerobot": "arena_lerobot.model:LeRobotModel"},
    policies={
        "lerobot_remote": "arena_lerobot.policy:LeRobotRemotePolicy",
        "pusht_expert": "arena_lerobot.pusht.expert:PushTExpert",
    },
    server_tasks={"lerobot_remote": "arena_lerobot.servertask:lerobot_server_task"},
    environments={
        "pusht": "arena_lerobot.pusht.env:PushTEnvironment",
        "lerobot_env": "arena_lerobot.bridge:LeRobotEnvironment",
    },
    adapters={"lerobot": "arena_lerobot.adapters:ADAPTERS"},
    exporters={"lerobot": "arena_lerobot.exportcli:export_lerobot"},
    commands={
        "pusht": VenvGroup("arena_lerobot.pusht.venv:VENV", "The PushT benchmark (gym-pusht): its venv."),
        "lerobot": VenvGroup("arena_lerobot.venv:LEROBOT_VENV", "LeRobot's model venv (arena serve lerobot, lerobot_env)."),
    },
)
