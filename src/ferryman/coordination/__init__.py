"""What replicas tell each other: live stream events and cancellations."""
