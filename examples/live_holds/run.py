"""Hold rules compared: Meta-World push-v3's scripted expert served with 16-row chunks (its
end-effector delta repeated: a policy that replans once per chunk), live at s = 8 and simulated
delays d = 0, 2, 4, 6, 8, holding with ``continue_chunk`` (keep moving along the old delta) and
with ``null_action`` (stop the arm, keep the gripper), 20 episodes on seeds 0-19.

CPU ONLY, about 3 minutes on 2 busy cores; needs only arena-core[sim]:

    .venv/bin/python examples/live_holds/run.py [--output-dir DIR] [--task push-v3]

The server is arena's policy server in this process (the chunked expert below); the runs go
through ``arena run``'s machinery (``arena.testing.experiments.run_tiny_experiment``) and the
report's "Success versus delay" section holds one sweep per hold rule. Measured numbers: docs/live.md,
"Where the hold rule changes the answer".
"""

from __future__ import annotations

import argparse
import tempfile

import numpy as np

from arena.models.metaworld_expert import MetaWorldExpertModel
from arena.testing.experiments import run_tiny_experiment, tiny_experiment
from arena.transport.policy_server import PolicyServer


class ChunkedExpert:
    """Meta-World's expert answering chunks: its action repeated ``rows`` times."""

    def __init__(self, rows: int = 16) -> None:
        self.model, self.rows = MetaWorldExpertModel(), rows

    def metadata(self):
        return self.model.metadata()

    def load(self) -> None:
        self.model.load()

    def infer(self, obs):
        action = np.asarray(self.model.infer(obs)["actions"])[:1]
        return {"actions": np.repeat(action, self.rows, axis=0)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--output-dir", default=None)
    parser.add_argument("--task", default="push-v3")
    args = parser.parse_args()
    server = PolicyServer(ChunkedExpert(16), host="127.0.0.1", port=0)
    server.start_in_thread()
    try:
        exp = tiny_experiment({"type": "metaworld_expert_remote", "remote_port": server.port, "open_loop_horizon": 16},
                              task=args.task, episodes=20, max_episode_steps=300, num_envs=2, external_server=True,
                              run="expert")
        exp["runs"]["expert"]["execution"] = {"mode": "live", "execute_horizon": 8}
        exp["matrix"] = {"runs": ["expert"], "axes": {
            "hold": {"key": "execution.hold", "values": {"continue": "continue_chunk", "null": "null_action"}},
            "d": {"key": "execution.delay.steps", "values": {"d0": 0, "d2": 2, "d4": 4, "d6": 6, "d8": 8}}}}
        out = run_tiny_experiment(exp, args.output_dir or tempfile.mkdtemp(prefix="live-holds-"), [])
        for sweep in out.result["delay_sweeps"]:
            for row in sweep["rows"]:
                c = row["vs_nominal"]
                vs = f"{c['difference']:+.2f} [{c['ci95'][0]:+.2f}, {c['ci95'][1]:+.2f}] p_holm {c['p_holm']:.3f}" if c else ""
                print(f"{row['run']:22s} {row['k']:2d}/{row['n']}  {vs}")
        print(f"report: {out.output_dir / 'index.html'}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
