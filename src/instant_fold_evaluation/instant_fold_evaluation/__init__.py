"""Instant-Fold evaluation: the paper's metrics (`events`, `metrics`) and ours (`grasps`), the oracle
bank, benchmark specs, closed-loop rollouts (`closed_loop`), tables (`scoring`), the `evaluate` CLI,
and the offline checks of a trained policy (`offline`, `arm_sensitivity`, the `evaluate_policy` CLI)."""
