"""Test support: a protocol-faithful Dobot V4 controller on loopback."""
