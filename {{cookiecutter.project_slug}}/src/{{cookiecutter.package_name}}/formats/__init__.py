"""The formats of the job's Kafka values: JSON (pipeline/parsing.py), or Avro or Protobuf in a
schema registry's wire format (a magic byte 0, the schema id in 4 bytes, big-endian, then the Avro
body, or the message indexes and the Protobuf message), decoded and encoded in the JVM
(avro_input.py, avro_output.py; protobuf_input.py, protobuf_output.py and the job's codec,
protobuf_codec/) with the writer schemas the registry gives (registry.py). The dead-letter topic
and the sink's markers keep their own JSON."""
