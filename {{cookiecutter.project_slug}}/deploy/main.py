"""spark-submit's entry point: the same as `python -m {{ cookiecutter.package_name }} <arguments>`, as a file."""

import sys

from {{ cookiecutter.package_name }}.cli import main

sys.exit(main(sys.argv[1:]))
