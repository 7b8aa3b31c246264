"""Who is calling (principals), the requestState key ring, and OAuth pass-through to the upstream's
authorization server."""
