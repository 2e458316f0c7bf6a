"""The shipped alert rules (``data/reachabilityd.rules.yml``) fire where reachabilityd runs and
something is wrong, and nowhere else (docs/metrics.md, "The writer unit, and a dead writer").

* ``promtool check rules`` accepts the file, and ``promtool test rules`` passes its unit tests,
  ``reachabilityd.rules.test.yml`` beside this file: a node without reachabilityd (node_exporter's
  textfile collector working, no file of ours) and a node the package was removed from fire
  nothing, ever; a stopped daemon and a hung one (the writer's ``reachability_up 0``) fire
  ReachabilitydDown; a hung writer (its time of writing stands still) fires
  ReachabilityMetricsStale; a stopped writer (the file its unit leaves) fires
  ReachabilityMetricsWriterDown, and a restarted one does not; the internet lost for five
  minutes fires HostLostInternetPath.
* Every alert of the file is tested firing, silent where it should be, and silent at several
  times on the node without reachabilityd: an alert added later is not left untested.
* The tests can fail: the rule issue 47 was about (a missing file counted as a dead writer), a
  restart counted as a stop, a hang not reported within its bound and a hung writer ignored each
  make ``promtool test rules`` fail, naming the node.
* The writer unit's ``ExecStopPost=``, run as systemd runs it, leaves exactly what the alert
  reads (``reachctl_textfile_writer_up 0`` and the time it stopped, which ``promtool check
  metrics`` accepts), replacing the file whole; docs/metrics.md names every metric the alerts read.

No root, no daemon: promtool (Debian's ``prometheus`` package) and sh.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from pathlib import Path

import pytest

import harness
from conftest import need

REPO = harness.REPO
RULES = REPO / "data" / "reachabilityd.rules.yml"
RULES_TEST = Path(__file__).resolve().parent / "reachabilityd.rules.test.yml"
WRITER_UNIT = REPO / "data" / "reachabilityd-metrics-textfile.service"
METRICS_DOC = REPO / "docs" / "metrics.md"
OURS = re.compile(r"\b(?:reachability|reachctl)_[a-z_]+\b")


def promtool() -> str:
    found = harness.tool("promtool")
    need([] if found else ["promtool (Debian's prometheus package)"])
    return found


def run_promtool(*argv: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([promtool(), *argv], input=stdin, capture_output=True, text=True, timeout=60,
                          check=False)


def rules_test_against(rules: Path, directory: Path) -> subprocess.CompletedProcess:
    """The unit tests run against ``rules`` (a copy of the test file that names it)."""
    text = RULES_TEST.read_text()
    assert text.count("  - ../../data/reachabilityd.rules.yml\n") == 1, "the test file names another rules file"
    test = directory / RULES_TEST.name
    test.write_text(text.replace("  - ../../data/reachabilityd.rules.yml\n", f"  - {rules}\n"))
    return run_promtool("test", "rules", str(test))


def alerts(text: str) -> list:
    return re.findall(r"(?m)^\s*- alert: (\w+)\s*$", text)


def test_rules_pass_promtool_check():
    done = run_promtool("check", "rules", str(RULES))
    assert done.returncode == 0, f"promtool check rules {RULES.name}:\n{done.stdout}{done.stderr}"
    assert f"SUCCESS: {len(alerts(RULES.read_text()))} rules found" in done.stdout, done.stdout


def test_rules_unit_tests_pass(tmp_path):
    """The unit tests, as they are written to be run by hand (the test file names the
    shipped rules by a path relative to itself) and against the rules by absolute path."""
    done = run_promtool("test", "rules", str(RULES_TEST))
    assert done.returncode == 0, f"promtool test rules {RULES_TEST.name}:\n{done.stdout}{done.stderr}"
    done = rules_test_against(RULES, tmp_path)
    assert done.returncode == 0, f"promtool test rules:\n{done.stdout}{done.stderr}"


# --- what the unit tests cover ---------------------------------------------------------------


def rules_test_groups() -> list:
    """Each test group of the unit tests: the metric names of its input series, and its alert
    checks as (eval time, alert, expected to fire). The test file writes a check in one of two
    ways: ``- {eval_time: T, alertname: A, exp_alerts: []}`` or, for alerts that fire, a block
    ``- eval_time: T`` / ``alertname: A`` / ``exp_alerts:`` / ``- exp_labels: ...``."""
    groups = []
    for text in re.split(r"(?m)^  - interval:", RULES_TEST.read_text())[1:]:
        series = set(re.findall(r"series: '([a-zA-Z_:][a-zA-Z0-9_:]*)[{']", text))
        checks = [(m[1], m[2], False) for m in
                  re.finditer(r"\{eval_time: (\w+), alertname: (\w+), exp_alerts: \[\]\}", text)]
        checks += [(m[1], m[2], True) for m in
                   re.finditer(r"(?m)^\s+- eval_time: (\w+)\n\s+alertname: (\w+)\n\s+exp_alerts:\s*\n\s+- exp_labels:",
                               text)]
        assert len(checks) == text.count("alertname:"), \
            f"a check in {RULES_TEST.name} is written neither way this test reads:\n{text[:400]}"
        groups.append((series, checks))
    return groups


def test_every_alert_is_tested_firing_and_silent_where_reachabilityd_does_not_run():
    names = alerts(RULES.read_text())
    assert names, f"no alert in {RULES}"
    assert len(set(names)) == len(names), names
    groups = rules_test_groups()
    without = [checks for series, checks in groups if not any(OURS.match(s) for s in series)]
    assert without, f"{RULES_TEST.name} has no node without reachabilityd (a group with none of its series)"
    untested = []
    for name in names:
        for checks in without:
            times = {t for t, alert, fires in checks if alert == name and not fires}
            if len(times) < 3 or any(alert == name and fires for _, alert, fires in checks):
                untested.append(f"{name}: expected silent at 3 times or more on the node without "
                                f"reachabilityd, checked at {sorted(times)}")
        ours = [checks for series, checks in groups if any(OURS.match(s) for s in series)]
        if not any(alert == name and fires for checks in ours for _, alert, fires in checks):
            untested.append(f"{name}: never expected to fire")
        if not any(alert == name and not fires for checks in ours for _, alert, fires in checks):
            untested.append(f"{name}: never expected silent on a node that runs reachabilityd")
    tested = {alert for _, checks in groups for _, alert, _ in checks}
    assert not tested - set(names), f"{RULES_TEST.name} checks alerts the rules do not have: {tested - set(names)}"
    assert not untested, "\n".join(untested)


# Rules that break what the unit tests hold, and the node whose check must then fail.
MUTANTS = {
    # Issue 47: every node_exporter with the textfile collector exports
    # node_textfile_scrape_error 0, so "no file of ours" fired everywhere reachabilityd is not.
    "missing-file-is-a-dead-writer": (
        r"expr: reachctl_textfile_writer_up == 0\n",
        "expr: reachctl_textfile_writer_up == 0 or on(instance) (node_textfile_scrape_error == 0"
        " unless on(instance) reachctl_textfile_updated_timestamp_seconds)\n",
        "plain:9100"),
    "a-restart-is-a-stop": (
        r"(- alert: ReachabilityMetricsWriterDown\n\s+expr: .*\n\s+for: )\w+\n", r"\g<1>0s\n",
        "restarted:9100"),
    "a-hang-reported-late": (
        r"(- alert: ReachabilitydDown\n\s+expr: .*\n\s+for: )\w+\n", r"\g<1>5m\n", "hung:9100"),
    "a-hung-writer-ignored": (
        r"(- alert: ReachabilityMetricsStale\n\s+expr: .*\n\s+for: )\w+\n", r"\g<1>1h\n", "stuck:9100"),
}


@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_unit_tests_fail_on_a_rule_that_breaks_them(mutant, tmp_path):
    pattern, replacement, node = MUTANTS[mutant]
    text, count = re.subn(pattern, replacement, RULES.read_text())
    assert count == 1, f"{mutant}: {pattern!r} matches {count} times in {RULES.name}: update the mutant"
    broken = tmp_path / "broken.rules.yml"
    broken.write_text(text)
    checked = run_promtool("check", "rules", str(broken))
    assert checked.returncode == 0, f"{mutant}: not a valid rules file:\n{checked.stdout}{checked.stderr}"
    done = rules_test_against(broken, tmp_path)
    report = done.stdout + done.stderr  # promtool says what failed on standard error
    assert done.returncode != 0, f"{mutant}: the unit tests pass on a rule that breaks them:\n{report}"
    assert f'instance="{node}"' in report, f"{mutant}: expected a failure about {node}:\n{report}"


# --- the file a stopped writer leaves ------------------------------------------------------


def unit_command(unit: Path, key: str) -> tuple:
    """``key``'s command line as systemd runs it: (its prefix characters, argv). Lines joined
    where they end in a backslash; ``%%`` and ``$$`` are systemd's escapes for ``%`` and ``$``
    (any other specifier or variable, or a backslash escape, is not what this emulates, and
    fails the test)."""
    text = re.sub(r"\\\n", " ", unit.read_text())
    [value] = [line.split("=", 1)[1] for line in text.splitlines() if line.startswith(f"{key}=")]
    prefix = re.match(r"[-@:+!]*", value)[0]
    command = value[len(prefix):]
    assert not re.search(r"[%$\\]", re.sub(r"%%|\$\$", "", command)), \
        f"{key}= uses a specifier, a variable or an escape this test does not emulate: {command}"
    return prefix, shlex.split(command.replace("%%", "%").replace("$$", "$"))


def samples(text: str) -> dict:
    return {m[1]: float(m[2]) for m in re.finditer(r"(?m)^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{[^}]*\})? (\S+)$", text)}


def run_stop_post(textfile: Path) -> subprocess.CompletedProcess:
    _, argv = unit_command(WRITER_UNIT, "ExecStopPost")
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "TEXTFILE": str(textfile)}
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30, check=False)


def test_stopped_writer_leaves_what_the_alert_reads(tmp_path):
    """Over a running writer's file: replaced whole (a new inode, no temporary file left) by
    reachctl_textfile_writer_up 0 and the time it stopped, and nothing else: no reachability_up,
    no target's last value, no time of writing (which would make the stale alert fire too)."""
    prefix, _ = unit_command(WRITER_UNIT, "ExecStopPost")
    assert "-" in prefix, "ExecStopPost= must not fail the unit when it cannot write (its directory gone)"
    textfile = tmp_path / "reachability.prom"
    textfile.write_text("reachability_up 1\nreachability_target_reachable{kind=\"internet\",target=\"internet\"} 1\n"
                        "reachctl_textfile_writer_up 1\nreachctl_textfile_updated_timestamp_seconds 1\n")
    inode = textfile.stat().st_ino
    before = int(time.time())
    done = run_stop_post(textfile)
    after = int(time.time())
    assert done.returncode == 0 and not done.stderr, f"ExecStopPost= failed ({done.returncode}): {done.stderr}"
    text = textfile.read_text()
    assert textfile.stat().st_ino != inode, "the file was rewritten in place, not replaced (node_exporter could read half)"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reachability.prom"], list(tmp_path.iterdir())
    found = samples(text)
    assert set(found) == {"reachctl_textfile_writer_up", "reachctl_textfile_writer_stopped_timestamp_seconds"}, text
    assert found["reachctl_textfile_writer_up"] == 0, text
    assert before <= found["reachctl_textfile_writer_stopped_timestamp_seconds"] <= after, text
    checked = run_promtool("check", "metrics", stdin=text)
    assert checked.returncode == 0, f"promtool check metrics:\n{checked.stdout}{checked.stderr}\n{text}"
    # No directory: the command fails (the unit ignores it, "-") and leaves nothing.
    missing = tmp_path / "gone" / "reachability.prom"
    assert run_stop_post(missing).returncode != 0
    assert not missing.parent.exists()


def test_docs_name_every_metric_the_alerts_and_the_writer_unit_use():
    """docs/metrics.md's table lists each metric the alerts read and the stopped writer's file
    holds, and the unit no longer removes the file (a node with no file has no reachabilityd)."""
    exprs = " ".join(re.findall(r"(?m)^\s+expr: (.*(?:\n\s{10,}.*)*)", RULES.read_text()))
    _, argv = unit_command(WRITER_UNIT, "ExecStopPost")
    used = set(OURS.findall(exprs)) | set(re.findall(r'echo "((?:reachability|reachctl)_\w+) ', argv[-1]))
    assert "reachctl_textfile_writer_up" in used and "reachability_up" in used, used
    table = {m for m in re.findall(r"(?m)^\| `([a-z_]+)`", METRICS_DOC.read_text())}
    missing = sorted(used - table)
    assert not missing, f"docs/metrics.md's table does not list {missing}"
    assert "rm " not in " ".join(argv), f"the writer unit removes its file when it stops: {argv}"
    assert os.path.basename(argv[0]) == "sh", argv
