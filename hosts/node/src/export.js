// Export of the journal to the tools operators run (ARCHITECTURE.md, "Export"). What each
// sink receives and where an export resumes are the component's (`exporter`); this module
// hands each batch to the sink's official library and says when the receiver took it:
// OTLP through OpenTelemetry's JS SDK exporters (`@opentelemetry/exporter-trace-otlp-proto`,
// `-metrics-otlp-proto`), the file sinks as JSON lines appended and fsynced. Node only.
import fs from 'node:fs/promises';
import { InterlockError } from './errors.js';

/**
 * The component refused an export call (WIT `export-error`; `case` is its spelling:
 * `unknown-sink`, `invalid-destination`, `file-mismatch`, `elsewhere`, ...). Nothing was
 * recorded.
 */
export class ExportError extends InterlockError {
  /**
   * @param {string} kase
   * @param {unknown} payload
   */
  constructor(kase, payload) {
    const p = /** @type {any} */ (payload);
    const text = p && typeof p === 'object' && 'message' in p ? p.message : String(payload);
    super(`${kase}: ${text}`);
    this.case = kase;
    this.payload = payload;
  }
}

/**
 * The sink did not take a batch (a receiver that answered an error or is down, a file that
 * could not be written). The position stays: the batch is sent again next time.
 */
export class ExportFailedError extends InterlockError {}

/**
 * @import { Gate } from './gate.js'
 * @typedef {{ sink: string, destination: string, stream: string, exported: number, batches: number, records: number, resent: number }} ExportReport
 * @typedef {{ out?: string, name?: string, content?: boolean, maxRecords?: number, timeoutMs?: number }} ExportOptions
 */

/**
 * An `exporter` call; its `err` becomes an ExportError.
 * @param {Gate} gate
 * @param {string} name
 * @param {...unknown} args
 * @returns {any}
 */
function call(gate, name, ...args) {
  try {
    return /** @type {any} */ (gate.call)('exporter', name, ...args);
  } catch (e) {
    const g = /** @type {any} */ (e);
    if (g && typeof g.case === 'string' && 'payload' in g) throw new ExportError(g.case, g.payload);
    throw e;
  }
}

/** @param {number} ms */
const hr = (ms) => /** @type {[number, number]} */ ([Math.floor(ms / 1000), (ms % 1000) * 1e6]);

/** Spans and metrics through the OpenTelemetry JS SDK's OTLP/HTTP (protobuf) exporters. */
class Otlp {
  /**
   * @param {Gate} gate
   * @param {string} tracesUrl
   * @param {string} metricsUrl
   * @param {number} timeoutMs
   */
  static async create(gate, tracesUrl, metricsUrl, timeoutMs) {
    const [{ OTLPTraceExporter }, { OTLPMetricExporter }, { resourceFromAttributes }, metrics, core] = await Promise.all([
      import('@opentelemetry/exporter-trace-otlp-proto'),
      import('@opentelemetry/exporter-metrics-otlp-proto'),
      import('@opentelemetry/resources'),
      import('@opentelemetry/sdk-metrics'),
      import('@opentelemetry/core'),
    ]);
    const meta = JSON.parse(call(gate, 'otlpResource'));
    return new Otlp({
      traces: new OTLPTraceExporter({ url: tracesUrl, timeoutMillis: timeoutMs }),
      metrics: new OTLPMetricExporter({ url: metricsUrl, timeoutMillis: timeoutMs }),
      resource: resourceFromAttributes(meta.resource),
      scope: meta.scope,
      metricsApi: metrics,
      success: core.ExportResultCode.SUCCESS,
      url: tracesUrl,
    });
  }

  /** @param {{ traces: any, metrics: any, resource: any, scope: any, metricsApi: any, success: number, url: string }} p */
  constructor(p) {
    this.traces = p.traces;
    this.metrics = p.metrics;
    this.resource = p.resource;
    this.scope = p.scope;
    this.metricsApi = p.metricsApi;
    this.success = p.success;
    this.url = p.url;
  }

  /**
   * @param {any} exporter
   * @param {unknown} items
   * @returns {Promise<any>}
   */
  static send(exporter, items) {
    return new Promise((resolve) => exporter.export(items, resolve));
  }

  /** @param {any[]} records */
  async send(records) {
    const o = this;
    const spans = records.filter((r) => r.kind === 'span').map((r) => this.span(r));
    const metrics = records.filter((r) => r.kind === 'metric');
    if (spans.length) {
      const r = await Otlp.send(o.traces, spans);
      if (r.code !== o.success) throw new ExportFailedError(`the OTLP receiver at ${o.url} did not take ${spans.length} spans: ${r.error?.message ?? r.code}`);
    }
    if (metrics.length) {
      const r = await Otlp.send(o.metrics, this.metricsData(metrics));
      if (r.code !== o.success) throw new ExportFailedError(`the OTLP receiver did not take the metric batch: ${r.error?.message ?? r.code}`);
    }
  }

  /**
   * A ReadableSpan (sdk-trace-base 2.x) from a span record.
   * @param {any} r
   */
  span(r) {
    const o = this;
    const context = (/** @type {string} */ spanId) => ({ traceId: r.trace_id, spanId, traceFlags: 1 });
    return {
      name: r.name,
      kind: 0, // SpanKind.INTERNAL
      spanContext: () => context(r.span_id),
      parentSpanContext: r.parent_span_id ? context(r.parent_span_id) : undefined,
      startTime: hr(r.start_ms),
      endTime: hr(r.end_ms),
      duration: hr(r.end_ms - r.start_ms),
      status: r.status === 'error' ? { code: 2, message: r.status_message } : { code: 0 },
      attributes: r.attributes,
      links: [],
      events: r.events.map((/** @type {any} */ e) => ({ name: e.name, attributes: e.attributes, time: hr(e.time_ms), droppedAttributesCount: 0 })),
      ended: true,
      resource: o.resource,
      instrumentationScope: o.scope,
      droppedAttributesCount: 0,
      droppedEventsCount: 0,
      droppedLinksCount: 0,
    };
  }

  /**
   * ResourceMetrics (sdk-metrics 2.x) from metric records: cumulative histograms.
   * @param {any[]} records
   */
  metricsData(records) {
    const o = this;
    const { AggregationTemporality, DataPointType } = o.metricsApi;
    return {
      resource: o.resource,
      scopeMetrics: [{
        scope: o.scope,
        metrics: records.map((m) => ({
          descriptor: { name: m.name, description: m.description, unit: m.unit, valueType: 1 /* ValueType.DOUBLE */ },
          aggregationTemporality: AggregationTemporality.CUMULATIVE,
          dataPointType: DataPointType.HISTOGRAM,
          dataPoints: m.points.map((/** @type {any} */ p) => ({
            attributes: p.attributes,
            startTime: hr(m.start_ms),
            endTime: hr(m.time_ms),
            value: { buckets: { boundaries: m.bounds, counts: p.bucket_counts }, sum: p.sum, count: p.count, min: p.min, max: p.max },
          })),
        })),
      }],
    };
  }

  async shutdown() {
    const o = this;
    await Promise.all([o.traces.shutdown(), o.metrics.shutdown()]);
  }
}

/**
 * Exports what the journal holds past the position `export:<name>` to `to` (`otlp=URL`,
 * `bigquery`, `cloud-logging`, `siem`; a file sink writes JSON lines to `out`). Resumes
 * where the last run stopped; a batch a crash left in doubt is sent again first, the same
 * records under the same ids. `content`: OTLP spans carry the tool's arguments and result
 * (opt-in in the conventions).
 * @param {Gate} gate
 * @param {string} to
 * @param {ExportOptions} [options]
 * @returns {Promise<ExportReport>}
 */
export async function runExport(gate, to, { out, name, content = false, maxRecords = 512, timeoutMs = 10_000 } = {}) {
  const length = out === undefined ? undefined : await fs.stat(out).then((s) => BigInt(s.size), () => undefined);
  const opened = call(gate, 'open', to, out, name, content, length);
  const report = { sink: opened.sink, destination: opened.destination, stream: opened.stream, exported: Number(opened.exported), batches: 0, records: 0, resent: 0 };
  const otlp = opened.sink === 'otlp' ? await Otlp.create(gate, opened.tracesUrl, opened.metricsUrl, timeoutMs) : undefined;
  const file = out === undefined ? undefined : await fs.open(out, fs.constants.O_WRONLY | fs.constants.O_CREAT, 0o600);
  try {
    if (file && opened.truncateTo !== undefined) {
      await file.truncate(Number(opened.truncateTo));
      await file.sync();
    }
    for (;;) {
      const batch = call(gate, 'next', maxRecords);
      if (batch === undefined) return report;
      if (otlp) {
        await otlp.send(batch.records.map((/** @type {string} */ r) => JSON.parse(r)));
        call(gate, 'sent', batch.id, undefined);
      } else if (file) {
        const { size } = await file.stat();
        await file.write(batch.records.map((/** @type {string} */ r) => `${r}\n`).join(''), size);
        await file.sync();
        call(gate, 'sent', batch.id, BigInt((await file.stat()).size));
      }
      report.batches += 1;
      report.records += batch.records.length;
      if (batch.resend) report.resent += batch.records.length;
      report.exported = Number(batch.exported);
    }
  } finally {
    await file?.close();
    await otlp?.shutdown();
  }
}
