"""Real serving engines as the reference: published benchmark runs replayed on roofline's model (`public`)."""
