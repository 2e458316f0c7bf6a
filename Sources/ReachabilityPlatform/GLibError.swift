import CGLib

/// Reads a `GError` a GLib call gave back, once for the project: its message, and
/// whether it says the call was cancelled (`G_IO_ERROR_CANCELLED`: ours, not a failure).
enum GLibError {
    /// The message and whether it is a cancellation; frees `error`.
    static func take(_ error: UnsafeMutablePointer<GError>) -> (message: String, cancelled: Bool) {
        defer { g_error_free(error) }
        let cancelled = g_error_matches(error, g_io_error_quark(), Int32(G_IO_ERROR_CANCELLED.rawValue)) != 0
        return (String(cString: error.pointee.message), cancelled)
    }
}
