"""stdio upstream sessions: the child process, its session, the keeper, spares and stderr."""
