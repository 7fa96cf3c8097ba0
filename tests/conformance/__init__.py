"""Conformance: OpenStack Placement 16.0.0's published gabbi files, run
over HTTP against a live placement_lite (see docs/conformance.md)."""
