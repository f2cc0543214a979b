"""What Skiff refuses, in one place: topic names, produce limits."""
