"""spark-submit.sh asks the job where it runs: the master and the checkpoint that the job file,
the environment and the arguments resolve to (the first line and the second), and whether its
values are Avro (the third: `avro` or `json`, for spark-avro's package), so that the script
outranks none of them. A bad option ends here, in the job's one line (exit status 2)."""

import sys

from {{ cookiecutter.package_name }}.cli import build_parser, configuration
from {{ cookiecutter.package_name }}.failures import ConfigError
from {{ cookiecutter.package_name }}.observability.logs import report_exit

try:
    config = configuration(build_parser().parse_args(sys.argv[1:]))
except ConfigError as error:
    report_exit(str(error))
    sys.exit(2)
print(config.spark_master)
print(config.checkpoint_location)
print("avro" if config.uses_avro else "json")
