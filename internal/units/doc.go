// Package units is the one parser of the quantities and durations people write
// in Strata's files: daemon configs, job files and simulator scenarios all read
// them here, so "512Mi", "2G" and "500ms" mean the same in each.
//
// A quantity is a number ≥ 0 with an optional unit: Ki, Mi, Gi, Ti (×1024ⁿ) or
// k, K, M, G, T (×1000ⁿ). A duration is a Go duration with a unit ("500ms",
// "2s", "1m30s") or "0", ≥ 0 and within time.Duration's range (about 292
// years); a bare number such as "50" is refused as ambiguous (milliseconds or
// seconds?). NaN, infinities, negative values and overflow are refused with an
// error that says what is wanted.
//
// The package is pure (stdlib and yaml.v3's node type only).
package units
