"""profboard server: discovery, loading, analysis and the HTTP API. Never imports torch."""

__version__ = "0.1.0"
