package raftnode_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/strata-sched/strata/coordinator/fsm"
	"github.com/strata-sched/strata/coordinator/raftnode"
	"github.com/strata-sched/strata/coordinator/raftnode/raftest"
	"github.com/strata-sched/strata/interfaces"
)

// ---- Checker validation on porcupine's own labelled key-value histories ----

type kvIn struct {
	op         byte // 'g' get, 'p' put, 'a' append
	key, value string
}

type kvOut struct{ value string }

// kvModel is a sequential key-value store, partitioned by key.
var kvModel = porcupine.Model{
	PartitionEvent: func(h []porcupine.Event) [][]porcupine.Event {
		byKey := map[string][]porcupine.Event{}
		keyOf := map[int]string{}
		var keys []string
		for _, e := range h {
			k := ""
			if e.Kind == porcupine.CallEvent {
				k = e.Value.(kvIn).key
				keyOf[e.Id] = k
			} else {
				k = keyOf[e.Id]
			}
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], e)
		}
		var out [][]porcupine.Event
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return "" },
	Step: func(state, input, output any) (bool, any) {
		in, st := input.(kvIn), state.(string)
		switch in.op {
		case 'g':
			return output.(kvOut).value == st, st
		case 'p':
			return true, in.value
		}
		return true, st + in.value
	},
}

var (
	kvInvoke = regexp.MustCompile(`^\{:process (\d+), :type :invoke, :f :(get|put|append), :key "(.*)", :value (?:nil|"(.*)")\}$`)
	kvOK     = regexp.MustCompile(`^\{:process (\d+), :type :ok, :f :(get|put|append), :key ".*", :value (?:nil|"(.*)")\}$`)
)

// parseKV reads a history in porcupine's test_data/kv format. Operations still
// open at the end get a return event last (their outcome is unknown).
func parseKV(t *testing.T, path string) []porcupine.Event {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var events []porcupine.Event
	open := map[int]int{} // process -> open op id
	id := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if m := kvInvoke.FindStringSubmatch(line); m != nil {
			p, _ := strconv.Atoi(m[1])
			events = append(events, porcupine.Event{ClientId: p, Kind: porcupine.CallEvent, Value: kvIn{op: m[2][0], key: m[3], value: m[4]}, Id: id})
			open[p] = id
			id++
			continue
		}
		if m := kvOK.FindStringSubmatch(line); m != nil {
			p, _ := strconv.Atoi(m[1])
			out := kvOut{}
			if m[2] == "get" {
				out.value = m[3]
			}
			events = append(events, porcupine.Event{ClientId: p, Kind: porcupine.ReturnEvent, Value: out, Id: open[p]})
			delete(open, p)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for p, oid := range open {
		events = append(events, porcupine.Event{ClientId: p, Kind: porcupine.ReturnEvent, Value: kvOut{}, Id: oid})
	}
	if len(events) == 0 {
		t.Fatalf("%s: no events parsed", path)
	}
	return events
}

func TestCheckerOnPorcupineLabelledHistories(t *testing.T) {
	for _, tc := range []struct {
		file string
		want porcupine.CheckResult
	}{
		{"c01-ok", porcupine.Ok}, {"c01-bad", porcupine.Illegal},
		{"c10-ok", porcupine.Ok}, {"c10-bad", porcupine.Illegal},
	} {
		t.Run(tc.file, func(t *testing.T) {
			events := parseKV(t, "testdata/porcupine-kv/"+tc.file+".txt")
			if got := porcupine.CheckEventsTimeout(kvModel, events, 30*time.Second); got != tc.want {
				t.Fatalf("%s (%d events): checker says %v, label says %v", tc.file, len(events), got, tc.want)
			}
		})
	}
}

// ---- The assignment-table model ----

// asgState is one shard's row: owner ("" when unassigned) and epoch.
type asgState struct {
	child string
	epoch uint64
}

type asgIn struct {
	op    byte // 'a' assign, 'm' move (epoch compare-and-set), 'r' read
	shard string
	from  string
	to    string
	epoch uint64
}

// asgOut is an operation's outcome. For writes: ok with the new epoch, a
// definite rejection (code), or unknown (the write may or may not have happened).
type asgOut struct {
	ok      bool
	unknown bool
	code    string
	child   string // read
	epoch   uint64
}

func asgStep(state, input, output any) []any {
	st, in, out := state.(asgState), input.(asgIn), output.(asgOut)
	switch in.op {
	case 'r':
		if out.child == st.child && out.epoch == st.epoch {
			return []any{st}
		}
		return nil
	case 'a':
		can := st.child == ""
		next := asgState{child: in.to, epoch: st.epoch + 1}
		switch {
		case out.unknown && can:
			return []any{st, next}
		case out.unknown:
			return []any{st}
		case out.ok && can && out.epoch == next.epoch:
			return []any{next}
		case !out.ok && !can && out.code == raftnode.CodeConflict:
			return []any{st}
		}
		return nil
	case 'm':
		can := st.child == in.from && st.child != "" && st.epoch == in.epoch
		next := asgState{child: in.to, epoch: st.epoch + 1}
		switch {
		case out.unknown && can:
			return []any{st, next}
		case out.unknown:
			return []any{st}
		case out.ok && can && out.epoch == next.epoch:
			return []any{next}
		case !out.ok && !can && (out.code != raftnode.CodeStaleEpoch || st.epoch != in.epoch):
			return []any{st}
		}
		return nil
	}
	return nil
}

var asgModel = (&porcupine.NondeterministicModel{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range h {
			k := op.Input.(asgIn).shard
			if _, ok := by[k]; !ok {
				keys = append(keys, k)
			}
			by[k] = append(by[k], op)
		}
		var out [][]porcupine.Operation
		for _, k := range keys {
			out = append(out, by[k])
		}
		return out
	},
	Init: func() []any { return []any{asgState{}} },
	Step: asgStep,
	DescribeOperation: func(in, out any) string {
		return fmt.Sprintf("%c %+v -> %+v", in.(asgIn).op, in, out)
	},
}).ToModel()

func op(client int, call, ret int64, in asgIn, out asgOut) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Call: call, Return: ret, Input: in, Output: out}
}

// The model itself must accept good and catch bad assignment histories.
func TestAssignmentModelCatchesBadHistories(t *testing.T) {
	assign := asgIn{op: 'a', shard: "s", to: "c0"}
	move := asgIn{op: 'm', shard: "s", from: "c0", to: "c1", epoch: 1}
	read := asgIn{op: 'r', shard: "s"}
	tests := []struct {
		name string
		h    []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"sequential ok", []porcupine.Operation{
			op(0, 0, 1, assign, asgOut{ok: true, epoch: 1}),
			op(0, 2, 3, move, asgOut{ok: true, epoch: 2}),
			op(1, 4, 5, read, asgOut{child: "c1", epoch: 2}),
		}, porcupine.Ok},
		{"stale read after acknowledged move", []porcupine.Operation{
			op(0, 0, 1, assign, asgOut{ok: true, epoch: 1}),
			op(0, 2, 3, move, asgOut{ok: true, epoch: 2}),
			op(1, 4, 5, read, asgOut{child: "c0", epoch: 1}),
		}, porcupine.Illegal},
		{"concurrent read may see either", []porcupine.Operation{
			op(0, 0, 1, assign, asgOut{ok: true, epoch: 1}),
			op(0, 2, 6, move, asgOut{ok: true, epoch: 2}),
			op(1, 3, 5, read, asgOut{child: "c0", epoch: 1}),
		}, porcupine.Ok},
		{"two compare-and-sets on one epoch both succeed", []porcupine.Operation{
			op(0, 0, 1, assign, asgOut{ok: true, epoch: 1}),
			op(0, 2, 4, move, asgOut{ok: true, epoch: 2}),
			op(1, 2, 4, asgIn{op: 'm', shard: "s", from: "c0", to: "c2", epoch: 1}, asgOut{ok: true, epoch: 2}),
		}, porcupine.Illegal},
		{"unknown write may have landed", []porcupine.Operation{
			op(0, 0, 1, assign, asgOut{ok: true, epoch: 1}),
			op(0, 2, math.MaxInt64, move, asgOut{unknown: true}),
			op(1, 5, 6, read, asgOut{child: "c1", epoch: 2}),
			op(1, 7, 8, read, asgOut{child: "c1", epoch: 2}),
		}, porcupine.Ok},
		{"unknown write seen then unseen", []porcupine.Operation{
			op(0, 0, 1, assign, asgOut{ok: true, epoch: 1}),
			op(0, 2, math.MaxInt64, move, asgOut{unknown: true}),
			op(1, 5, 6, read, asgOut{child: "c1", epoch: 2}),
			op(1, 7, 8, read, asgOut{child: "c0", epoch: 1}),
		}, porcupine.Illegal},
		{"second assign must conflict", []porcupine.Operation{
			op(0, 0, 1, assign, asgOut{ok: true, epoch: 1}),
			op(1, 2, 3, asgIn{op: 'a', shard: "s", to: "c1"}, asgOut{ok: true, epoch: 2}),
		}, porcupine.Illegal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := porcupine.CheckOperationsTimeout(asgModel, tt.h, 10*time.Second); got != tt.want {
				t.Fatalf("checker says %v, want %v", got, tt.want)
			}
		})
	}
}

// ---- The real history ----

// TestAssignmentTableIsLinearizable records concurrent assigns, epoch
// compare-and-set moves and linearizable reads from several clients against an
// in-memory group while the leader is killed and restarted and the group is
// partitioned, then checks the history with porcupine: 0 violations.
func TestAssignmentTableIsLinearizable(t *testing.T) {
	c := raftest.New(t, 3, newFSM)
	tier := func(i int) *raftnode.Tier { return raftnode.NewTier(c.Node(i), c.FSM(i).(*fsm.FSM)) }
	const shards = 6
	{
		l := tier(c.MustLeader())
		for _, id := range []interfaces.ChildID{"c0", "c1", "c2"} {
			mustOK(t, l, &fsm.PutChild{Child: interfaces.Child{ID: id, Tier: "host", Capacity: interfaces.Load{CPU: 1e9}}})
		}
		var specs []interfaces.Shard
		for i := range shards {
			specs = append(specs, interfaces.Shard{ID: interfaces.ShardID(fmt.Sprintf("s%d", i)), Job: "j", Load: interfaces.Load{CPU: 1}})
		}
		mustOK(t, l, &fsm.PutShards{Shards: specs})
	}

	start := time.Now()
	now := func() int64 { return int64(time.Since(start)) }
	var (
		mu      sync.Mutex
		history []porcupine.Operation
		stats   = map[string]int{}
	)
	record := func(o porcupine.Operation, kind string) {
		mu.Lock()
		history = append(history, o)
		stats[kind]++
		mu.Unlock()
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	const clients = 5
	for cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(cl), 42))
			seen := map[string]asgState{} // this client's last view of each shard
			for {
				select {
				case <-stop:
					return
				default:
				}
				li, err := c.Leader(time.Second)
				if err != nil {
					continue
				}
				n := c.Node(li)
				if n == nil {
					continue
				}
				tr := raftnode.NewTier(n, c.FSM(li).(*fsm.FSM))
				shard := fmt.Sprintf("s%d", rng.IntN(shards))
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				call := now()
				switch p := rng.IntN(10); {
				case p < 4:
					in := asgIn{op: 'r', shard: shard}
					a, found, err := tr.Assignment(ctx, raftnode.ReadLinearizable, interfaces.ShardID(shard))
					ret := now()
					if err == nil {
						// Shards are never unassigned here: not found means never
						// assigned, which is epoch 0.
						out := asgOut{}
						if found {
							out.child, out.epoch = string(a.Child), uint64(a.Epoch)
						}
						seen[shard] = asgState{out.child, out.epoch}
						record(op(cl, call, ret, in, out), "read")
					}
				case p < 6:
					in := asgIn{op: 'a', shard: shard, to: fmt.Sprintf("c%d", rng.IntN(3))}
					e, err := tr.Assign(ctx, interfaces.ShardID(in.shard), interfaces.ChildID(in.to), "lin")
					ret := now()
					if o, kind, keep := writeOutcome(e, err); keep {
						if kind == "unknown" {
							ret = math.MaxInt64
						}
						record(op(cl, call, ret, in, o), "assign "+kind)
					}
				default:
					s := seen[shard]
					from := s.child
					if from == "" {
						from = "c0"
					}
					to := fmt.Sprintf("c%d", rng.IntN(3))
					if to == from {
						to = fmt.Sprintf("c%d", (rng.IntN(2)+1+int(from[1]-'0'))%3)
					}
					in := asgIn{op: 'm', shard: shard, from: from, to: to, epoch: s.epoch}
					if in.epoch == 0 {
						in.epoch = 1
					}
					e, err := tr.Move(ctx, interfaces.Move{Shard: interfaces.ShardID(shard), From: interfaces.ChildID(from), To: interfaces.ChildID(to), Epoch: interfaces.Epoch(in.epoch)})
					ret := now()
					if o, kind, keep := writeOutcome(e, err); keep {
						if kind == "unknown" {
							ret = math.MaxInt64
						}
						if o.ok {
							seen[shard] = asgState{to, uint64(e)}
						}
						record(op(cl, call, ret, in, o), "move "+kind)
					}
				}
				cancel()
			}
		}()
	}

	// Faults while the clients run.
	rng := rand.New(rand.NewPCG(7, 7))
	for round := range 6 {
		time.Sleep(250 * time.Millisecond)
		li, err := c.Leader(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		switch round % 3 {
		case 0: // kill the leader, restart it later
			c.Kill(li)
			time.Sleep(400 * time.Millisecond)
			if err := c.Restart(li); err != nil {
				t.Fatal(err)
			}
		case 1: // the leader alone on the minority side
			c.Partition(li)
			time.Sleep(400 * time.Millisecond)
			c.Heal()
		case 2: // a follower alone
			c.Partition((li + 1 + rng.IntN(2)) % 3)
			time.Sleep(400 * time.Millisecond)
			c.Heal()
		}
	}
	time.Sleep(250 * time.Millisecond)
	close(stop)
	wg.Wait()
	c.MustEnsureSame()

	t.Logf("history: %d operations %v", len(history), stats)
	if stats["read"] < 50 || stats["move ok"] < 20 || stats["assign ok"] < 1 {
		t.Fatalf("history too thin to mean anything: %v", stats)
	}
	res, info := porcupine.CheckOperationsVerbose(asgModel, history, 60*time.Second)
	if res != porcupine.Ok {
		path := t.TempDir() + "/linearizability.html"
		if err := porcupine.VisualizePath(asgModel, info, path); err == nil {
			t.Logf("visualization: %s", path)
		}
		t.Fatalf("porcupine: %v (want Ok: 0 violations)", res)
	}
}

// writeOutcome classifies a write's result for the history. keep is false for
// writes that certainly did nothing (not leader): they are left out.
func writeOutcome(e interfaces.Epoch, err error) (asgOut, string, bool) {
	switch {
	case err == nil:
		return asgOut{ok: true, epoch: uint64(e)}, "ok", true
	case errors.Is(err, interfaces.ErrStaleEpoch):
		return asgOut{code: raftnode.CodeStaleEpoch}, "rejected", true
	case errors.Is(err, interfaces.ErrConflict):
		return asgOut{code: raftnode.CodeConflict}, "rejected", true
	case errors.Is(err, interfaces.ErrNotLeader):
		return asgOut{}, "", false
	}
	return asgOut{unknown: true}, "unknown", true
}
