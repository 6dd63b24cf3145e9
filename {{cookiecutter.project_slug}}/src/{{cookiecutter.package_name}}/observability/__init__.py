"""What the job tells: its log (logs.py) and the sink's metrics (metrics.py). The bottom
layer: nothing here imports the rest of the job but its errors."""
