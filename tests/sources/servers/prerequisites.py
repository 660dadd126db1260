"""What the servers' tests need beyond python3 (node, the npm modules of package.json, s3cmd):
missing in CI (CI set and not "false") is a failure; elsewhere the test is skipped, saying
what to install."""
import os
import shutil
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
NODE_MODULES = os.path.join(HERE, "node_modules")
NPM_HINT = "run `npm ci --no-audit --no-fund` in tests/sources/servers"


def in_ci():
    value = os.environ.get("CI", "")
    return value != "" and value.lower() not in ("false", "0")


def require(condition, message):
    """Fails in CI, skips elsewhere, unless `condition`."""
    if condition:
        return
    if in_ci():
        raise AssertionError(f"{message} (required in CI)")
    raise unittest.SkipTest(message)


def node():
    path = shutil.which("node")
    require(path is not None, "node is not installed (apt-get install nodejs)")
    return path


def npm_module(name):
    """The folder of node module `name` in tests/sources/servers/node_modules."""
    path = os.path.join(NODE_MODULES, *name.split("/"))
    require(os.path.isfile(os.path.join(path, "package.json")),
            f"the npm module {name} is missing: {NPM_HINT}")
    return path


def s3cmd():
    path = shutil.which("s3cmd")
    require(path is not None, "s3cmd is not installed (apt-get install s3cmd)")
    return path
