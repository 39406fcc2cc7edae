package raftest

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// kvFSM is a tiny FSM for testing the harness itself: "key=value" commands.
type kvFSM struct {
	mu sync.Mutex
	m  map[string]string
}

func newKV() raft.FSM { return &kvFSM{m: map[string]string{}} }

func (f *kvFSM) Apply(l *raft.Log) any {
	k, v, ok := strings.Cut(string(l.Data), "=")
	if !ok {
		return fmt.Errorf("bad command %q", l.Data)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m[k] = v
	return len(f.m)
}

func (f *kvFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var lines []string
	for k, v := range f.m {
		lines = append(lines, k+"="+v+"\n")
	}
	sort.Strings(lines)
	return kvSnap(strings.Join(lines, "")), nil
}

func (f *kvFSM) Restore(r io.ReadCloser) error {
	defer r.Close()
	m := map[string]string{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), "=")
		m[k] = v
	}
	f.mu.Lock()
	f.m = m
	f.mu.Unlock()
	return sc.Err()
}

func (f *kvFSM) get(k string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.m[k]
	return v, ok
}

type kvSnap string

func (s kvSnap) Persist(sink raft.SnapshotSink) error {
	if _, err := io.WriteString(sink, string(s)); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}
func (s kvSnap) Release() {}

func TestClusterPartitionHealConverges(t *testing.T) {
	c := New(t, 3, newKV)
	for i := range 20 {
		if _, err := c.Apply(fmt.Appendf(nil, "k%d=%d", i, i), 5*time.Second); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	c.MustEnsureSame()

	old := c.MustLeader()
	c.Disconnect(old)
	// The majority elects another leader and keeps taking writes.
	var acked []int
	for i := 20; i < 40; i++ {
		if _, err := c.Apply(fmt.Appendf(nil, "k%d=%d", i, i), 5*time.Second); err == nil {
			acked = append(acked, i)
		}
	}
	if len(acked) == 0 {
		t.Fatal("the majority side accepted no write while the old leader was cut off")
	}
	nl := c.MustLeader()
	if nl == old {
		t.Fatalf("replica %d still leads although it is cut off", old)
	}
	c.Heal()
	c.MustEnsureSame()
	for _, i := range c.Live() {
		var missing []int
		err := c.Node(i).ReadStale(0, func(f raft.FSM) error {
			for _, k := range acked {
				if v, ok := f.(*kvFSM).get(fmt.Sprintf("k%d", k)); !ok || v != fmt.Sprint(k) {
					missing = append(missing, k)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(missing) > 0 {
			t.Fatalf("replica %d lost acknowledged writes %v", i, missing)
		}
	}
}

func TestClusterKillRestartKeepsState(t *testing.T) {
	c := New(t, 3, newKV)
	for i := range 10 {
		if _, err := c.Apply(fmt.Appendf(nil, "a%d=x", i), 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	l := c.MustLeader()
	c.Kill(l)
	if _, err := c.Apply([]byte("after=kill"), 5*time.Second); err != nil {
		t.Fatalf("write after leader kill: %v", err)
	}
	if err := c.Restart(l); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(l); err == nil {
		t.Fatal("restarting a running replica must fail")
	}
	c.MustEnsureSame()
	var v string
	_ = c.Node(l).ReadStale(0, func(f raft.FSM) error { v, _ = f.(*kvFSM).get("after=kill"[:5]); return nil })
	if v != "kill" {
		t.Fatalf("restarted replica reads after=%q, want kill", v)
	}
}

func TestEnsureSameDetectsDivergence(t *testing.T) {
	c := New(t, 3, newKV)
	if _, err := c.Apply([]byte("x=1"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	c.MustEnsureSame()
	// Corrupt one follower's FSM behind raft's back: EnsureSame must notice.
	l := c.MustLeader()
	f := (l + 1) % 3
	_ = c.Node(f).ReadStale(0, func(fsm raft.FSM) error {
		k := fsm.(*kvFSM)
		k.mu.Lock()
		k.m["x"] = "corrupt"
		k.mu.Unlock()
		return nil
	})
	if err := c.EnsureSame(500 * time.Millisecond); err == nil {
		t.Fatal("EnsureSame passed although a replica's state was corrupted")
	}
}
