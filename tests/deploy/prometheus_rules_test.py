#!/usr/bin/python3
"""deploy/prometheus/ against promtool and the server: every rule file passes `promtool check
rules`, every unit test file passes `promtool test rules`, each alert is tested firing and not
firing and each recording rule's value is tested, every metric the rules and tests name is one
anisoscope-server exports on /metrics (its names live in server/, e.g. server/alarms/), and the
README's prometheus.yml passes `promtool check config`."""
import glob
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import yaml

SOURCE_DIR = os.environ.get("ANISOSCOPE_SOURCE_DIR",
                            os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
PROMETHEUS_DIR = os.path.join(SOURCE_DIR, "deploy", "prometheus")
SERVER_DIR = os.path.join(SOURCE_DIR, "server")
RULE_FILES = sorted(glob.glob(os.path.join(PROMETHEUS_DIR, "*.yml")))
TEST_FILES = sorted(glob.glob(os.path.join(PROMETHEUS_DIR, "tests", "*.yml")))
# Series Prometheus makes itself rather than scraping them from the server.
PROMETHEUS_OWN = {"up"}
PROMQL_WORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
                "group_left", "group_right", "inf", "nan", "atan2"}


def promtool():
    """The promtool binary ($PROMTOOL, else on PATH). Missing: in CI the test fails (a check
    CI cannot run must not pass), elsewhere it is skipped."""
    path = os.environ.get("PROMTOOL") or shutil.which("promtool")
    if path and os.access(path, os.X_OK):
        return path
    message = "promtool not found (apt-get install prometheus, or set PROMTOOL)"
    if os.environ.get("CI"):
        raise AssertionError(message)
    raise unittest.SkipTest(message)


def run_promtool(*args):
    result = subprocess.run([promtool(), *args], capture_output=True, text=True, timeout=120)
    return result.returncode, result.stdout + result.stderr


def load(path):
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)


def rules(kind):
    """(file, rule) for every rule of `kind` ("alert" or "record") in the rule files."""
    for path in RULE_FILES:
        for group in load(path)["groups"]:
            for rule in group["rules"]:
                if kind in rule:
                    yield os.path.basename(path), rule


def metric_names(expr):
    """The series names a PromQL expression selects: what is left once strings, label
    matchers, ranges, grouping clauses, functions, keywords and numbers are taken out."""
    expr = re.sub(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'', "", expr)
    expr = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", expr)
    expr = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)
    expr = re.sub(r"\boffset\s+\S+", " ", expr)
    names = set()
    for match in re.finditer(r"(?<![\w.:])([A-Za-z_:][\w:]*)(?![\w:]|\s*\()", expr):
        if match.group(1).lower() not in PROMQL_WORDS:
            names.add(match.group(1))
    return names


def server_exported_names():
    """Every anisoscope_* name written in the server's sources (its /metrics exposition)."""
    names = set()
    for path in glob.glob(os.path.join(SERVER_DIR, "**", "*.*"), recursive=True):
        if path.endswith((".cc", ".h")):
            with open(path, encoding="utf-8", errors="replace") as f:
                names.update(re.findall(r"\banisoscope_[a-z0-9_]+\b", f.read()))
    return names


class PrometheusRulesTest(unittest.TestCase):
    def test_rule_and_test_files_exist(self):
        self.assertTrue(RULE_FILES, f"no rule files in {PROMETHEUS_DIR}")
        self.assertTrue(TEST_FILES, f"no promtool unit tests in {PROMETHEUS_DIR}/tests")

    def test_every_rule_file_passes_promtool_check_rules(self):
        for path in RULE_FILES:
            with self.subTest(file=os.path.basename(path)):
                code, output = run_promtool("check", "rules", path)
                self.assertEqual(code, 0, output)

    def test_every_unit_test_file_passes_promtool_test_rules(self):
        for path in TEST_FILES:
            with self.subTest(file=os.path.basename(path)):
                code, output = run_promtool("test", "rules", path)
                self.assertEqual(code, 0, output)

    def test_readme_prometheus_config_passes_promtool_check_config(self):
        # The README's prometheus.yml, its /etc/prometheus/anisoscope/ files put in a scratch
        # directory: the rule files these, the tokens placeholders.
        with open(os.path.join(PROMETHEUS_DIR, "README.md"), encoding="utf-8") as f:
            blocks = re.findall(r"```yaml\n(.*?)```", f.read(), re.S)
        configs = [block for block in blocks if "scrape_configs:" in block]
        self.assertEqual(len(configs), 1, "README.md shows no prometheus.yml (or several)")
        with tempfile.TemporaryDirectory() as scratch:
            config = configs[0].replace("/etc/prometheus/anisoscope/", scratch + "/")
            for name in re.findall(re.escape(scratch) + r"/([\w.-]+)", config):
                source = os.path.join(PROMETHEUS_DIR, name)
                if os.path.exists(source):
                    shutil.copy(source, scratch)
                else:
                    with open(os.path.join(scratch, name), "w", encoding="utf-8") as f:
                        f.write("placeholder-token\n")
            path = os.path.join(scratch, "prometheus.yml")
            with open(path, "w", encoding="utf-8") as f:
                f.write(config)
            code, output = run_promtool("check", "config", path)
            self.assertEqual(code, 0, output)
            for rule_file in RULE_FILES:
                self.assertIn(os.path.basename(rule_file), output,
                              f"README.md's prometheus.yml does not load {rule_file}")

    def test_every_rule_file_is_loaded_by_a_unit_test(self):
        loaded = set()
        for path in TEST_FILES:
            for name in load(path).get("rule_files", []):
                loaded.add(os.path.normpath(os.path.join(os.path.dirname(path), name)))
        for path in RULE_FILES:
            self.assertIn(os.path.normpath(path), loaded,
                          f"no file in deploy/prometheus/tests loads {os.path.basename(path)}")

    def test_every_alert_is_tested_firing_and_not_firing(self):
        firing, silent = set(), set()
        for path in TEST_FILES:
            for test in load(path).get("tests", []):
                for case in test.get("alert_rule_test", []):
                    (firing if case.get("exp_alerts") else silent).add(case["alertname"])
        for file, rule in rules("alert"):
            with self.subTest(alert=rule["alert"]):
                self.assertIn(rule["alert"], firing,
                              f"{file}: no unit test expects {rule['alert']} to fire")
                self.assertIn(rule["alert"], silent,
                              f"{file}: no unit test expects {rule['alert']} to stay silent")

    def test_every_recording_rule_value_is_tested(self):
        tested = set()
        for path in TEST_FILES:
            for test in load(path).get("tests", []):
                for case in test.get("promql_expr_test", []):
                    if case.get("exp_samples"):
                        tested.update(metric_names(case["expr"]))
        for file, rule in rules("record"):
            self.assertIn(rule["record"], tested,
                          f"{file}: no promql_expr_test checks the values of {rule['record']}")

    def test_rules_and_tests_name_only_metrics_the_server_exports(self):
        exported = server_exported_names()
        recorded = {rule["record"] for _, rule in rules("record")}
        used = {}  # name -> where
        for file, rule in list(rules("alert")) + list(rules("record")):
            for name in metric_names(rule["expr"]):
                used.setdefault(name, f"{file}: {rule.get('alert') or rule.get('record')}")
        for path in TEST_FILES:
            for test in load(path).get("tests", []):
                for series in test.get("input_series", []):
                    name = re.match(r"\s*([A-Za-z_:][\w:]*)", series["series"]).group(1)
                    used.setdefault(name, f"tests/{os.path.basename(path)}: input series")
        self.assertTrue(any(name.startswith("anisoscope_") for name in used),
                        "the rules name no anisoscope_* series")
        for name, where in sorted(used.items()):
            with self.subTest(metric=name):
                if name in PROMETHEUS_OWN or name in recorded:
                    continue
                self.assertTrue(name in exported,
                                f"{where} uses {name}, which no file under server/ names "
                                f"(the /metrics exposition): a name the server does not "
                                f"export, or not yet")


if __name__ == "__main__":
    unittest.main()
