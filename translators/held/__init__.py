"""The held call: its sans-I/O machine, events and transition table, push batching and accounting,
`requestState` sealing and the recovery policy."""
