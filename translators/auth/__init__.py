"""Pure OAuth pass-through (challenges, Protected Resource Metadata, public URLs) and the proof
that a forwarded retry comes from a replica."""
