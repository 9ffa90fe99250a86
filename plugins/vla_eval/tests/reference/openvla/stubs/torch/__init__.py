"""Stand-in for torch with the names OpenVLA's deploy.py uses (written for arena's tests)."""

bfloat16 = "bfloat16"


class cuda:  # noqa: N801 - torch.cuda
    @staticmethod
    def is_available():
        return False


def device(name):
    return name
