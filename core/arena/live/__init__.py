"""Live (latency-aware) execution: the simulator keeps its clock while the model thinks.

``execution: {mode: live, ...}`` on a run (:class:`arena.live.config.ExecutionConfig`) wraps
its policy in :class:`arena.live.policy.LivePolicy`. Per env it requests an action chunk,
executes the environment's declared **hold** rule for the ``d`` control steps the request is
in flight, then the new chunk from row ``d``, and requests again after ``execute_horizon``
steps (Real-Time Chunking's evaluation protocol, Black et al. 2025, arXiv 2506.07339).
``d`` is simulated (fixed or drawn per request from a seeded distribution; reproducible on any
machine) or measured (the simulator paced by the wall clock at ``control_hz``, requests in
flight on a background thread). Modules: :mod:`~arena.live.config` (the run's section),
:mod:`~arena.live.schedule` (which action runs at each step, pure), :mod:`~arena.live.chunks`
(how a chunk is obtained from any policy), :mod:`~arena.live.policy` (the wrapper the rollout
drives), :mod:`~arena.live.episode_stats` (per-episode records).
"""
