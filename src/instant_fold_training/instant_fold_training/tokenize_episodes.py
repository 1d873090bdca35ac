"""`python -m instant_fold_training.tokenize_episodes`: tokenise an episode store with a saved cloth
tokenizer.

The one command path of this CLI (also the `tokenize_episodes` console script); its arguments and
logic are `instant_fold_core.policy.tokenize_episodes.main`, kept in the core so the core's tests
drive it without this package.
"""

from instant_fold_core.policy.tokenize_episodes import main

if __name__ == "__main__":
    raise SystemExit(main())
