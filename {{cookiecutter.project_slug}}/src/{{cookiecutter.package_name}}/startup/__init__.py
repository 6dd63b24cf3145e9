"""A start: the checks before and while Spark starts (preflight.py), and where a start's
seconds go (startup.py)."""
