package fsm

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strata-sched/strata/interfaces"
)

// Benchmarks (see docs/benchmarks.md, section "Coordinator FSM"):
//
//	go test -run '^$' -bench 'ApplyPlan' -benchtime 2000x ./coordinator/fsm
//	go test -run '^$' -bench 'Snapshot1M|Restore1M' -benchtime 3x ./coordinator/fsm
//
// The 1M benchmarks report the process's peak RSS (VmHWM) and the live heap.
// Restore1M reads a snapshot file written by a child process (the test binary
// re-run with STRATA_FSM_WRITE_SNAPSHOT set, see TestMain) so that its peak RSS is
// the restore's alone.

const envWriteSnapshot = "STRATA_FSM_WRITE_SNAPSHOT"

func TestMain(m *testing.M) {
	if path := os.Getenv(envWriteSnapshot); path != "" {
		n, _ := strconv.Atoi(os.Getenv("STRATA_FSM_SHARDS"))
		if err := writeBigSnapshot(path, n); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// bigState builds an FSM with children hosts and n shards, each placed, 1% of
// them with a move in flight, through the same Apply path raft uses.
func bigState(tb testing.TB, n, children int) *FSM {
	f := New()
	idx := uint64(1)
	apply := func(c Command) *Result {
		r := f.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: MustEncode(c)}).(*Result)
		idx++
		return r
	}
	for c := 0; c < children; c++ {
		apply(&PutChild{Child: interfaces.Child{ID: childName(c), Tier: "host",
			Capacity: interfaces.Load{CPU: 1e6, Mem: 1e15, Net: 1e12, Tasks: 1e6},
			Labels:   map[string]string{"zone": fmt.Sprintf("z%d", c%3)}}})
	}
	const batch = 10000
	for lo := 0; lo < n; lo += batch {
		hi := min(lo+batch, n)
		ps := &PutShards{Shards: make([]interfaces.Shard, 0, hi-lo)}
		plan := &ApplyPlan{Tier: "region", Moves: make([]interfaces.Move, 0, hi-lo)}
		for i := lo; i < hi; i++ {
			id := shardName(i)
			ps.Shards = append(ps.Shards, interfaces.Shard{ID: id, Job: fmt.Sprintf("job-%d", i/100),
				Load:      interfaces.Load{CPU: 0.25, Mem: 256 << 20, Net: 1 << 20, Tasks: 1},
				InputRate: 1000, StateBytes: 64 << 20})
			plan.Moves = append(plan.Moves, interfaces.Move{Shard: id, To: childName(i % children), Reason: "initial placement"})
		}
		if r := apply(ps); r.Err() != nil {
			tb.Fatal(r.Err())
		}
		if r := apply(plan); r.Err() != nil {
			tb.Fatal(r.Err())
		}
	}
	inflight := &ApplyPlan{Tier: "region", Begin: true}
	for i := 0; i < n; i += 100 {
		inflight.Moves = append(inflight.Moves, interfaces.Move{Shard: shardName(i), From: childName(i % children),
			To: childName((i + 1) % children), Epoch: 1, Reason: "balance"})
	}
	if len(inflight.Moves) > 0 {
		if r := apply(inflight); r.Err() != nil {
			tb.Fatal(r.Err())
		}
	}
	return f
}

func childName(i int) interfaces.ChildID { return interfaces.ChildID(fmt.Sprintf("host-%04d", i)) }
func shardName(i int) interfaces.ShardID { return interfaces.ShardID(fmt.Sprintf("shard-%07d", i)) }

func writeBigSnapshot(path string, n int) error {
	f := bigState(&testing.B{}, n, 1000)
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.WriteTo(out); err != nil {
		return err
	}
	return out.Close()
}

// rss reports the process's peak and current resident set size in MiB, read from
// /proc/self/status (Linux). It returns -1 where unavailable.
func rss() (hwm, now float64) {
	hwm, now = -1, -1
	file, err := os.Open("/proc/self/status")
	if err != nil {
		return
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		if err != nil {
			continue
		}
		switch k {
		case "VmHWM":
			hwm = kb / 1024
		case "VmRSS":
			now = kb / 1024
		}
	}
	return
}

// cpuTime is the CPU time (user + system) the process has used so far. On this
// shared machine wall time depends on the other tenants; CPU time much less so.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportMemory(b *testing.B) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	hwm, now := rss()
	b.ReportMetric(hwm, "peak-RSS-MiB")
	b.ReportMetric(now, "RSS-MiB")
	b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "live-heap-MiB")
}

// fileSink is a raft.SnapshotSink over a file, like raft's file snapshot store.
type fileSink struct{ *os.File }

func (s fileSink) ID() string    { return "bench" }
func (s fileSink) Cancel() error { return s.File.Close() }

const million = 1_000_000

func BenchmarkSnapshot1M(b *testing.B) {
	f := bigState(b, million, 1000)
	path := filepath.Join(b.TempDir(), "snap")
	var size int64
	var capture time.Duration
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		snap, err := f.Snapshot()
		capture += time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		out, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := snap.Persist(fileSink{out}); err != nil {
			b.Fatal(err)
		}
		snap.Release()
		st, err := os.Stat(path)
		if err != nil {
			b.Fatal(err)
		}
		size = st.Size()
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Milliseconds())/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(capture.Microseconds())/1000/float64(b.N), "ms-blocking-Apply")
	b.ReportMetric(float64(size)/(1<<20), "snapshot-MiB")
	reportMemory(b)
	runtime.KeepAlive(f)
}

func BenchmarkRestore1M(b *testing.B) {
	path := filepath.Join(b.TempDir(), "snap")
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := execCommand(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), envWriteSnapshot+"="+path, "STRATA_FSM_SHARDS="+strconv.Itoa(million))
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("writing the snapshot in a child process: %v\n%s", err, out)
	}
	b.ResetTimer()
	var f *FSM
	var cpu time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		f = nil
		runtime.GC()
		in, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		cpu0 := cpuTime()
		f = New()
		if err := f.Restore(in); err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime() - cpu0
	}
	b.StopTimer()
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
	if st := f.Stats(); st.Shards != million || st.InFlight != million/100 {
		b.Fatalf("restored %+v", st)
	}
	reportMemory(b)
	runtime.KeepAlive(f)
}

// BenchmarkApplyPlan measures the FSM side of committing moves: decode the entry
// and apply every move of an ApplyPlan batch (epoch compare-and-set, usage
// accounting, plan log), on a state of 100k placed shards over 100 children.
// The /verify variants add the leader's VerifyPlan and Encode per batch.
func BenchmarkApplyPlan(b *testing.B) {
	for _, batch := range []int{1, 100, 1000} {
		for _, verify := range []bool{false, true} {
			name := fmt.Sprintf("batch=%d", batch)
			if verify {
				name += "/verify+encode"
			}
			b.Run(name, func(b *testing.B) { benchApplyPlan(b, batch, verify) })
		}
	}
}

func benchApplyPlan(b *testing.B, batch int, verify bool) {
	const n, children = 100_000, 100
	f := bigState(b, n, children)
	// Shards 1..99 of every hundred are placed at epoch 1 on i%children; moving
	// shard i alternates it between two children.
	owner := make([]int, n)
	epoch := make([]interfaces.Epoch, n)
	for i := range owner {
		owner[i], epoch[i] = i%children, 1
	}
	next, idx := 1, uint64(1<<20)
	nextBatch := func() []interfaces.Move {
		moves := make([]interfaces.Move, 0, batch)
		for len(moves) < batch {
			i := next
			next = (next + 7919) % n
			if i%100 == 0 {
				continue // has a move in flight
			}
			to := (owner[i] + 1) % children
			moves = append(moves, interfaces.Move{Shard: shardName(i), From: childName(owner[i]), To: childName(to),
				Epoch: epoch[i], Reason: "balance", Goal: "balance", Delta: -0.01})
		}
		return moves
	}
	commit := func(moves []interfaces.Move) {
		for _, m := range moves {
			i, _ := strconv.Atoi(strings.TrimPrefix(string(m.Shard), "shard-"))
			owner[i] = (owner[i] + 1) % children
			epoch[i]++
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		var data []byte
		var moves []interfaces.Move
		if verify {
			moves = nextBatch()
			v := f.VerifyPlan(moves)
			if len(v.Rejected) > 0 {
				b.Fatalf("rejected: %+v", v.Rejected[0])
			}
			data = MustEncode(&ApplyPlan{Tier: "region", Moves: v.Accepted})
		} else {
			b.StopTimer()
			moves = nextBatch()
			data = MustEncode(&ApplyPlan{Tier: "region", Moves: moves})
			b.StartTimer()
		}
		r := f.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: data}).(*Result)
		idx++
		if r.Failed() > 0 {
			b.Fatalf("apply: %v", r.Err())
		}
		b.StopTimer()
		commit(moves)
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "moves/s")
}

// BenchmarkRestoreOverLive1M is the follower's real path: a replica that already
// holds 1M shards restores a 1M-shard snapshot into the same FSM. The old state
// stays alive (and readable) until the new one is swapped in, so the peak RSS is
// that of two states. With LeanRestore the old state is dropped first.
func BenchmarkRestoreOverLive1M(b *testing.B) {
	for _, lean := range []bool{false, true} {
		b.Run(fmt.Sprintf("lean=%v", lean), func(b *testing.B) { benchRestoreOverLive(b, lean) })
	}
}

func benchRestoreOverLive(b *testing.B, lean bool) {
	f := bigState(b, million, 1000)
	f.lean = lean
	path := filepath.Join(b.TempDir(), "snap")
	out, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := f.WriteTo(out); err != nil {
		b.Fatal(err)
	}
	if err := out.Close(); err != nil {
		b.Fatal(err)
	}
	want := f.Hash()
	var cpu time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		in, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		cpu0 := cpuTime()
		if err := f.Restore(in); err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime() - cpu0
	}
	b.StopTimer()
	if f.Hash() != want {
		b.Fatal("restored state differs from the snapshot's source")
	}
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
	reportMemory(b)
	runtime.KeepAlive(f)
}
