"""Closed-loop evaluation metrics (pure numpy/scipy): fold rate, semantic events, the paper's
Ctx. Acc., C-SR@95, Geom. and W1. See docs/evaluation.md for every formula and choice."""
