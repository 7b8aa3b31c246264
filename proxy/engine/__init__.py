"""The engine: `Engine` chooses a route for one modern request (`routes/`) and turns bridge errors
into JSON-RPC errors."""
