declare module "parse-prometheus-text-format" {
  /** One sample of a counter, gauge or untyped family. */
  export interface PromSample {
    readonly value: string
    readonly labels?: Record<string, string>
  }
  /** One series of a histogram family (buckets keyed by `le`). */
  export interface PromHistogramSample {
    readonly buckets: Record<string, string>
    readonly count: string
    readonly sum: string
    readonly labels?: Record<string, string>
  }
  /** One metric family. */
  export interface PromFamily {
    readonly name: string
    readonly help: string
    readonly type: "COUNTER" | "GAUGE" | "HISTOGRAM" | "SUMMARY" | "UNTYPED"
    readonly metrics: ReadonlyArray<PromSample | PromHistogramSample>
  }
  /** Parses a Prometheus text exposition document. */
  export default function parsePrometheusTextFormat(text: string): Array<PromFamily>
}
