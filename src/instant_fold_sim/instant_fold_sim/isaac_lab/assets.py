import sys; print("assets: not yet written", file=sys.stderr)
