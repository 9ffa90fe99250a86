"""arena plugin wiring: registers the ``arena cosmos-reason`` command group."""

from arena.declare import declare

declare(__name__, commands={"cosmos-reason": "arena_tao_cosmos_reason.cli:app"})
