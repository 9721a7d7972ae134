"""What Engram knows of the agents it serves."""
