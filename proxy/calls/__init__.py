"""Held calls and what they share: the call driver, the registry, continuations (`requestState`),
recovery, roots affinity, tool schemas and the listen hub."""
