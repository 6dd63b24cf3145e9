"""The job's command with the crash tests' fault points armed (the job's sink/faults.py): how the
tests and the chaos runner start a job they mean to crash (processes.start_job picks it), and
never how the job runs anywhere else. The job's own command leaves the fault variables alone;
this one arms the points they name, then runs it:

    python -m {{ cookiecutter.package_name }}_tools.armed_job <the job's arguments>         as `python -m {{ cookiecutter.package_name }}`
    python -m {{ cookiecutter.package_name }}_tools.armed_job deploy/main.py <arguments>    as spark-submit's driver runs its file
"""

from __future__ import annotations

import os
import runpy
import sys

from {{ cookiecutter.package_name }}.sink import faults


def main(argv: list[str]) -> int:
    try:
        faults.arm(os.environ)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if argv and argv[0].endswith(".py"):
        sys.argv = argv
        runpy.run_path(argv[0], run_name="__main__")  # the file exits with the job's code
        return 0
    from {{ cookiecutter.package_name }}.cli import main as job

    return job(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
