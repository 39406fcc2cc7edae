package balancer

import (
	"fmt"
	"testing"
	"time"
)

// Benchmarks cover the sizes of `strata bench balance`. The large sizes run the
// local solver under a 10 s time budget (the wall clock is passed in, as the
// command does); b.ReportMetric records the quality reached.
func benchSolve(b *testing.B, solver string, shards, hosts int, budget time.Duration) {
	p, err := Generate(InstanceSpec{Shards: shards, Hosts: hosts, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	s, err := SolverByName(solver)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var res Result
	for i := 0; i < b.N; i++ {
		res, err = s.Solve(p, Options{Seed: 1, TimeBudget: budget, Now: time.Now})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(res.Summary.MaxOverLB["cpu"], "cpu_max/LB")
	b.ReportMetric(res.Summary.MaxOverLB["mem"], "mem_max/LB")
	b.ReportMetric(float64(res.Summary.Moves), "moves")
}

func BenchmarkSolve(b *testing.B) {
	for _, sz := range []struct{ shards, hosts int }{{1000, 10}, {10000, 100}, {100000, 1000}, {1000000, 10000}} {
		for _, solver := range []string{SolverGreedy, SolverLocal} {
			b.Run(fmt.Sprintf("%s/%dx%d", solver, sz.shards, sz.hosts), func(b *testing.B) {
				benchSolve(b, solver, sz.shards, sz.hosts, 10*time.Second)
			})
		}
	}
}

// BenchmarkSortBySize: the order shards are placed in (size decreasing, ties
// by index) for a region's 10,000 and a global tier's 1,000,000 shards of a
// generated instance, by the comparison sort sortBySize used for every
// length before (compareBySize) and by radixBySize (radix), from index order.
func BenchmarkSortBySize(b *testing.B) {
	for _, n := range []int{10000, 1000000} {
		p, err := Generate(InstanceSpec{Shards: n, Hosts: 100, Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		w := sizeWeights(p, lbWeights(p, DefaultGoals()))
		size := func(s int) float64 { return sizeOf(p, w, s) }
		xs := make([]int32, n)
		for _, radix := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/n=%d", map[bool]string{false: "compare", true: "radix"}[radix], n), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					for j := range xs {
						xs[j] = int32(j)
					}
					if radix {
						radixBySize(xs, size)
					} else {
						compareBySize(xs, size)
					}
				}
			})
		}
	}
}
