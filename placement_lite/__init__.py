"""placement_lite: a resource-and-usage ledger speaking the Placement API."""

__version__ = "0.1.0"
