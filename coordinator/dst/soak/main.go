package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/strata-sched/strata/coordinator/dst"
)

func main() {
	steps := flag.Int64("steps", 10_000_000, "run seeds until this many steps have been simulated")
	seed := flag.Uint64("seed", 1, "the first seed")
	cpus := flag.Int("cpus", 1, "GOMAXPROCS (the harness itself is single-threaded)")
	flag.Parse()
	if *steps <= 0 {
		fmt.Fprintln(os.Stderr, "soak: -steps: must be > 0")
		os.Exit(2)
	}
	if *cpus < 1 {
		fmt.Fprintln(os.Stderr, "soak: -cpus: must be ≥ 1")
		os.Exit(2)
	}
	runtime.GOMAXPROCS(*cpus)
	os.Exit(run(os.Stdout, os.Stderr, *steps, *seed))
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func run(out io.Writer, progress *os.File, target int64, first uint64) int {
	start := time.Now()
	tty := isTerminal(progress)
	var done, seeds, violations int64
	var msgs, starts, moves, faults int64
	last := time.Time{}
	s := first
	for ; done < target; s++ {
		r := dst.Run(s, dst.Config{})
		done += int64(r.Stats.Steps)
		seeds++
		msgs += int64(r.Stats.Messages)
		starts += int64(r.Stats.Starts)
		moves += int64(r.Stats.Moves)
		faults += int64(r.Stats.Faults)
		if r.Violation != nil {
			violations++
			if tty {
				fmt.Fprint(progress, "\r\033[K")
			}
			fmt.Fprintln(out, dst.Report(s, dst.Config{}))
		}
		if now := time.Now(); now.Sub(last) > 500*time.Millisecond || done >= target {
			last = now
			draw(progress, tty, done, target, seeds, violations, now.Sub(start))
		}
	}
	if tty {
		fmt.Fprintln(progress)
	}
	el := time.Since(start)
	rate := float64(done) / el.Seconds()
	fmt.Fprintf(out, "seeds %d..%d (%d), steps %d, messages %d, worker starts %d, moves %d, faults %d\n", first, s-1, seeds, done, msgs, starts, moves, faults)
	fmt.Fprintf(out, "wall %v on %d CPU(s): %.0f steps/s = %.2fM steps/min\n", el.Round(time.Millisecond), runtime.GOMAXPROCS(0), rate, rate*60/1e6)
	fmt.Fprintf(out, "violations: %d\n", violations)
	if violations > 0 {
		return 1
	}
	return 0
}

var lastDecile int

// draw shows progress: a bar with an ETA on a terminal, a plain line
// otherwise (every 10%).
func draw(f *os.File, tty bool, done, target, seeds, bad int64, el time.Duration) {
	frac := min(1, float64(done)/float64(target))
	rate := float64(done) / el.Seconds()
	eta := time.Duration(float64(target-done)/max(rate, 1)) * time.Second
	if !tty {
		if d := int(frac * 10); d > lastDecile {
			lastDecile = d
			fmt.Fprintf(f, "%3d%%  %d steps  %d seeds  %.0f steps/s  ETA %v  violations %d\n", d*10, done, seeds, rate, eta.Round(time.Second), bad)
		}
		return
	}
	const width = 30
	n := int(frac * width)
	bar := strings.Repeat("█", n) + strings.Repeat("░", width-n)
	fmt.Fprintf(f, "\r\033[K%s %5.1f%%  %d steps  %d seeds  %.0f steps/s  ETA %v  violations %d",
		bar, frac*100, done, seeds, rate, eta.Round(time.Second), bad)
}
