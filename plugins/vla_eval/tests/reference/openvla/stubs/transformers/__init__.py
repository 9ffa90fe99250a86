"""Stand-in for transformers' AutoClasses as OpenVLA's deploy.py calls them (written for arena's
tests): the processor saves what it is given (``$OPENVLA_STUB_CAPTURE/<n>.npy`` the image as
uint8 HWC, ``<n>.txt`` the prompt); the model answers ``[0.01 * n, 0, 0, 0, 0, 0, 1.0]`` and
refuses an ``unnorm_key`` its norm_stats lack, as OpenVLA's ``predict_action`` does."""

import os
from pathlib import Path

import numpy as np


class _Inputs(dict):
    def to(self, *args, **kwargs):
        return self


class _Processor:
    def __init__(self):
        self.calls = 0

    def __call__(self, prompt, image):
        self.calls += 1
        capture = Path(os.environ["OPENVLA_STUB_CAPTURE"])
        np.save(capture / f"{self.calls}.npy", np.asarray(image))
        (capture / f"{self.calls}.txt").write_text(prompt)
        return _Inputs(n=self.calls)


class _Vla:
    norm_stats = {"libero_spatial": {}, "libero_object": {}, "libero_goal": {}, "libero_10": {}}

    def to(self, device):
        return self

    def predict_action(self, n, unnorm_key=None, do_sample=False):
        if unnorm_key not in self.norm_stats:
            raise AssertionError(f"unnorm_key {unnorm_key!r} not in norm_stats")
        action = np.zeros(7)
        action[0], action[-1] = 0.01 * n, 1.0
        return action


class AutoProcessor:
    @staticmethod
    def from_pretrained(path, **kwargs):
        return _Processor()


class AutoModelForVision2Seq:
    @staticmethod
    def from_pretrained(path, **kwargs):
        return _Vla()
