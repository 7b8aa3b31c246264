"""Wire formats: JSON-RPC envelopes and batches, SSE, stdio framing, header values, the JSON codec,
canonical digests and the error hierarchy."""
