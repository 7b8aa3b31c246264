"""Era translation: revisions and eras, capabilities, the modern request's validation ladder, and
requests, results, pushes and notifications mapped between eras."""
