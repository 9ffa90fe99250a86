"""``python3 -m arena_tao_cosmos_reason.remote_probe``: the compute-frame inspector."""

from arena_tao_cosmos_reason.remote_inspection import probe_main

if __name__ == "__main__":
    probe_main()
