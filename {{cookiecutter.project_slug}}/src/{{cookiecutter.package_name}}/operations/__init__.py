"""The operators' commands that look at a job from outside it: `status` (status.py)."""
