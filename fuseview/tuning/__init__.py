"""Measured fusion decisions (`fuseview tune`): keep only what makes the model faster where it runs."""
