"""Stand-in for OFT's experiments/robot/robot_utils.py (written for arena's tests)."""


def get_image_resize_size(cfg):
    return 224  # MODEL_IMAGE_SIZES["openvla"] (robot_utils.py l.32-35)
