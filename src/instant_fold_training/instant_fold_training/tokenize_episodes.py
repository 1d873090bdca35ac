"""CLI: tokenise an episode store with a saved cloth tokenizer (see `instant_fold_core.policy.tokenize_episodes`)."""

from instant_fold_core.policy.tokenize_episodes import main

if __name__ == "__main__":
    raise SystemExit(main())
