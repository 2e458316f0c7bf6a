import CoreMetrics
import Prometheus
import ReachabilityLoop

/// The exporter chosen once, here: swift-metrics' handles made by swift-prometheus,
/// each metric with its help text (`Instruments.Metric.help`, which Prometheus's own
/// checker asks for), rendered on demand as the Prometheus text format. No port.
struct PrometheusExport: MetricsFactory {
    let registry = PrometheusCollectorRegistry()
    private let destroying: PrometheusMetricsFactory

    init() { destroying = PrometheusMetricsFactory(registry: registry) }

    /// Evaluation times: 100 µs to 1 s (the goal is 5 ms).
    static let buckets: [Duration] = [
        .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2),
        .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
        .milliseconds(250), .seconds(1),
    ]

    /// The metric's name, and its help text (the label itself for a metric not declared there).
    private func descriptor(_ label: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: label, unitName: "", helpText: Instruments.Metric(rawValue: label)?.help ?? label)
    }

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        registry.makeCounter(descriptor: descriptor(label), labels: dimensions)
    }

    func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
        registry.makeCounter(descriptor: descriptor(label), labels: dimensions)
    }

    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        // The service's recorders are all gauges (a value now, not a distribution).
        registry.makeGauge(descriptor: descriptor(label), labels: dimensions)
    }

    func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
        registry.makeGauge(descriptor: descriptor(label), labels: dimensions)
    }

    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        registry.makeDurationHistogram(descriptor: descriptor(label), labels: dimensions, buckets: Self.buckets)
    }

    func destroyCounter(_ handler: any CounterHandler) { destroying.destroyCounter(handler) }
    func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {
        destroying.destroyFloatingPointCounter(handler)
    }
    func destroyRecorder(_ handler: any RecorderHandler) { destroying.destroyRecorder(handler) }
    func destroyMeter(_ handler: any MeterHandler) { destroying.destroyMeter(handler) }
    func destroyTimer(_ handler: any TimerHandler) { destroying.destroyTimer(handler) }

    /// Bootstraps swift-metrics with this exporter; returns the text renderer for `Metrics.Read`.
    static func bootstrap() -> @Sendable () -> String {
        let export = PrometheusExport()
        MetricsSystem.bootstrap(export)
        let registry = export.registry
        return { registry.emitToString() }
    }
}
