"""Running the job: start-up checks, supervision and restarts, outages, progress, the driver's
heartbeat, status, metrics and logs."""
