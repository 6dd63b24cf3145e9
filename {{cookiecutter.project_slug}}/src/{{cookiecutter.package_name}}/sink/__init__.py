from .kafka_sink import AT_LEAST_ONCE, KafkaSink

__all__ = ["AT_LEAST_ONCE", "KafkaSink"]
