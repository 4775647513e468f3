"""hls stage."""
