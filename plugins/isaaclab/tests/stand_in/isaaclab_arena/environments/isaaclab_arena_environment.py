"""``IsaacLabArenaEnvironment``: a scene, an embodiment and a task (IsaacLab-Arena's interface)."""


class IsaacLabArenaEnvironment:
    def __init__(self, name, scene, embodiment=None, task=None, teleop_device=None, env_cfg_callback=None):
        self.name = name
        self.scene = scene
        self.embodiment = embodiment
        self.task = task
        self.teleop_device = teleop_device
        self.env_cfg_callback = env_cfg_callback
