package sim

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

// Report is the JSON form of a run: the seed, one summary per policy and every
// assertion's result. Passed is false when any assertion failed.
type Report struct {
	Scenario   string            `json:"scenario"`
	Seed       uint64            `json:"seed"`
	Duration   string            `json:"duration"`
	Tick       string            `json:"tick"`
	Shards     int               `json:"shards"`
	Hosts      int               `json:"hosts"`
	Racks      int               `json:"racks,omitempty"`
	Policies   []Summary         `json:"policies"`
	Assertions []AssertionResult `json:"assertions"`
	Passed     bool              `json:"passed"`
}

// Report returns the JSON form of the result.
func (r *Result) Report(sc *Scenario) Report {
	rep := Report{Scenario: r.Scenario, Seed: r.Seed, Duration: sc.Duration.D().String(), Tick: sc.Tick.D().String(), Passed: true}
	rep.Shards, rep.Hosts, rep.Racks = r.Shards, r.Hosts, r.Racks
	for _, p := range r.Policies {
		rep.Policies = append(rep.Policies, p.Summary)
		for _, a := range p.Assertions {
			if a.Kind == AssertVersus {
				continue // cross-policy: evaluated below, once all policies ran
			}
			rep.Assertions = append(rep.Assertions, a)
			if !a.Passed {
				rep.Passed = false
			}
		}
	}
	for _, a := range versusResults(sc, r) {
		rep.Assertions = append(rep.Assertions, a)
		if !a.Passed {
			rep.Passed = false
		}
	}
	if rep.Assertions == nil {
		rep.Assertions = []AssertionResult{}
	}
	return rep
}

// Failed lists the report's failed assertions, the cross-policy ones included.
func (rep Report) Failed() []AssertionResult {
	var out []AssertionResult
	for _, a := range rep.Assertions {
		if !a.Passed {
			out = append(out, a)
		}
	}
	return out
}

// MarshalJSON writes a summary with its utilization spread per resource
// (util_spread: max_over_mean − 1, see Versus) next to its fields.
func (s Summary) MarshalJSON() ([]byte, error) {
	type plain Summary
	spread := make(map[string]float64, len(s.MaxOverMean))
	for r := range s.MaxOverMean {
		spread[r] = UtilSpread(s, r)
	}
	return json.Marshal(struct {
		plain
		UtilSpread map[string]float64 `json:"util_spread"`
	}{plain(s), spread})
}

// WriteJSON writes the report as indented JSON.
func WriteJSON(w io.Writer, rep Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

func resourcesOf(s Summary) []string {
	var out []string
	for _, r := range interfaces.BuiltinResources {
		if _, ok := s.UtilMax[r]; ok {
			out = append(out, r)
		}
	}
	return out
}

func f3(x float64) string { return strconv.FormatFloat(x, 'f', 3, 64) }

// WriteTable writes the summary table, one row per policy, then the assertions.
func WriteTable(w io.Writer, rep Report) error {
	racksNote := ""
	if rep.Racks > 0 {
		racksNote = fmt.Sprintf("  racks %d", rep.Racks)
	}
	fmt.Fprintf(w, "scenario %s  seed %d  duration %s  tick %s  shards %d  hosts %d%s\n\n", rep.Scenario, rep.Seed, rep.Duration, rep.Tick, rep.Shards, rep.Hosts, racksNote)
	if len(rep.Policies) == 0 {
		return nil
	}
	res := resourcesOf(rep.Policies[0])
	spreadRes := interfaces.CPU // the SPREAD column: max/mean − 1 of host utilization, tick-averaged
	if len(res) > 0 && !slices.Contains(res, spreadRes) {
		spreadRes = res[0]
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := []string{"POLICY"}
	for _, r := range res {
		head = append(head, strings.ToUpper(r)+" P50/P99/MAX")
	}
	for _, r := range res {
		head = append(head, "MAX/LB "+strings.ToUpper(r))
	}
	head = append(head, "SPREAD "+strings.ToUpper(spreadRes), "LAT P50 MS", "LAT P99 MS", "LAG", "MOVES", "BYTES MOVED", "SOLVE S")
	racks := rep.Racks > 0
	if racks {
		head = append(head, "CHAIN", "RACK LOSS")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, s := range rep.Policies {
		row := []string{s.Policy}
		for _, r := range res {
			row = append(row, f3(s.UtilP50[r])+"/"+f3(s.UtilP99[r])+"/"+f3(s.UtilMax[r]))
		}
		for _, r := range res {
			row = append(row, f3(s.MaxOverLB[r]))
		}
		solve := "-"
		if s.SolveSeconds > 0 {
			solve = strconv.FormatFloat(s.SolveSeconds, 'f', 3, 64)
		}
		row = append(row, f3(UtilSpread(s, spreadRes)), f3(s.LatencyP50MS), f3(s.LatencyP99MS), strconv.FormatFloat(s.Lag, 'f', 0, 64),
			strconv.Itoa(s.Moves), humanBytes(s.BytesMoved), solve)
		if racks {
			row = append(row, s.Chain, f3(s.RackLossImpact))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(rep.Assertions) > 0 {
		fmt.Fprintln(w)
		for _, a := range rep.Assertions {
			mark := "ok  "
			if !a.Passed {
				mark = "FAIL"
			}
			fmt.Fprintf(w, "%s %s assertion %d (line %d): %s\n", mark, a.Policy, a.Index, a.Line, a.Message)
		}
	}
	writeAlerts(w, rep)
	return nil
}

// alertSpan formats when an alert was in force.
func alertSpan(a Alert) string {
	from := secs(a.At).String()
	if a.Until == 0 {
		return "from t=" + from + " to the end"
	}
	return "t=" + from + " – " + secs(a.Until).String()
}

// writeAlerts lists the alerts the tier instances' controllers raised.
func writeAlerts(w io.Writer, rep Report) {
	n := 0
	for _, s := range rep.Policies {
		n += len(s.Alerts) + s.AlertsDropped
	}
	if n == 0 {
		return
	}
	fmt.Fprintln(w)
	for _, s := range rep.Policies {
		for _, a := range s.Alerts {
			fmt.Fprintf(w, "ALERT %s %s %s (%s): %s\n", s.Policy, a.Instance, a.Code, alertSpan(a), a.Message)
		}
		if s.AlertsDropped > 0 {
			fmt.Fprintf(w, "ALERT %s: %d more alerts not kept\n", s.Policy, s.AlertsDropped)
		}
	}
}

func humanBytes(b int64) string { return bytesIn(b, "") }

// bytesIn writes b in the largest binary unit it reaches (B, KiB, … PiB),
// sep between the number and the unit.
func bytesIn(b int64, sep string) string {
	const unit = 1024
	if b < unit {
		return strconv.FormatInt(b, 10) + sep + "B"
	}
	div, exp := int64(unit), 0
	for n := b / unit; n >= unit && exp < 4; n /= unit {
		div *= unit
		exp++
	}
	return strconv.FormatFloat(float64(b)/float64(div), 'f', 1, 64) + sep + string("KMGTP"[exp]) + "iB"
}

// WriteCSV writes the time series of every policy, one row per policy and
// sample.
func WriteCSV(w io.Writer, r *Result) error {
	head := []string{"policy", "t"}
	for _, res := range interfaces.BuiltinResources {
		for _, k := range []string{"min", "p50", "p99", "max", "mean", "lb"} {
			head = append(head, res+"_"+k)
		}
	}
	head = append(head, "latency_p50_ms", "latency_p99_ms", "backlog", "moves", "bytes_moved", "unowned", "failed_hosts")
	racks := r.Racks > 0
	if racks {
		head = append(head, "rack_loss_impact")
	}
	if _, err := fmt.Fprintln(w, strings.Join(head, ",")); err != nil {
		return err
	}
	g := func(x float64) string { return strconv.FormatFloat(x, 'g', 6, 64) }
	for _, p := range r.Policies {
		for _, s := range p.Series {
			row := []string{p.Summary.Policy, g(s.T)}
			for q := 0; q < nres; q++ {
				row = append(row, g(s.UtilMin[q]), g(s.UtilP50[q]), g(s.UtilP99[q]), g(s.UtilMax[q]), g(s.UtilMean[q]), g(s.LB[q]))
			}
			row = append(row, g(s.LatencyP50MS), g(s.LatencyP99MS), g(s.Backlog), strconv.Itoa(s.Moves), strconv.FormatInt(s.BytesMoved, 10), strconv.Itoa(s.Unowned), strconv.Itoa(s.FailedHosts))
			if racks {
				row = append(row, g(s.RackLossImpact))
			}
			if _, err := fmt.Fprintln(w, strings.Join(row, ",")); err != nil {
				return err
			}
		}
	}
	return nil
}

// palette holds the colours of the policies' lines, in order.
var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"}

type line struct {
	name   string
	color  string
	dashed bool
	xs, ys []float64
}

// svgChart draws a line chart as a self-contained SVG element.
func svgChart(b *strings.Builder, title, ylabel string, lines []line, width, height int) {
	const ml, mr, mt, mb = 60, 160, 28, 34
	pw, ph := float64(width-ml-mr), float64(height-mt-mb)
	xmax, ymax := 0.0, 0.0
	for _, l := range lines {
		for i := range l.xs {
			xmax = math.Max(xmax, l.xs[i])
			if !math.IsInf(l.ys[i], 0) && !math.IsNaN(l.ys[i]) {
				ymax = math.Max(ymax, l.ys[i])
			}
		}
	}
	if xmax == 0 {
		xmax = 1
	}
	ymax = niceCeil(ymax)
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", width, height, width, height)
	fmt.Fprintf(b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(b, `<text x="%d" y="16" font-size="13" font-weight="bold">%s</text>`+"\n", ml, html.EscapeString(title))
	// Axes and grid.
	for k := 0; k <= 4; k++ {
		y := float64(mt) + ph - ph*float64(k)/4
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`, ml, y, float64(ml)+pw, y)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", ml-4, y+4, fmtTick(ymax*float64(k)/4))
	}
	for k := 0; k <= 5; k++ {
		x := float64(ml) + pw*float64(k)/5
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`, x, height-mb+14, fmtDur(xmax*float64(k)/5))
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">virtual time</text>`, float64(ml)+pw/2, height-4)
	fmt.Fprintf(b, `<text x="12" y="%.1f" transform="rotate(-90 12 %.1f)" text-anchor="middle">%s</text>`+"\n", float64(mt)+ph/2, float64(mt)+ph/2, html.EscapeString(ylabel))
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%.1f" height="%.1f" fill="none" stroke="#888"/>`+"\n", ml, mt, pw, ph)
	for k, l := range lines {
		var pts strings.Builder
		for i := range l.xs {
			y := l.ys[i]
			if math.IsInf(y, 0) || math.IsNaN(y) {
				y = ymax
			}
			fmt.Fprintf(&pts, "%.1f,%.1f ", float64(ml)+pw*l.xs[i]/xmax, float64(mt)+ph-ph*math.Min(y, ymax)/ymax)
		}
		dash := ""
		if l.dashed {
			dash = ` stroke-dasharray="5,3"`
		}
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="1.5"%s points="%s"/>`+"\n", l.color, dash, strings.TrimSpace(pts.String()))
		ly := mt + 12 + 15*k
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="2"%s/><text x="%.1f" y="%d">%s</text>`+"\n",
			float64(ml)+pw+8, ly-4, float64(ml)+pw+28, ly-4, l.color, dash, float64(ml)+pw+32, ly, html.EscapeString(l.name))
	}
	b.WriteString("</svg>\n")
}

func niceCeil(x float64) float64 {
	if x <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

func fmtTick(x float64) string {
	switch {
	case x == 0:
		return "0"
	case x == math.Trunc(x) && x < 1e6:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case x >= 1e6 || x < 0.01:
		return strconv.FormatFloat(x, 'g', 3, 64)
	case x >= 100:
		return strconv.FormatFloat(x, 'f', 0, 64)
	}
	return strconv.FormatFloat(x, 'f', 2, 64)
}

func fmtDur(s float64) string {
	d := time.Duration(s * float64(time.Second)).Round(time.Second)
	if d == 0 {
		return "0"
	}
	return strings.TrimSuffix(strings.TrimSuffix(d.String(), "0s"), "0m")
}

func seriesOf(p PolicyResult, f func(Sample) float64) (xs, ys []float64) {
	for _, s := range p.Series {
		xs = append(xs, s.T)
		ys = append(ys, f(s))
	}
	return xs, ys
}

// OverviewSVG draws the run's three panels — cpu utilization (max and p50 across
// hosts), modeled p99 latency, and moves per sample interval — one line per
// policy, as one SVG document.
func OverviewSVG(r *Result) string {
	var b strings.Builder
	const width, panel = 820, 230
	b.WriteString(fmt.Sprintf(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d">`+"\n", width, 3*panel))
	var util, lat, moves []line
	for k, p := range r.Policies {
		c := palette[k%len(palette)]
		xs, ys := seriesOf(p, func(s Sample) float64 { return s.UtilMax[0] })
		util = append(util, line{name: p.Summary.Policy + " max", color: c, xs: xs, ys: ys})
		xs, ys = seriesOf(p, func(s Sample) float64 { return s.UtilP50[0] })
		util = append(util, line{name: p.Summary.Policy + " p50", color: c, dashed: true, xs: xs, ys: ys})
		xs, ys = seriesOf(p, func(s Sample) float64 { return s.LatencyP99MS })
		lat = append(lat, line{name: p.Summary.Policy, color: c, xs: xs, ys: ys})
		xs, ys = seriesOf(p, func(s Sample) float64 { return float64(s.Moves) })
		moves = append(moves, line{name: p.Summary.Policy, color: c, xs: xs, ys: ys})
	}
	for i, c := range []struct {
		title, y string
		l        []line
	}{
		{r.Scenario + ": cpu utilization across hosts (max solid, p50 dashed)", "utilization", util},
		{"modeled p99 latency", "ms", lat},
		{"moves per sample interval", "moves", moves},
	} {
		fmt.Fprintf(&b, `<g transform="translate(0,%d)">`+"\n", i*panel)
		svgChart(&b, c.title, c.y, c.l, width, panel)
		b.WriteString("</g>\n")
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// WriteHTML writes a self-contained HTML report: the summary table, the
// assertions, and SVG plots of the utilization distribution over time per
// policy and resource, latency, backlog and moves. It loads nothing from the
// network.
func WriteHTML(w io.Writer, rep Report, r *Result) error {
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>strata sim: " + html.EscapeString(rep.Scenario) + "</title>\n")
	b.WriteString("<style>body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f4f4f4}td:first-child{text-align:left}.fail{color:#b00;font-weight:bold}.ok{color:#080}svg{display:block;margin:1em 0}</style></head><body>\n")
	fmt.Fprintf(&b, "<h1>Scenario %s</h1>\n<p>seed %d · duration %s · tick %s · %d shards · %d hosts</p>\n", html.EscapeString(rep.Scenario), rep.Seed, rep.Duration, rep.Tick, rep.Shards, rep.Hosts)
	b.WriteString("<h2>Summary</h2>\n<table><tr><th>policy</th><th>solver</th><th>integration</th>")
	res := []string{}
	if len(rep.Policies) > 0 {
		res = resourcesOf(rep.Policies[0])
	}
	for _, x := range res {
		fmt.Fprintf(&b, "<th>%s p50/p99/max</th><th>max/LB %s</th><th>max/mean %s</th>", x, x, x)
	}
	b.WriteString("<th>latency p50 ms</th><th>latency p99 ms</th><th>peak lag</th><th>moves</th><th>bytes moved</th><th>solve s</th></tr>\n")
	for _, s := range rep.Policies {
		fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td><td>%s</td>", html.EscapeString(s.Policy), html.EscapeString(s.Solver), s.Integration)
		for _, x := range res {
			fmt.Fprintf(&b, "<td>%s/%s/%s</td><td>%s</td><td>%s</td>", f3(s.UtilP50[x]), f3(s.UtilP99[x]), f3(s.UtilMax[x]), f3(s.MaxOverLB[x]), f3(s.MaxOverMean[x]))
		}
		fmt.Fprintf(&b, "<td>%s</td><td>%s</td><td>%.0f</td><td>%d</td><td>%s</td><td>%s</td></tr>\n", f3(s.LatencyP50MS), f3(s.LatencyP99MS), s.Lag, s.Moves, humanBytes(s.BytesMoved), f3(s.SolveSeconds))
	}
	b.WriteString("</table>\n")
	if len(rep.Assertions) > 0 {
		b.WriteString("<h2>Assertions</h2>\n<ul>\n")
		for _, a := range rep.Assertions {
			cls, mark := "ok", "ok"
			if !a.Passed {
				cls, mark = "fail", "FAIL"
			}
			fmt.Fprintf(&b, "<li><span class=\"%s\">%s</span> %s (line %d): %s</li>\n", cls, mark, html.EscapeString(a.Policy), a.Line, html.EscapeString(a.Message))
		}
		b.WriteString("</ul>\n")
	}
	var alerts strings.Builder
	for _, s := range rep.Policies {
		for _, a := range s.Alerts {
			fmt.Fprintf(&alerts, "<li><span class=\"fail\">%s</span> %s %s (%s): %s</li>\n", html.EscapeString(a.Code), html.EscapeString(s.Policy), html.EscapeString(a.Instance), alertSpan(a), html.EscapeString(a.Message))
		}
		if s.AlertsDropped > 0 {
			fmt.Fprintf(&alerts, "<li>%s: %d more alerts not kept</li>\n", html.EscapeString(s.Policy), s.AlertsDropped)
		}
	}
	if alerts.Len() > 0 {
		b.WriteString("<h2>Alerts</h2>\n<p>Raised by the tier instances' controllers (tiers/control).</p>\n<ul>\n" + alerts.String() + "</ul>\n")
	}
	b.WriteString("<h2>Overview</h2>\n")
	b.WriteString(OverviewSVG(r))
	b.WriteString("<h2>Utilization distribution over time</h2>\n<p>Across live hosts at each sample: min, p50, p99 and max.</p>\n")
	for _, p := range r.Policies {
		for q, x := range interfaces.BuiltinResources {
			if _, ok := p.Summary.UtilMax[x]; !ok {
				continue
			}
			var ls []line
			for k, f := range []struct {
				n string
				g func(Sample) float64
			}{
				{"lower bound", func(s Sample) float64 { return s.LB[q] }},
				{"min", func(s Sample) float64 { return s.UtilMin[q] }},
				{"p50", func(s Sample) float64 { return s.UtilP50[q] }},
				{"p99", func(s Sample) float64 { return s.UtilP99[q] }},
				{"max (drawn last)", func(s Sample) float64 { return s.UtilMax[q] }},
			} {
				xs, ys := seriesOf(p, f.g)
				ls = append(ls, line{name: f.n, color: palette[k], dashed: f.n == "lower bound", xs: xs, ys: ys})
			}
			svgChart(&b, p.Summary.Policy+": "+x+" utilization", "utilization", ls, 820, 240)
		}
	}
	b.WriteString("<h2>Backlog</h2>\n")
	var bl []line
	for k, p := range r.Policies {
		xs, ys := seriesOf(p, func(s Sample) float64 { return s.Backlog })
		bl = append(bl, line{name: p.Summary.Policy, color: palette[k%len(palette)], xs: xs, ys: ys})
	}
	svgChart(&b, "total backlog (records)", "records", bl, 820, 240)
	b.WriteString("</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
