from .kafka_source import SOURCE_NAME, KafkaSource

__all__ = ["SOURCE_NAME", "KafkaSource"]
