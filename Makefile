# The two fresh-machine commands of the README. Each sets up what it needs first.
.PHONY: quickstart test test-fast setup

quickstart:  ## set up, then run the Meta-World quickstart on this machine's CPU
	scripts/setup-env.sh
	.venv/bin/arena run examples/quickstart.yaml $(ARGS)

test:  ## set up, then run the whole test suite (slow tests included)
	scripts/setup-env.sh test
	.venv/bin/python -m pytest $(ARGS)

test-fast:  ## the suite without tests marked slow
	scripts/setup-env.sh test
	.venv/bin/python -m pytest -m "not slow" $(ARGS)
