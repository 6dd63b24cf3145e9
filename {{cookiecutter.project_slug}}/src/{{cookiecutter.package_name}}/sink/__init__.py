from .kafka_sink import SINK_NAME, KafkaSink

__all__ = ["SINK_NAME", "KafkaSink"]
