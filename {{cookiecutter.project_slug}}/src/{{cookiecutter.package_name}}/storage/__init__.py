"""The checkpoint's storage: its files through pyarrow (files.py), a checkpoint on S3
(object_store.py), Spark's checkpoint read (checkpoint.py), and a running driver's presence
in it with the stop requests to it (driver_presence.py)."""
