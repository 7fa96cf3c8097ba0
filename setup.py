from setuptools import setup

setup(
    name="placement-lite",
    version="0.1.0",
    description=(
        "A resource-and-usage ledger for clouds: the OpenStack Placement API "
        "plus unified-limits quota, on SQLite, MariaDB/MySQL or PostgreSQL."
    ),
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.9",
    packages=[
        "placement_lite",
        "placement_lite.api",
        "placement_lite.api.render",
        "placement_lite.api.resources",
        "placement_lite.api.schemas",
        "placement_lite.ledger",
        "placement_lite.candidates",
        "placement_lite.quota",
        "placement_lite.db",
        "placement_lite.ui",
        # The alembic scripts live at the top of the tree (migrations/) but
        # ship inside the package so a plain `pip install .` can upgrade.
        "placement_lite.migrations",
        "placement_lite.migrations.versions",
    ],
    package_dir={
        "placement_lite.migrations": "migrations",
        "placement_lite.migrations.versions": "migrations/versions",
    },
    package_data={"placement_lite.migrations": ["script.py.mako"],
                  "placement_lite.api": ["openapi.yaml"],
                  # The console's templates and stylesheet: no CDN, no build.
                  "placement_lite.ui": ["templates/*.html", "static/*"]},
    install_requires=[
        "falcon>=4.0",
        "waitress>=3.0",
        "SQLAlchemy>=2.0",
        "alembic>=1.13",
        "jsonschema>=4.17",
        "os-traits>=3.0",
        "os-resource-classes>=1.1",
        "microversion-parse>=1.0",
        "PyYAML>=6.0",
        "Jinja2>=3.1",
        # Reads OpenStack Placement's placement.conf as Placement does.
        "oslo.config>=9",
        # Judges every request, as it judges Placement's (api/policy.py).
        "oslo.policy>=4.0",
    ],
    extras_require={
        "test": [
            "pytest>=7.4",
            "gabbi>=3.0",
            "wsgi-intercept>=1.13",
            "hypothesis>=6.80",
            "PyMySQL>=1.1",
            "psycopg[binary]>=3.1",
            # Proves an unmodified oslo.limit Enforcer works against /v3.
            "oslo.limit>=2.0",
            "requests>=2.28",
            # Its ExternalServiceFilter drives the /v1 lease-policy tests.
            "blazar>=13.0",
            # --auth keystone is tested against a fake Keystone.
            "keystonemiddleware>=10.0",
            "python-memcached>=1.59",
            # Generated requests against the served OpenAPI document.
            "schemathesis>=4.0",
            # The served document is checked as OpenAPI 3.1 (tests/test_openapi.py),
            # and bodies the service takes against its schemas.
            "openapi-spec-validator>=0.7.1",
            "openapi-schema-validator>=0.6",
            # Real clients: the OpenStack CLI with osc-placement, openstacksdk.
            "python-openstackclient>=6.0",
            "osc-placement>=4.0",
            "openstacksdk>=1.0",
            # Serves placement_lite.wsgi:application in the multi-process test.
            "uwsgi>=2.0",
            # The reference implementation itself: its database is imported
            # and both servers' answers compared (tests/test_sameness.py).
            "openstack-placement==16.0.0",
            # Its PostgreSQL driver, for `python -m bench full --placement
            # --db postgresql` (bench/placement16.py).
            "psycopg2-binary>=2.9",
            # Placement's own gabbi fixtures (which import it) build the
            # worlds our conformance fixtures are compared with.
            "oslotest>=4.0",
            # The console in a real headless Chromium (Debian's chromium
            # and chromium-driver; skipped when they are not installed).
            "selenium>=4.10",
            # nova's own SchedulerReportClient drives the ironic inventory
            # path (reserved = total on a node in use) against a live server.
            "nova>=34",
        ],
        "mysql": ["PyMySQL>=1.1"],
        # The C driver (URLs mysql+mysqldb://); needs the MariaDB/MySQL
        # client headers to build. See README's performance section.
        "mysqlclient": ["mysqlclient>=2.1"],
        # A faster JSON encoder for large answers (api/render.py).
        "fast": ["orjson>=3.8"],
        "postgresql": ["psycopg[binary]>=3.1"],
        # keystonemiddleware's token cache imports python-memcached when
        # [keystone_authtoken] memcached_servers is set, as kolla and
        # OpenStack-Ansible always set it.
        "keystone": ["keystonemiddleware>=10.0", "python-memcached>=1.59"],
    },
    entry_points={
        "console_scripts": ["placement-lite = placement_lite.cli:main"],
        # oslopolicy-sample-generator / -policy-generator --namespace placement_lite
        "oslo.policy.policies": [
            "placement_lite = placement_lite.api.policies:list_rules"],
        "oslo.policy.enforcer": [
            "placement_lite = placement_lite.api.policy:get_enforcer"],
    },
)
