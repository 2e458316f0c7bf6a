'''ModemManager mock template for reachabilityd's integration tests

The part of ModemManager's D-Bus API (``org.freedesktop.ModemManager1``) the
daemon reads: each modem's ``org.freedesktop.ModemManager1.Modem``
``SignalQuality`` (ub: percent, recent), which libnm does not carry.
python-dbusmock has no ModemManager template of its own in the versions
Debian ships, so this is a small one.

The manager object ``/org/freedesktop/ModemManager1`` is an object manager,
as ModemManager's; every modem added is announced with ``InterfacesAdded``
and every change goes out as one standard
``org.freedesktop.DBus.Properties.PropertiesChanged``.

Mock methods (``org.freedesktop.DBus.Mock`` on the manager object):

- ``AddModem(u quality, b recent) → o``: the next modem,
  ``/org/freedesktop/ModemManager1/Modem/N`` (N from 0), as NetworkManager's
  template names the ``Udi`` of its modem devices;
- ``SetSignalQuality(o modem, u quality, b recent)``;
- ``RemoveModem(o modem)``.
'''

import dbus

import dbusmock
from dbusmock import MOCK_IFACE

BUS_NAME = 'org.freedesktop.ModemManager1'
MAIN_OBJ = '/org/freedesktop/ModemManager1'
MAIN_IFACE = 'org.freedesktop.ModemManager1'
MODEM_IFACE = 'org.freedesktop.ModemManager1.Modem'
SYSTEM_BUS = True
IS_OBJECT_MANAGER = True

# MMModemState
MODEM_STATE_CONNECTED = 11


def load(mock, _parameters):
    '''The manager: its methods do nothing, its version is a real one.'''
    mock.AddMethods(MAIN_IFACE, [
        ('ScanDevices', '', '', ''),
        ('SetLogging', 's', '', ''),
    ])
    mock.AddProperties(MAIN_IFACE, {'Version': dbus.String('1.20.4')})
    mock.modems = 0


def _signal_quality(quality, recent):
    return dbus.Struct((dbus.UInt32(quality), dbus.Boolean(recent)), signature='ub')


@dbus.service.method(MOCK_IFACE, in_signature='ub', out_signature='o')
def AddModem(self, quality, recent):
    '''Add a connected modem with this SignalQuality; returns its path.'''
    path = f'{MAIN_OBJ}/Modem/{self.modems}'
    self.modems += 1
    self.AddObject(path, MODEM_IFACE, {
        'SignalQuality': _signal_quality(quality, recent),
        'State': dbus.Int32(MODEM_STATE_CONNECTED),
        'Manufacturer': dbus.String('dbusmock'),
        'Model': dbus.String('modem'),
        'PrimaryPort': dbus.String('cdc-wdm0'),
        'AccessTechnologies': dbus.UInt32(0x4000),  # LTE
    }, [])
    self.object_manager_emit_added(path)
    return dbus.ObjectPath(path)


@dbus.service.method(MOCK_IFACE, in_signature='oub', out_signature='')
def SetSignalQuality(_self, modem, quality, recent):
    '''Set a modem's SignalQuality, announced in one PropertiesChanged.'''
    # Set and announced by hand: dbusmock's UpdateProperties cannot wrap a structure.
    obj = dbusmock.get_object(modem)
    value = _signal_quality(quality, recent)
    obj.props[MODEM_IFACE]['SignalQuality'] = value
    obj.EmitSignal(dbus.PROPERTIES_IFACE, 'PropertiesChanged', 'sa{sv}as',
                   [MODEM_IFACE, dbus.Dictionary({'SignalQuality': value}, signature='sv'),
                    dbus.Array([], signature='s')])


@dbus.service.method(MOCK_IFACE, in_signature='o', out_signature='')
def RemoveModem(self, modem):
    '''Remove a modem (InterfacesRemoved).'''
    self.object_manager_emit_removed(modem)
    self.RemoveObject(modem)
