"""What the bridge relays untranslated: legacy clients' sessions (HTTP and stdio) and modern
requests to a modern upstream."""
