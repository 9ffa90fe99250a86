# The two fresh-machine commands of the README. Each sets up what it needs first.
.PHONY: quickstart test test-fast setup

# Test processes side by side (pytest-xdist); conftest.py keeps each module, and each shared
# real system, on one of them. Three on two cores: a third of the suite's test time is spent
# waiting (Slurm, sockets, servers starting), and a third process fills it. TEST_WORKERS=0 runs
# the suite in one process.
TEST_WORKERS ?= 3
PYTEST = .venv/bin/python -m pytest -n $(TEST_WORKERS) --dist loadscope --junitxml=.pytest_cache/arena-junit.xml
# After every suite, pass or fail: wall and CPU time per directory and plugin, the slowest tests.
PROFILE = .venv/bin/python scripts/test_profile.py .pytest_cache/arena-junit.xml

quickstart:  ## set up, then run the Meta-World quickstart on this machine's CPU
	scripts/setup-env.sh
	.venv/bin/arena run examples/quickstart.yaml $(ARGS)

test:  ## set up, then run the whole test suite (slow tests included)
	scripts/setup-env.sh test
	$(PYTEST) $(ARGS); status=$$?; $(PROFILE); exit $$status

test-fast:  ## the suite without tests marked slow
	scripts/setup-env.sh test
	$(PYTEST) -m "not slow" $(ARGS); status=$$?; $(PROFILE); exit $$status
