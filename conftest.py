import os

# Headless MuJoCo for every test process and the subprocesses they start.
os.environ.setdefault("MUJOCO_GL", "osmesa")
os.environ.setdefault("PYOPENGL_PLATFORM", "osmesa")
