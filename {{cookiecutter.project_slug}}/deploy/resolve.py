"""spark-submit.sh asks the job where it runs: the master and the checkpoint that the job file,
the environment and the arguments resolve to (the first line and the second), the formats under
a registry its values take (the third: `avro`, `protobuf`, both or `json`, for spark-avro's package
and protobuf-java's), and for Protobuf the job's codec (the fourth: its jar, built if it is not),
so that the script outranks none of them. A bad option ends here, in the job's one line (exit status 2)."""

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
print(" ".join(name for name, used in (("avro", config.uses_avro), ("protobuf", config.uses_protobuf)) if used)
      or "json")
if config.uses_protobuf:
    from {{ cookiecutter.package_name }}.formats.protobuf_jar import codec_jar

    try:
        print(codec_jar())
    except ConfigError as error:
        report_exit(str(error))
        sys.exit(2)
