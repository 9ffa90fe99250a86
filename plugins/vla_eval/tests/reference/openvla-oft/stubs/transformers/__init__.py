"""Stand-in for transformers: the two names deploy.py imports (unused once the model is stubbed)."""


class AutoModelForVision2Seq:
    pass


class AutoProcessor:
    pass
