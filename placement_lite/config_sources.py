"""The files and variables settings are read from, as config.py's
load_settings meets them: which file given to --config-file is our YAML
and which is Placement's placement.conf, reading the YAML, and refusing
PLACEMENT_LITE_* variables that name no setting."""
from __future__ import annotations

import difflib
import re
from typing import Iterable, Mapping, Optional

import yaml

ENV_PREFIX = "PLACEMENT_LITE_"

# PLACEMENT_LITE_* variables that are no setting: the test suite's, CI's
# and the benchmark's knobs, set in the very environments the service is
# started from. The service ignores these names; any other unknown
# PLACEMENT_LITE_* variable is refused, as an unknown key in the file is.
# (tests/test_config.py checks that every such name the repository uses is
# listed here.)
NOT_SETTINGS_ENVIRONMENT = frozenset({
    "PLACEMENT_LITE_TEST_DB_URLS",          # tests/backends.py: servers to test on
    "PLACEMENT_LITE_CONFORMANCE",           # tests/conformance: run the gabbits
    "PLACEMENT_LITE_CONFORMANCE_CACHE",
    "PLACEMENT_LITE_CONFORMANCE_REPORT",
    "PLACEMENT_LITE_CONFORMANCE_JOBS",
    "PLACEMENT_LITE_NOVA_FUNCTIONAL",       # tests/nova_functional: nova's tests
    "PLACEMENT_LITE_NOVA_CACHE", "PLACEMENT_LITE_NOVA_JOBS",
    "PLACEMENT_LITE_DIFF_SEED",             # tests/test_facts_differential.py
    "PLACEMENT_LITE_DIFF_ROUNDS",
    "PLACEMENT_LITE_DIFF_READS",
    "PLACEMENT_LITE_DIFF_ALL",
    "PLACEMENT_LITE_SAMENESS_SEED",         # tests/test_sameness.py
    "PLACEMENT_LITE_FUZZ_EXAMPLES",         # tests/test_fuzz.py
    "PLACEMENT_LITE_FUZZ_SECONDS",
    "PLACEMENT_LITE_UI_SCREENSHOTS",        # tests/test_ui_browser.py
    "PLACEMENT_LITE_UI_README_SHOT",
    "PLACEMENT_LITE_UI_TIMELINE_SHOT",
    "PLACEMENT_LITE_AHEAD_SEED",            # tests/test_plain_candidates_ahead.py
    # The benchmark's statement counter, read by db/engine.py itself.
    "PLACEMENT_LITE_COUNT_STATEMENTS",
})


def env_name(name: str) -> str:
    """The environment variable of the setting `name`."""
    return ENV_PREFIX + name.upper()


def nearest(name: str, candidates: Iterable[str]) -> Optional[str]:
    found = difflib.get_close_matches(name, sorted(candidates), n=1)
    return found[0] if found else None


def unknown_variables(environ: Mapping[str, str], settings: list[str],
                      also_known: Iterable[str]) -> list[str]:
    """A refusal for each PLACEMENT_LITE_* variable that is no setting;
    `also_known` are names read besides the settings (the old ones, the
    file and directory variables)."""
    known = ({env_name(n) for n in [*settings, *also_known]}
             | NOT_SETTINGS_ENVIRONMENT)
    # Matched without the prefix every name shares, which would make any
    # two names look alike: the settings first, then the tools' variables
    # (a misspelt test variable was meant for the tests).
    tiers = [{n.upper(): env_name(n) for n in settings},
             {v[len(ENV_PREFIX):]: v for v in NOT_SETTINGS_ENVIRONMENT}]
    problems = []
    for key in sorted(k for k in environ if k.startswith(ENV_PREFIX)):
        if key in known:
            continue
        hint = "`placement-lite serve --help` lists each setting's variable"
        for tier in tiers:
            found = nearest(key[len(ENV_PREFIX):], tier)
            if found:
                hint = f"did you mean {tier[found]}?"
                break
        problems.append(f"{key} (environment): no such setting; {hint}")
    return problems


# An ini file's first line that says something: a [section] header. Our
# YAML settings must be a mapping, so a YAML file never starts with `[`.
_SECTION = re.compile(r"\[[^\]\n]+\]\s*$")


def is_ini(path: str) -> bool:
    """Whether the file at `path` is an ini file (Placement's placement.conf
    form) rather than our YAML; False when it cannot be read (reading it
    as YAML then says why)."""
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                text = line.strip()
                if text and not text.startswith(("#", ";")):
                    return bool(_SECTION.match(text))
    except (OSError, UnicodeDecodeError):
        return False
    return False


def read_yaml(path: str, given: str) -> dict:
    """Our YAML settings file; `given` is how the operator named it
    (`--config-file /x.yaml`), for messages."""
    from placement_lite.config import SettingsError
    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
    except FileNotFoundError:
        raise SettingsError(f"{given}: no such file; give the path of a YAML "
                            "settings file or of a placement.conf") from None
    except OSError as exc:
        raise SettingsError(f"{given}: cannot read it ({exc.strerror}); "
                            "fix its permissions") from None
    except UnicodeDecodeError:
        raise SettingsError(f"{given}: not UTF-8 text; save the file as UTF-8") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise SettingsError(f"{given}: not valid YAML{where} ({problem}); "
                            "fix the file (keys are setting names, "
                            "e.g. `port: 8778`)") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SettingsError(f"{given}: the file must hold a mapping of setting "
                            "names to values (e.g. `port: 8778`)")
    return data
