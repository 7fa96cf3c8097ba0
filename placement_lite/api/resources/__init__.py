"""The Falcon resources, one module per URL family, routed by app.py's
route table. The modules beside this package in api/ are what they share:
errors, middleware, auth and policy, request parsing, microversions,
rendering, schemas and the OpenAPI document."""
