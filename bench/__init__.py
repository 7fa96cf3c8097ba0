"""The placement-lite benchmark: load provider worlds, time candidate
queries, concurrent throughput and concurrent claims over HTTP."""
