"""Message serialization: the encode stage on the publisher's CPU."""
