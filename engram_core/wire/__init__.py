"""The wire: the daemon's socket protocol and the client that speaks it (``RemoteService``)."""
