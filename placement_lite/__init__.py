"""placement_lite: a resource-and-usage ledger speaking the Placement API."""


def __getattr__(name):
    # Read from the package metadata (or setup.py) when asked, rather than
    # a second copy of the number here that could drift from it.
    if name == "__version__":
        from placement_lite.version import version
        return version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
