'''NetworkManager mock template for reachabilityd's integration tests

python-dbusmock's stock ``networkmanager`` template, extended with what a
libnm 1.42 client (and so reachabilityd) reads but the stock template lacks:

- manager properties ``PrimaryConnection``, ``PrimaryConnectionType``,
  ``ActivatingConnection``, ``RadioFlags``, ``Metered``, ``AllDevices`` and
  friends, and ``Version`` "1.42.4" by default;
- the device properties libnm 1.42 knows (``Metered``, ``Ip4Connectivity``,
  ``Real``, ``Udi`` ...) on every device this template adds;
- a modem device: ``DeviceType`` 8 with the
  ``org.freedesktop.NetworkManager.Device.Modem`` interface
  (``ModemCapabilities``, ``CurrentCapabilities``), whose ``IpInterface``
  (``wwan0``) differs from its control ``Interface`` (``cdc-wdm0``), and
  whose ``Udi`` is its ModemManager object
  (``/org/freedesktop/ModemManager1/Modem/0`` for the first), as on a real
  machine (templates/modemmanager_reach.py serves that object);
- ``SetAccessPointStrength``: an access point's ``Strength`` in one standard
  ``PropertiesChanged``, as NetworkManager updates it while connected;
- ``SetActiveAccessPoint``: a Wi-Fi device's ``ActiveAccessPoint`` (and its
  active connection's ``SpecificObject``), as on a roam;
- a generic device-state setter (``SetDeviceState``) that updates ``State``
  and ``StateReason`` in one ``PropertiesChanged`` and emits ``StateChanged``;
- ``AddDeviceConnection``: a saved profile of any type (``gsm`` for the
  modem) available on a device;
- ``AddPrimaryActiveConnection``: an activated connection on a device that
  becomes the manager's ``PrimaryConnection`` (with ``InterfacesAdded`` on
  ``/org/freedesktop`` before anything points at it, so a libnm client that is
  already running sees the new object); ``AddActivatingConnection`` and
  ``CompleteActivation`` for the same in two steps (device in PREPARE,
  NEED_AUTH ... meanwhile); a matching ``RemoveActiveConnection`` that moves
  ``PrimaryConnection`` on; ``SetDeviceMetered``. ``ActivateConnection`` and
  ``DeactivateConnection`` (``nmcli con up/down``) go through these too.

Every object this template adds is announced with ``InterfacesAdded`` on the
object manager ``/org/freedesktop``; every property change goes out as
``org.freedesktop.DBus.Properties.PropertiesChanged``.

Parameters (``-p`` JSON) are the stock template's, with other defaults:
``Version`` "1.42.4", ``State`` 20 (disconnected), ``Connectivity`` 1 (none),
``WwanEnabled`` true; plus ``RadioFlags`` (default 3: Wi-Fi and WWAN
available) and ``Metered`` (default 0, unknown).
'''

# Loaded by python-dbusmock (``python3 -m dbusmock --template PATH``), which
# collects every D-Bus method of this module, the stock ones imported below
# included, and then calls load().

import dbus

import dbusmock
from dbusmock import MOCK_IFACE
import dbusmock.templates.networkmanager as stock
# The stock template's D-Bus methods (AddAccessPoint, AddWiFiConnection,
# SetProperty, SetGlobalConnectionState, SetConnectivity, Settings ...):
# dbusmock picks them up from this module's namespace.
from dbusmock.templates.networkmanager import *  # noqa: F401,F403 pylint: disable=wildcard-import,unused-wildcard-import
from dbusmock.templates.networkmanager import (
    ACTIVE_CONNECTION_IFACE, CSETTINGS_IFACE, DEVICE_IFACE, MANAGER_IFACE, MANAGER_OBJ, SETTINGS_IFACE,
    SETTINGS_OBJ, WIRELESS_DEVICE_IFACE, DeviceState, NMActiveConnectionState, NMState,
)

BUS_NAME = stock.BUS_NAME
MAIN_OBJ = stock.MAIN_OBJ
SYSTEM_BUS = True
IS_OBJECT_MANAGER = True

MODEM_DEVICE_IFACE = 'org.freedesktop.NetworkManager.Device.Modem'
WIRED_DEVICE_IFACE = 'org.freedesktop.NetworkManager.Device.Wired'
ROOT = '/'


class DeviceType:  # pylint: disable=too-few-public-methods
    '''NMDeviceType values used here'''
    ETHERNET = 1
    WIFI = 2
    MODEM = 8


class Metered:  # pylint: disable=too-few-public-methods
    '''NMMetered'''
    UNKNOWN = 0
    YES = 1
    NO = 2
    GUESS_YES = 3
    GUESS_NO = 4


class ModemCapabilities:  # pylint: disable=too-few-public-methods
    '''NMDeviceModemCapabilities'''
    NONE = 0x0
    POTS = 0x1
    CDMA_EVDO = 0x2
    GSM_UMTS = 0x4
    LTE = 0x8
    NR5G = 0x40


class RadioFlags:  # pylint: disable=too-few-public-methods
    '''NMRadioFlags (NetworkManager 1.38)'''
    NONE = 0
    WLAN_AVAILABLE = 0x1
    WWAN_AVAILABLE = 0x2


def _o(path):
    return dbus.ObjectPath(path)


def _manager():
    return dbusmock.get_object(MANAGER_OBJ)


def _emit_changed(obj, interface, changes):
    '''Set several properties of one interface and announce them in one
    standard PropertiesChanged signal.'''
    for name, value in changes.items():
        obj.props.setdefault(interface, {})[name] = value
    obj.EmitSignal(dbus.PROPERTIES_IFACE, 'PropertiesChanged', 'sa{sv}as',
                   [interface, dbus.Dictionary(changes, signature='sv'), dbus.Array([], signature='s')])


def load(mock, parameters):
    '''Load the stock template, then add what libnm 1.42 reads on the manager.'''
    parameters = dict(parameters or {})
    parameters.setdefault('Version', '1.42.4')
    parameters.setdefault('WwanEnabled', True)
    # No device is connected yet: start disconnected (the stock template
    # starts CONNECTED_GLOBAL with full connectivity and nothing active).
    parameters.setdefault('State', NMState.NM_STATE_DISCONNECTED)
    parameters.setdefault('Connectivity', stock.NMConnectivityState.NM_CONNECTIVITY_NONE)
    for key in ('State', 'Connectivity'):
        if key in parameters:
            parameters[key] = dbus.UInt32(parameters[key])
    stock.load(mock, parameters)

    manager = _manager()
    manager.AddProperties(MANAGER_IFACE, {
        'PrimaryConnection': _o(ROOT),
        'PrimaryConnectionType': dbus.String(''),
        'ActivatingConnection': _o(ROOT),
        'AllDevices': dbus.Array([], signature='o'),
        'Checkpoints': dbus.Array([], signature='o'),
        'Capabilities': dbus.Array([], signature='u'),
        'Metered': dbus.UInt32(parameters.get('Metered', Metered.UNKNOWN)),
        'RadioFlags': dbus.UInt32(parameters.get('RadioFlags',
                                                 RadioFlags.WLAN_AVAILABLE | RadioFlags.WWAN_AVAILABLE)),
        'ConnectivityCheckAvailable': dbus.Boolean(True),
        'ConnectivityCheckEnabled': dbus.Boolean(True),
        'ConnectivityCheckUri': dbus.String('http://conncheck.test/check'),
        'GlobalDnsConfiguration': dbus.Dictionary({}, signature='sv'),
    })
    # DeactivateConnection (the D-Bus method, also what nmcli uses) goes
    # through this template's RemoveActiveConnection, which keeps
    # PrimaryConnection and the global state right.
    manager.deactivate_connection = _deactivate_connection
    # ActivateConnection (nmcli con up) makes the connection primary too.
    manager.activate_connection = _activate_connection
    # InterfacesAdded for the manager again, now that it has every property:
    # the stock load() announced it before the additions.
    mock.object_manager_emit_added(MANAGER_OBJ)


def _activate_connection(self, conn, dev, specific_object):
    if str(dev) == ROOT:
        for candidate in self.Get(MANAGER_IFACE, 'Devices'):
            if conn in dbusmock.get_object(candidate).Get(DEVICE_IFACE, 'AvailableConnections'):
                dev = candidate
                break
        else:
            raise dbus.exceptions.DBusException(f'no device available for {conn}',
                                                name=MANAGER_IFACE + '.UnknownDevice')
    actives = self.Get(MANAGER_IFACE, 'ActiveConnections')
    count = 0
    while f'/org/freedesktop/NetworkManager/ActiveConnection/{count}' in actives:
        count += 1
    return _o(AddPrimaryActiveConnection(self, dev, conn, specific_object, str(count)))


def _deactivate_connection(self, active_conn_path):
    ac = dbusmock.get_object(active_conn_path)
    devices = list(ac.Get(ACTIVE_CONNECTION_IFACE, 'Devices')) or [ROOT]
    for dev_path in devices:
        RemoveActiveConnection(self, dev_path, active_conn_path)


def _add_device(mock, device_name, device_type, iface, ip_iface, state, hw_address,
                type_iface, type_props, type_methods, udi=None):
    '''Add a device with every Device property libnm 1.42 knows, announce it
    with one InterfacesAdded and append it to Devices/AllDevices. Its Udi is
    udi, or its sysfs path.'''
    path = '/org/freedesktop/NetworkManager/Devices/' + device_name
    mock.AddObject(path, type_iface, type_props, type_methods)
    dev_obj = dbusmock.get_object(path)
    dev_obj.access_points = []
    dev_obj.AddProperties(DEVICE_IFACE, {
        'Udi': dbus.String(udi or '/sys/devices/virtual/net/' + (ip_iface or iface)),
        'Path': dbus.String(''),
        'Interface': dbus.String(iface),
        'IpInterface': dbus.String(ip_iface),
        'Driver': dbus.String('dbusmock'),
        'DriverVersion': dbus.String(''),
        'FirmwareVersion': dbus.String(''),
        'Capabilities': dbus.UInt32(0x3),  # NM_SUPPORTED | CARRIER_DETECT
        'Ip4Address': dbus.UInt32(0),
        'State': dbus.UInt32(state),
        'StateReason': dbus.Struct((dbus.UInt32(state), dbus.UInt32(0)), signature='uu'),
        'ActiveConnection': _o(ROOT),
        'Ip4Config': _o(ROOT),
        'Dhcp4Config': _o(ROOT),
        'Ip6Config': _o(ROOT),
        'Dhcp6Config': _o(ROOT),
        'Managed': dbus.Boolean(True),
        'Autoconnect': dbus.Boolean(True),
        'FirmwareMissing': dbus.Boolean(False),
        'NmPluginMissing': dbus.Boolean(False),
        'DeviceType': dbus.UInt32(device_type),
        'AvailableConnections': dbus.Array([], signature='o'),
        'PhysicalPortId': dbus.String(''),
        'Mtu': dbus.UInt32(1500),
        'Metered': dbus.UInt32(Metered.UNKNOWN),
        'LldpNeighbors': dbus.Array([], signature='a{sv}'),
        'Real': dbus.Boolean(True),
        'Ip4Connectivity': dbus.UInt32(stock.NMConnectivityState.NM_CONNECTIVITY_UNKNOWN),
        'Ip6Connectivity': dbus.UInt32(stock.NMConnectivityState.NM_CONNECTIVITY_UNKNOWN),
        'InterfaceFlags': dbus.UInt32(0),
        'HwAddress': dbus.String(hw_address),
        'Ports': dbus.Array([], signature='o'),
    })
    mock.object_manager_emit_added(path)

    manager = _manager()
    changes = {}
    for prop in ('Devices', 'AllDevices'):
        devices = dbus.Array(manager.Get(MANAGER_IFACE, prop), signature='o')
        devices.append(_o(path))
        changes[prop] = devices
    _emit_changed(manager, MANAGER_IFACE, changes)
    manager.EmitSignal(MANAGER_IFACE, 'DeviceAdded', 'o', [_o(path)])
    return path


@dbus.service.method(MOCK_IFACE, in_signature='ssi', out_signature='s')
def AddWiFiDevice(self, device_name, iface_name, state):
    '''Add a Wi-Fi device (DeviceType 2), interface and IP interface
    iface_name. Same signature as the stock template's; returns its path.'''
    return _add_device(self, device_name, DeviceType.WIFI, iface_name, iface_name, state,
                       '11:22:33:44:55:66', WIRELESS_DEVICE_IFACE,
                       {
                           'HwAddress': dbus.String('11:22:33:44:55:66'),
                           'PermHwAddress': dbus.String('11:22:33:44:55:66'),
                           'Bitrate': dbus.UInt32(5400),
                           'Mode': dbus.UInt32(2),
                           'WirelessCapabilities': dbus.UInt32(255),
                           'AccessPoints': dbus.Array([], signature='o'),
                           'ActiveAccessPoint': _o(ROOT),
                           'LastScan': dbus.Int64(-1),
                       },
                       [
                           ('GetAccessPoints', '', 'ao', 'ret = self.access_points'),
                           ('GetAllAccessPoints', '', 'ao', 'ret = self.access_points'),
                           ('RequestScan', 'a{sv}', '', ''),
                       ])


@dbus.service.method(MOCK_IFACE, in_signature='ssi', out_signature='s')
def AddEthernetDevice(self, device_name, iface_name, state):
    '''Add a wired Ethernet device (DeviceType 1). Same signature as the
    stock template's; returns its path.'''
    return _add_device(self, device_name, DeviceType.ETHERNET, iface_name, iface_name, state,
                       '78:DD:08:D2:3D:43', WIRED_DEVICE_IFACE,
                       {
                           'Carrier': dbus.Boolean(state >= DeviceState.DISCONNECTED),
                           'HwAddress': dbus.String('78:DD:08:D2:3D:43'),
                           'PermHwAddress': dbus.String('78:DD:08:D2:3D:43'),
                           'Speed': dbus.UInt32(1000),
                           'S390Subchannels': dbus.Array([], signature='s'),
                       },
                       [])


@dbus.service.method(MOCK_IFACE, in_signature='sssiuu', out_signature='s')
def AddModemDevice(self, device_name, iface_name, ip_iface, state, modem_capabilities,
                   current_capabilities):
    '''Add a mobile broadband modem (DeviceType 8) with the Device.Modem
    interface.

    iface_name is the control interface (e.g. "cdc-wdm0"), ip_iface the
    kernel link that carries IP (e.g. "wwan0"); modem_capabilities and
    current_capabilities are NMDeviceModemCapabilities bits (GSM_UMTS 0x4,
    LTE 0x8, 5GNR 0x40). Its Udi is ModemManager's object for it,
    /org/freedesktop/ModemManager1/Modem/N, N counting the modems added
    before it from 0. Returns the new object path.
    '''
    modems = [d for d in _manager().Get(MANAGER_IFACE, 'Devices')
              if dbusmock.get_object(d).Get(DEVICE_IFACE, 'DeviceType') == DeviceType.MODEM]
    return _add_device(self, device_name, DeviceType.MODEM, iface_name, ip_iface, state,
                       '', MODEM_DEVICE_IFACE,
                       {
                           'ModemCapabilities': dbus.UInt32(modem_capabilities),
                           'CurrentCapabilities': dbus.UInt32(current_capabilities),
                           'DeviceId': dbus.String('dbusmock-modem-0'),
                           'OperatorCode': dbus.String('00101'),
                           'Apn': dbus.String(''),
                       },
                       [], udi=f'/org/freedesktop/ModemManager1/Modem/{len(modems)}')


@dbus.service.method(MOCK_IFACE, in_signature='sy', out_signature='')
def SetAccessPointStrength(_self, access_point_path, strength):
    '''Set an access point's Strength (0-100 %) and announce it in one
    standard PropertiesChanged, as NetworkManager does while connected.'''
    _emit_changed(dbusmock.get_object(access_point_path), stock.ACCESS_POINT_IFACE,
                  {'Strength': dbus.Byte(strength)})


@dbus.service.method(MOCK_IFACE, in_signature='ss', out_signature='')
def SetActiveAccessPoint(_self, device_path, access_point_path):
    '''Set a Wi-Fi device's ActiveAccessPoint ("/" for none) and its active
    connection's SpecificObject, each in one PropertiesChanged, as
    NetworkManager does when the device roams to another access point (and,
    between two, for a moment to none).'''
    dev_obj = dbusmock.get_object(device_path)
    _emit_changed(dev_obj, WIRELESS_DEVICE_IFACE, {'ActiveAccessPoint': _o(access_point_path)})
    active = dev_obj.Get(DEVICE_IFACE, 'ActiveConnection')
    if active != ROOT and access_point_path != ROOT:
        _emit_changed(dbusmock.get_object(active), ACTIVE_CONNECTION_IFACE,
                      {'SpecificObject': _o(access_point_path)})


@dbus.service.method(MOCK_IFACE, in_signature='suu', out_signature='')
def SetDeviceState(_self, device_path, state, reason):
    '''Set a device's State (any NMDeviceState) and StateReason in one
    PropertiesChanged, then emit Device.StateChanged(new, old, reason).

    It leaves ActiveConnection alone: use AddPrimaryActiveConnection /
    RemoveActiveConnection to change what is active.'''
    dev_obj = dbusmock.get_object(device_path)
    old_state = dev_obj.Get(DEVICE_IFACE, 'State')
    _emit_changed(dev_obj, DEVICE_IFACE, {
        'State': dbus.UInt32(state),
        'StateReason': dbus.Struct((dbus.UInt32(state), dbus.UInt32(reason)), signature='uu'),
    })
    dev_obj.EmitSignal(DEVICE_IFACE, 'StateChanged', 'uuu',
                       [dbus.UInt32(state), dbus.UInt32(old_state), dbus.UInt32(reason)])


@dbus.service.method(MOCK_IFACE, in_signature='ssa{sv}', out_signature='s')
def AddDeviceConnection(self, device_path, connection_name, settings):
    '''Add a saved connection profile for a device, available on it.

    settings is a flat dict of "setting.property" → value (for example
    {"connection.type": "gsm", "connection.id": "Mobile", "gsm.apn":
    "internet"}); connection.uuid is generated when missing. Returns the
    Settings.Connection path (/org/freedesktop/NetworkManager/Settings/NAME).
    '''
    connection_path = SETTINGS_OBJ + '/' + connection_name
    nested = {}
    for key, value in settings.items():
        group, _, prop = str(key).partition('.')
        nested.setdefault(group, {})[prop] = value
    nested.setdefault('connection', {}).setdefault('id', connection_name)
    nested['connection'].setdefault('uuid', str(stock.uuid.uuid4()))
    if 'type' not in nested['connection']:
        raise dbus.exceptions.DBusException('connection.type is required',
                                            name=MANAGER_IFACE + '.InvalidArgument')

    self.AddObject(connection_path, CSETTINGS_IFACE,
                   {'Unsaved': False, 'Flags': dbus.UInt32(0), 'Filename': dbus.String('')},
                   [
                       ('Delete', '', '', 'self.ConnectionDelete(self)'),
                       ('GetSettings', '', 'a{sa{sv}}', 'ret = self.ConnectionGetSettings(self)'),
                       ('GetSecrets', 's', 'a{sa{sv}}', 'ret = self.ConnectionGetSecrets(self, args[0])'),
                       ('Update', 'a{sa{sv}}', '', 'self.ConnectionUpdate(self, args[0])'),
                   ])
    conn_obj = dbusmock.get_object(connection_path)
    conn_obj.settings = nested
    conn_obj.connection_path = connection_path
    conn_obj.ConnectionDelete = stock.ConnectionDelete
    conn_obj.ConnectionGetSettings = stock.ConnectionGetSettings
    conn_obj.ConnectionGetSecrets = stock.ConnectionGetSecrets
    conn_obj.ConnectionUpdate = stock.ConnectionUpdate
    self.object_manager_emit_added(connection_path)

    settings_obj = dbusmock.get_object(SETTINGS_OBJ)
    connections = dbus.Array(settings_obj.Get(SETTINGS_IFACE, 'Connections'), signature='o')
    connections.append(_o(connection_path))
    _emit_changed(settings_obj, SETTINGS_IFACE, {'Connections': connections})
    settings_obj.EmitSignal(SETTINGS_IFACE, 'NewConnection', 'o', [_o(connection_path)])

    if device_path and device_path != ROOT:
        dev_obj = dbusmock.get_object(device_path)
        available = dbus.Array(dev_obj.Get(DEVICE_IFACE, 'AvailableConnections'), signature='o')
        available.append(_o(connection_path))
        _emit_changed(dev_obj, DEVICE_IFACE, {'AvailableConnections': available})
    return connection_path


def _add_active_connection(self, device_path, connection_path, specific_object, name, state):
    """Add an active connection object for one device (not yet pointed at by
    the device or the manager) and announce it with InterfacesAdded."""
    conn_settings = dbusmock.get_object(connection_path).settings['connection']
    conn_type = str(conn_settings['type'])
    ac_path = '/org/freedesktop/NetworkManager/ActiveConnection/' + name
    if ac_path in _manager().Get(MANAGER_IFACE, 'ActiveConnections'):
        raise dbus.exceptions.DBusException(f'active connection {name} already exists',
                                            name=MANAGER_IFACE + '.AlreadyExists')
    activated = state == NMActiveConnectionState.NM_ACTIVE_CONNECTION_STATE_ACTIVATED
    self.AddObject(ac_path, ACTIVE_CONNECTION_IFACE, {
        'Connection': _o(connection_path),
        'SpecificObject': _o(specific_object or ROOT),
        'Id': dbus.String(conn_settings.get('id', name)),
        'Uuid': dbus.String(conn_settings['uuid']),
        'Type': dbus.String(conn_type),
        'Devices': dbus.Array([_o(device_path)], signature='o'),
        'State': dbus.UInt32(state),
        'StateFlags': dbus.UInt32(0xc if activated else 0),  # LAYER2_READY | IP4_READY
        'Default': dbus.Boolean(False),
        'Ip4Config': _o(ROOT),
        'Dhcp4Config': _o(ROOT),
        'Default6': dbus.Boolean(False),
        'Ip6Config': _o(ROOT),
        'Dhcp6Config': _o(ROOT),
        'Vpn': dbus.Boolean(conn_type == 'vpn'),
        'Master': _o(ROOT),
    }, [])
    self.object_manager_emit_added(ac_path)

    dev_obj = dbusmock.get_object(device_path)
    if dev_obj.Get(DEVICE_IFACE, 'DeviceType') == DeviceType.WIFI and specific_object not in ('', ROOT):
        _emit_changed(dev_obj, WIRELESS_DEVICE_IFACE, {'ActiveAccessPoint': _o(specific_object)})
    _emit_changed(dev_obj, DEVICE_IFACE, {'ActiveConnection': _o(ac_path)})
    return ac_path


def _set_global_state(manager, changes, state):
    """Emit changes (plus State) on the manager, then StateChanged if the
    global state changed."""
    old_state = manager.Get(MANAGER_IFACE, 'State')
    changes['State'] = dbus.UInt32(state)
    _emit_changed(manager, MANAGER_IFACE, changes)
    if old_state != state:
        manager.EmitSignal(MANAGER_IFACE, 'StateChanged', 'u', [dbus.UInt32(state)])


def _make_primary(self, ac_path):
    """Mark an active connection ACTIVATED and Default, its device
    ACTIVATED, and make it the manager's PrimaryConnection (State 70)."""
    ac_obj = dbusmock.get_object(ac_path)
    manager = _manager()
    actives = list(manager.Get(MANAGER_IFACE, 'ActiveConnections'))
    for other in actives:
        other_obj = dbusmock.get_object(other)
        if other != ac_path and other_obj.Get(ACTIVE_CONNECTION_IFACE, 'Default'):
            _emit_changed(other_obj, ACTIVE_CONNECTION_IFACE, {'Default': dbus.Boolean(False)})
    _emit_changed(ac_obj, ACTIVE_CONNECTION_IFACE, {
        'State': dbus.UInt32(NMActiveConnectionState.NM_ACTIVE_CONNECTION_STATE_ACTIVATED),
        'StateFlags': dbus.UInt32(0xc),
        'Default': dbus.Boolean(True),
    })
    ac_obj.EmitSignal(ACTIVE_CONNECTION_IFACE, 'StateChanged', 'uu',
                      [dbus.UInt32(NMActiveConnectionState.NM_ACTIVE_CONNECTION_STATE_ACTIVATED),
                       dbus.UInt32(0)])
    device_path = ac_obj.Get(ACTIVE_CONNECTION_IFACE, 'Devices')[0]
    dev_obj = dbusmock.get_object(device_path)
    SetDeviceState(self, device_path, DeviceState.ACTIVATED, 0)

    if ac_path not in actives:
        actives.append(_o(ac_path))
    changes = {
        'ActiveConnections': dbus.Array(actives, signature='o'),
        'PrimaryConnection': _o(ac_path),
        'PrimaryConnectionType': ac_obj.Get(ACTIVE_CONNECTION_IFACE, 'Type'),
        'Metered': dbus.UInt32(dev_obj.Get(DEVICE_IFACE, 'Metered')),
    }
    if manager.Get(MANAGER_IFACE, 'ActivatingConnection') == ac_path:
        changes['ActivatingConnection'] = _o(ROOT)
    _set_global_state(manager, changes, NMState.NM_STATE_CONNECTED_GLOBAL)


@dbus.service.method(MOCK_IFACE, in_signature='ssss', out_signature='s')
def AddPrimaryActiveConnection(self, device_path, connection_path, specific_object, name):
    '''Activate connection_path on device_path and make it the primary
    connection, in one step.

    Adds /org/freedesktop/NetworkManager/ActiveConnection/NAME (state
    ACTIVATED, Default true) and announces it with InterfacesAdded before
    anything points at it; then sets the device's ActiveConnection and State
    100 (with StateChanged), clears Default on every other active
    connection, and updates the manager's ActiveConnections,
    PrimaryConnection, PrimaryConnectionType, Metered (the device's) and
    State (70, with StateChanged). specific_object is the access point for
    Wi-Fi, "/" otherwise. Returns the active connection's path.
    '''
    ac_path = _add_active_connection(self, device_path, connection_path, specific_object, name,
                                     NMActiveConnectionState.NM_ACTIVE_CONNECTION_STATE_ACTIVATED)
    _make_primary(self, ac_path)
    return ac_path


@dbus.service.method(MOCK_IFACE, in_signature='ssssu', out_signature='s')
def AddActivatingConnection(self, device_path, connection_path, specific_object, name, device_state):
    '''Start activating connection_path on device_path.

    Adds the active connection NAME in state ACTIVATING (announced with
    InterfacesAdded), points the device at it and puts the device in
    device_state (PREPARE 40, CONFIG 50, NEED_AUTH 60, IP_CONFIG 70 ...,
    with StateChanged); the manager lists it in ActiveConnections and as
    ActivatingConnection, and its State becomes CONNECTING (40) unless a
    connection is already up. Finish with CompleteActivation (or
    RemoveActiveConnection for a failure). Returns the active connection's
    path.
    '''
    ac_path = _add_active_connection(self, device_path, connection_path, specific_object, name,
                                     NMActiveConnectionState.NM_ACTIVE_CONNECTION_STATE_ACTIVATING)
    SetDeviceState(self, device_path, device_state, 0)
    manager = _manager()
    actives = list(manager.Get(MANAGER_IFACE, 'ActiveConnections')) + [_o(ac_path)]
    changes = {'ActiveConnections': dbus.Array(actives, signature='o'), 'ActivatingConnection': _o(ac_path)}
    if manager.Get(MANAGER_IFACE, 'PrimaryConnection') == ROOT:
        _set_global_state(manager, changes, NMState.NM_STATE_CONNECTING)
    else:
        _emit_changed(manager, MANAGER_IFACE, changes)
    return ac_path


@dbus.service.method(MOCK_IFACE, in_signature='s', out_signature='')
def CompleteActivation(self, active_connection_path):
    '''Finish an activation begun with AddActivatingConnection: the
    connection becomes ACTIVATED, Default and the PrimaryConnection; its
    device goes to ACTIVATED; the global state to CONNECTED_GLOBAL (70).'''
    _make_primary(self, active_connection_path)


@dbus.service.method(MOCK_IFACE, in_signature='ss', out_signature='')
def RemoveActiveConnection(self, dev_path, active_connection_path):
    '''Deactivate an active connection: the device goes to DISCONNECTED
    (30) with no ActiveConnection; the object leaves ActiveConnections,
    ActivatingConnection and PrimaryConnection (which moves to the first
    remaining activated connection, if any, that also becomes Default) and
    is removed with InterfacesRemoved. With no connection up any more the
    global state becomes CONNECTING (40) or DISCONNECTED (20). Same
    signature as the stock template's.
    '''
    manager = _manager()
    actives = list(manager.Get(MANAGER_IFACE, 'ActiveConnections'))
    if dev_path and dev_path != ROOT:
        dev_obj = dbusmock.get_object(dev_path)
        if dev_obj.Get(DEVICE_IFACE, 'ActiveConnection') == active_connection_path:
            _emit_changed(dev_obj, DEVICE_IFACE, {'ActiveConnection': _o(ROOT)})
            if dev_obj.Get(DEVICE_IFACE, 'DeviceType') == DeviceType.WIFI:
                _emit_changed(dev_obj, WIRELESS_DEVICE_IFACE, {'ActiveAccessPoint': _o(ROOT)})
            SetDeviceState(self, dev_path, DeviceState.DISCONNECTED, 39)  # USER_REQUESTED
    if active_connection_path not in actives:
        return

    actives.remove(active_connection_path)
    changes = {'ActiveConnections': dbus.Array(actives, signature='o')}
    if manager.Get(MANAGER_IFACE, 'ActivatingConnection') == active_connection_path:
        changes['ActivatingConnection'] = _o(ROOT)
    if manager.Get(MANAGER_IFACE, 'PrimaryConnection') == active_connection_path:
        # The next activated connection, if any, takes the default route over.
        primary, primary_type, metered = ROOT, '', Metered.UNKNOWN
        for other in actives:
            other_obj = dbusmock.get_object(other)
            if other_obj.Get(ACTIVE_CONNECTION_IFACE, 'State') == \
                    NMActiveConnectionState.NM_ACTIVE_CONNECTION_STATE_ACTIVATED:
                if not other_obj.Get(ACTIVE_CONNECTION_IFACE, 'Default'):
                    _emit_changed(other_obj, ACTIVE_CONNECTION_IFACE, {'Default': dbus.Boolean(True)})
                primary = other
                primary_type = other_obj.Get(ACTIVE_CONNECTION_IFACE, 'Type')
                devs = other_obj.Get(ACTIVE_CONNECTION_IFACE, 'Devices')
                if devs:
                    metered = dbusmock.get_object(devs[0]).Get(DEVICE_IFACE, 'Metered')
                break
        changes['PrimaryConnection'] = _o(primary)
        changes['PrimaryConnectionType'] = dbus.String(primary_type)
        changes['Metered'] = dbus.UInt32(metered)
    if actives and changes.get('PrimaryConnection', manager.Get(MANAGER_IFACE, 'PrimaryConnection')) != ROOT:
        _emit_changed(manager, MANAGER_IFACE, changes)
    else:
        _set_global_state(manager, changes,
                          NMState.NM_STATE_CONNECTING if actives else NMState.NM_STATE_DISCONNECTED)

    ac_obj = dbusmock.get_object(active_connection_path)
    _emit_changed(ac_obj, ACTIVE_CONNECTION_IFACE, {
        'State': dbus.UInt32(NMActiveConnectionState.NM_ACTIVE_CONNECTION_STATE_DEACTIVATED)})
    self.object_manager_emit_removed(active_connection_path)
    self.RemoveObject(active_connection_path)


@dbus.service.method(MOCK_IFACE, in_signature='su', out_signature='')
def SetDeviceMetered(_self, device_path, metered):
    '''Set a device's Metered (NMMetered: 1 yes, 2 no, 3 guess-yes, 4
    guess-no); the manager's Metered follows when the device carries the
    primary connection.'''
    dev_obj = dbusmock.get_object(device_path)
    _emit_changed(dev_obj, DEVICE_IFACE, {'Metered': dbus.UInt32(metered)})
    manager = _manager()
    primary = manager.Get(MANAGER_IFACE, 'PrimaryConnection')
    if primary != ROOT and dev_obj.Get(DEVICE_IFACE, 'ActiveConnection') == primary:
        _emit_changed(manager, MANAGER_IFACE, {'Metered': dbus.UInt32(metered)})
