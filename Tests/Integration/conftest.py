"""pytest configuration for reachabilityd's integration tests.

Run them as root with Debian's Python (it has python3-gi and python3-dbusmock):

    sudo /usr/bin/python3 -m pytest Tests/Integration -v

* Missing requirements (root, packages, the built daemon) skip a test with
  the reason; when the ``CI`` environment variable is set, every skip -- for
  that or any other reason -- is turned into a failure, so CI never passes
  by not testing.
* When a test fails, its report carries the daemon's log and the tails of
  NetworkManager's, dnsmasq's and the conncheck server's logs.
* Every lab is closed (processes stopped by PID, namespaces deleted) when the
  test ends, whatever its outcome.

Fixtures: ``plain_lab`` (a private bus without NetworkManager, no root
needed), ``nm_lab`` (NetworkManager connected, State 70),
``nm_lab_without_nm`` (the same namespaces, NetworkManager not started) and
``tenant_lab`` and ``tenant_broker_lab`` (the hostile-tenant lab of
``tenants.py``, on dbus-daemon or on dbus-broker); for the package's tests, once
per run whichever module asks first: ``deb``, ``gio_deb``, ``library_debs``
(``packages.py``: built from the source package, offline) and ``broker_deb``.
"""

import os

import pytest

import harness

CI = bool(os.environ.get("CI"))


def require(*, root: bool = True, networkmanager: bool = True, daemon: bool = True) -> None:
    """Skip the test (fail it under CI) when the machine lacks something it needs."""
    need(harness.requirements(root=root, networkmanager=networkmanager, daemon=daemon))


def need(*missing_lists) -> None:
    """Skip the test (fail it under CI) when any of these lists names something missing."""
    missing = [m for ms in missing_lists for m in ms]
    if not missing:
        return
    message = "needs " + ", ".join(missing)
    if CI:
        pytest.fail(message + " (CI is set: a missing requirement is a failure)", pytrace=False)
    pytest.skip(message)


def _register(request, lab) -> None:
    """Remember the lab on the test item so a failure report can carry its logs."""
    labs = getattr(request.node, "reach_labs", None)
    if labs is None:
        labs = request.node.reach_labs = []
    labs.append(lab)


def _lab(request, lab, **start):
    # Closed by a finalizer, not in a try/finally: a failed start must still
    # leave the logs readable when the set-up report is made.
    request.addfinalizer(lab.close)
    _register(request, lab)
    lab.start(**start)
    return lab


@pytest.fixture
def plain_lab(request):
    """A private system bus with nothing on it: the daemon started there sees
    no NetworkManager. Runs in the machine's network namespace."""
    require(root=False, networkmanager=False)
    return _lab(request, harness.PlainLab())


@pytest.fixture
def nm_lab(request):
    """NetworkManager connected (State 70) through nmveth0 to the upstream namespace."""
    require()
    return _lab(request, harness.NMLab())


@pytest.fixture
def nm_lab_without_nm(request):
    """The NetworkManager lab with NetworkManager not started (``lab.start_nm()`` starts it)."""
    require()
    return _lab(request, harness.NMLab(), networkmanager=False)


def _tenant_lab(request, broker: bool = False, bus_limits=None):
    import tenants  # pylint: disable=import-outside-toplevel
    require(networkmanager=False)
    missing = [f"the {name} command" for name in ("ip", "setpriv") if harness.tool(name) is None]
    if tenants.VICTIM is None or tenants.OTHER is None:
        missing.append("two unprivileged users besides nobody (www-data, backup, ...)")
    if broker and not os.environ.get("REACH_TEST_DBUS_BROKER"):
        # Opt-in, also under CI: installing Debian's dbus-broker makes it the machine's system bus
        # at the next boot, which the test command must not do to a developer's machine.
        pytest.skip("the dbus-broker variant runs with REACH_TEST_DBUS_BROKER=1 (and the Debian "
                    "package dbus-broker installed); Tests/test-all.sh does not install it")
    if broker:
        missing += [m + " (Debian package dbus-broker)" for m in tenants.broker_available()]
    if missing:
        message = "needs " + ", ".join(missing)
        if CI:
            pytest.fail(message + " (CI is set: a missing requirement is a failure)", pytrace=False)
        pytest.skip(message)
    return _lab(request, tenants.TenantLab(broker=broker, bus_limits=bus_limits))


@pytest.fixture
def tenant_lab(request):
    """The hostile-tenant lab (tenants.py): a system bus with Debian's default policy and the
    shipped policy file, a network namespace with a DNS server of the test's; the test starts
    the daemon (``tenant_lab.start_daemon(...)``). Needs root, ``ip``, ``setpriv`` and two
    unprivileged users of the machine besides ``nobody``."""
    return _tenant_lab(request)


@pytest.fixture
def tenant_lab_small_bus(request):
    """The hostile-tenant lab on a dbus-daemon that holds at most 8 MiB of any one sender's
    messages waiting for their readers (``max_incoming_bytes``; 127 MiB by default), so that
    what a non-reader costs its sender shows within seconds."""
    return _tenant_lab(request, bus_limits={"max_incoming_bytes": str(8 << 20)})


@pytest.fixture
def tenant_broker_lab(request):
    """The hostile-tenant lab with dbus-broker as the bus (same configuration)."""
    return _tenant_lab(request, broker=True)


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


def _fail_skip_under_ci(report) -> None:
    if CI and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped, and CI is set, so a skip is a failure: {_skip_reason(report)}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):  # pylint: disable=unused-argument
    """Attach the labs' logs to a failing report; under CI, turn skips into failures."""
    outcome = yield
    report = outcome.get_result()
    _fail_skip_under_ci(report)
    if report.failed:
        for lab in getattr(item, "reach_labs", []):
            try:
                logs = lab.logs()
            except Exception as error:  # pylint: disable=broad-except
                logs = [("logs", f"(could not read the logs: {error})")]
            for title, text in logs:
                report.sections.append((f"{title} [{report.when}]", text))


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):  # pylint: disable=unused-argument
    """Under CI, a module skipped at collection time is a failure too."""
    outcome = yield
    _fail_skip_under_ci(outcome.get_result())


# --- the Debian packages, once per run (defined here so that every module shares them) ----


@pytest.fixture(scope="session")
def deb():
    """The reachabilityd .deb (``packages.py``)."""
    import packages  # pylint: disable=import-outside-toplevel
    return packages.deb_path()


@pytest.fixture(scope="session")
def gio_deb(deb):  # pylint: disable=redefined-outer-name
    """The GIO module's package, built with the daemon's."""
    import packages  # pylint: disable=import-outside-toplevel
    return packages.beside(deb, packages.GIO_PACKAGE)


@pytest.fixture(scope="session")
def library_debs(deb):  # pylint: disable=redefined-outer-name
    """The C API's packages, built with the daemon's: {package name: .deb}."""
    import packages  # pylint: disable=import-outside-toplevel
    return {name: packages.beside(deb, name) for name in packages.LIBRARY_PACKAGES}


@pytest.fixture(scope="session")
def broker_deb():
    """dbus-broker's package, fetched once (``container.download_dbus_broker``)."""
    import container  # pylint: disable=import-outside-toplevel
    import packages  # pylint: disable=import-outside-toplevel
    return container.download_dbus_broker(packages.OUT / "dbus-broker")
