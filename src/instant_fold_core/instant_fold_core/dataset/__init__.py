"""Episode schema and dataset I/O shared by the simulator, the trainers and the tools."""
