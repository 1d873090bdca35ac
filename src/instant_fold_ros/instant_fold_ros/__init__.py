"""ROS adapters shared by the Instant-Fold nodes.

Nodes stay thin: they translate messages to numpy with `conversions` (which validates shapes,
dtypes and values and names the offending field) and hand the arrays to instant_fold_core.
"""
