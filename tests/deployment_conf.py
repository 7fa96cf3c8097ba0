"""A placement.conf as kolla-ansible writes one for Placement (its
placement.conf.j2, rendered), for the tests that start placement-lite
from it: the database is an SQLite file of the test's, [keystone_authtoken]
is whole and points at a Keystone that is never asked (noauth2 tests) or
at the test's fake one."""
from __future__ import annotations

from pathlib import Path

KOLLA = """\
[DEFAULT]
debug = False
log_dir = /var/log/kolla/placement
state_path = /var/lib/placement

[api]
auth_strategy = {auth_strategy}

[oslo_concurrency]
lock_path = /var/lib/placement/tmp

[placement_database]
connection = {connection}
max_retries = -1
max_pool_size = 6
max_overflow = 12
connection_recycle_time = 600

[placement]
max_allocation_candidates = {max_candidates}
randomize_allocation_candidates = false

[keystone_authtoken]
service_type = placement
www_authenticate_uri = {keystone}
auth_url = {keystone}
auth_type = password
project_domain_id = default
user_domain_id = default
project_name = service
username = placement
password = kolla-secret
region_name = RegionOne
memcache_security_strategy = ENCRYPT
memcache_secret_key = kolla-memcache-secret
memcached_servers = 192.0.2.10:11211
service_token_roles_required = true

[oslo_messaging_notifications]
driver = noop

[oslo_middleware]
enable_proxy_headers_parsing = True

[cors]
allowed_origin = https://horizon.example.com

[oslo_policy]
enforce_new_defaults = false
enforce_scope = true

[workarounds]
optimize_for_wide_provider_trees = true

[profiler]
enabled = False
"""

# A Keystone no test ever reaches (TEST-NET-1): auth_token only asks it
# when it validates a token, which noauth2 tests never do.
UNUSED_KEYSTONE = "http://192.0.2.1:5000/v3"


def write_kolla(directory: Path, connection: str, *, auth_strategy: str = "noauth2",
                max_candidates: int = 2, keystone: str = UNUSED_KEYSTONE,
                extra: str = "") -> Path:
    """Write placement.conf into `directory` and return its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "placement.conf"
    path.write_text(KOLLA.format(connection=connection, auth_strategy=auth_strategy,
                                 max_candidates=max_candidates, keystone=keystone)
                    + extra, encoding="utf-8")
    return path
