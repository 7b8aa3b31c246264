"""Streamable HTTP upstream sessions: the session, one call's exchange, the GET channel, replies,
streams and the wire."""
