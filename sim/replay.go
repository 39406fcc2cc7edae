package sim

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

// replayRow is one recorded sample of one shard's load.
type replayRow struct {
	t     time.Duration
	shard int // index into replaySeries.shards
	load  [nres]float64
	rate  float64
}

// replaySeries is a recorded per-shard load series, sorted by time.
type replaySeries struct {
	shards []string
	rows   []replayRow
}

func resolve(dir, file string) string {
	if filepath.IsAbs(file) {
		return file
	}
	return filepath.Join(dir, file)
}

// readReplay reads a CSV with the header time,shard,cpu,mem,net,input_rate; time
// is in seconds from the start of the run. Values are multiplied by scale.
func readReplay(path string, scale float64) (*replaySeries, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("workload.replay.file: %w", err)
	}
	defer f.Close()
	return parseReplay(f, path, scale)
}

func parseReplay(r io.Reader, name string, scale float64) (*replaySeries, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("%s: reading the header: %v: %w", name, err, interfaces.ErrInvalid)
	}
	want := []string{"time", "shard", "cpu", "mem", "net", "input_rate"}
	if len(header) != len(want) {
		return nil, fmt.Errorf("%s:1: header must be %s: %w", name, strings.Join(want, ","), interfaces.ErrInvalid)
	}
	for i, h := range header {
		if strings.TrimSpace(h) != want[i] {
			return nil, fmt.Errorf("%s:1: column %d must be %q (got %q): %w", name, i+1, want[i], h, interfaces.ErrInvalid)
		}
	}
	s := &replaySeries{}
	idx := map[string]int{}
	line := 1
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		line++
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v: %w", name, line, err, interfaces.ErrInvalid)
		}
		if len(rec) != len(want) {
			return nil, fmt.Errorf("%s:%d: want %d columns, got %d: %w", name, line, len(want), len(rec), interfaces.ErrInvalid)
		}
		var vals [6]float64
		for i, c := range []int{0, 2, 3, 4, 5} {
			v, err := strconv.ParseFloat(strings.TrimSpace(rec[c]), 64)
			if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
				return nil, fmt.Errorf("%s:%d: %s must be a finite number ≥ 0 (got %q): %w", name, line, want[c], rec[c], interfaces.ErrInvalid)
			}
			vals[i] = v
		}
		if vals[0] >= maxDurationSeconds {
			return nil, fmt.Errorf("%s:%d: time must be below %g seconds (got %q): %w", name, line, maxDurationSeconds, rec[0], interfaces.ErrInvalid)
		}
		id := strings.TrimSpace(rec[1])
		if err := interfaces.ValidateID("shard", id); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		k, ok := idx[id]
		if !ok {
			k = len(s.shards)
			idx[id] = k
			s.shards = append(s.shards, id)
		}
		s.rows = append(s.rows, replayRow{
			t:     time.Duration(vals[0] * float64(time.Second)),
			shard: k,
			load:  [nres]float64{vals[1] * scale, vals[2] * scale, vals[3] * scale, 0},
			rate:  vals[4] * scale,
		})
	}
	if len(s.rows) == 0 {
		return nil, fmt.Errorf("%s: no rows: %w", name, interfaces.ErrInvalid)
	}
	sort.SliceStable(s.rows, func(a, b int) bool { return s.rows[a].t < s.rows[b].t })
	return s, nil
}

// maxDurationSeconds is time.Duration's range in seconds: it bounds a replay
// row's time and a duration given in seconds.
const maxDurationSeconds = float64(math.MaxInt64) / float64(time.Second)

// maxArrivalBins bounds the bins of an arrival series (80 MB of them).
const maxArrivalBins = 10_000_000

// arrivalSeries is a real arrival series turned into a rate multiplier: one value
// per bin, mean 1.
type arrivalSeries struct {
	bins   []float64
	bin    time.Duration
	offset time.Duration
	scale  float64
	job    int32 // -1: every job
}

// at returns the multiplier for virtual time t; the series loops.
func (a *arrivalSeries) at(t time.Duration) float64 {
	tt := a.offset + time.Duration(float64(t)*a.scale)
	i := int(tt/a.bin) % len(a.bins)
	return a.bins[i]
}

// readArrivals reads an arrival series. Format "azure" is the Azure public LLM
// trace (TIMESTAMP,ContextTokens,GeneratedTokens); "times" is one arrival time in
// seconds per line (an optional header line is skipped).
func readArrivals(path string, spec *ArrivalsSpec) (*arrivalSeries, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("workload.arrivals.file: %w", err)
	}
	defer f.Close()
	return parseArrivals(f, path, spec)
}

func parseArrivals(r io.Reader, name string, spec *ArrivalsSpec) (*arrivalSeries, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	var times []float64
	var weights []float64
	line := 0
	var t0 time.Time
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		line++
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v: %w", name, line, err, interfaces.ErrInvalid)
		}
		switch spec.Format {
		case "azure":
			if line == 1 && strings.EqualFold(strings.TrimSpace(rec[0]), "TIMESTAMP") {
				continue
			}
			if len(rec) < 3 {
				return nil, fmt.Errorf("%s:%d: want TIMESTAMP,ContextTokens,GeneratedTokens: %w", name, line, interfaces.ErrInvalid)
			}
			ts, err := time.Parse("2006-01-02 15:04:05.9999999", strings.TrimSpace(rec[0]))
			if err != nil {
				return nil, fmt.Errorf("%s:%d: TIMESTAMP %q: %v: %w", name, line, rec[0], err, interfaces.ErrInvalid)
			}
			if len(times) == 0 {
				t0 = ts
			}
			ctx, err1 := strconv.ParseFloat(strings.TrimSpace(rec[1]), 64)
			gen, err2 := strconv.ParseFloat(strings.TrimSpace(rec[2]), 64)
			if err1 != nil || err2 != nil || !(ctx >= 0) || !(gen >= 0) || math.IsInf(ctx+gen, 0) {
				return nil, fmt.Errorf("%s:%d: token counts must be numbers ≥ 0: %w", name, line, interfaces.ErrInvalid)
			}
			times = append(times, ts.Sub(t0).Seconds())
			wt := 1.0
			if spec.Weight == "tokens" {
				wt = ctx + gen
			}
			weights = append(weights, wt)
		case "times":
			v, err := strconv.ParseFloat(strings.TrimSpace(rec[0]), 64)
			if err != nil {
				if line == 1 {
					continue
				}
				return nil, fmt.Errorf("%s:%d: %q is not a time in seconds: %w", name, line, rec[0], interfaces.ErrInvalid)
			}
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("%s:%d: %q is not a finite time in seconds: %w", name, line, rec[0], interfaces.ErrInvalid)
			}
			times = append(times, v)
			weights = append(weights, 1)
		}
	}
	if len(times) == 0 {
		return nil, fmt.Errorf("%s: no arrivals: %w", name, interfaces.ErrInvalid)
	}
	binS := spec.Bin.D().Seconds()
	minT, maxT := times[0], times[0]
	for _, t := range times {
		minT, maxT = math.Min(minT, t), math.Max(maxT, t)
	}
	if span := (maxT - minT) / binS; span >= maxArrivalBins {
		return nil, fmt.Errorf("workload.arrivals.bin: %v cuts the %gs from the first arrival of %s to the last into more than %d bins (raise bin): %w", spec.Bin.D(), maxT-minT, name, maxArrivalBins, interfaces.ErrInvalid)
	}
	n := int((maxT-minT)/binS) + 1
	bins := make([]float64, n)
	for i, t := range times {
		bins[int((t-minT)/binS)] += weights[i]
	}
	mean := 0.0
	for _, b := range bins {
		mean += b
	}
	mean /= float64(n)
	if mean <= 0 {
		return nil, fmt.Errorf("%s: all arrivals weigh 0: %w", name, interfaces.ErrInvalid)
	}
	for i := range bins {
		bins[i] /= mean
	}
	return &arrivalSeries{bins: bins, bin: spec.Bin.D(), offset: spec.Offset.D(), scale: spec.Scale, job: -1}, nil
}
