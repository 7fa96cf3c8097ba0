"""jsonschema documents for request bodies and query strings, by microversion."""
