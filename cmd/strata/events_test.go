package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strata-sched/strata/coordinator/adminview"
	"github.com/strata-sched/strata/coordinator/devcluster"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/internal/testutil"
)

// strata events -o json prints, one JSON object a line, the drain of a host
// and the moves off it with their reasons.
func TestEventsShowADrain(t *testing.T) {
	c, err := devcluster.Start(devcluster.Options{Dir: t.TempDir(), Regions: 1, HostsPerRegion: 2, Interval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.Global.GRPCAddr()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	a := wire.NewAdminClient(cc)
	ctx := context.Background()
	if _, err := a.SubmitJob(ctx, &wire.SubmitJobRequest{Job: &wire.JobSpec{Id: "ev", Parallelism: 8, ShardTemplate: &wire.Shard{Load: &wire.Load{Cpu: 0.5, Tasks: 1}}}}); err != nil {
		t.Fatal(err)
	}
	host := "region-1-host-1"
	testutil.Eventually(t, host+" runs shards", 30*time.Second, func() error {
		if k := len(c.Hosts[host].Agent().Running()); k == 0 {
			return fmt.Errorf("%s runs none", host)
		}
		return nil
	})
	// strata events --follow, stopped (as by Ctrl-C) once the moves are seen.
	var out, errOut testutil.Buffer
	root := newRootCmd(&out, &errOut)
	root.SetArgs([]string{"events", "--addr", addr, "--follow", "--interval", "300ms", "--timeout", "30s", "-o", "json"})
	evCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(evCtx) }()
	time.Sleep(1500 * time.Millisecond)
	ra, err := grpc.NewClient(c.Regions["region-1"].GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer ra.Close()
	if _, err := wire.NewAdminClient(ra).Drain(ctx, &wire.DrainRequest{Child: host}); err != nil {
		t.Fatal(err)
	}
	movedOff := `"kind":"move","tier":"region","instance":"region-1","shard":`
	testutil.Eventually(t, "strata events prints moves off "+host, 60*time.Second, func() error {
		select {
		case err := <-done:
			t.Fatalf("strata events ended early: %v; stderr: %s; stdout: %s", err, errOut.String(), out.String())
		default:
		}
		if !strings.Contains(out.String(), movedOff) || !strings.Contains(out.String(), `"from":"`+host+`"`) {
			return fmt.Errorf("not yet; output so far:\n%s\nstderr: %s", out.String(), errOut.String())
		}
		return nil
	})
	stop()
	if err := <-done; err != nil {
		t.Fatalf("strata events: %v (%s)", err, errOut.String())
	}
	r := struct{ out string }{out.String()}
	var drained, moved bool
	sc := bufio.NewScanner(strings.NewReader(r.out))
	for sc.Scan() {
		var e adminview.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("not one JSON object a line: %q: %v", sc.Text(), err)
		}
		drained = drained || (e.Kind == adminview.EventChildState && e.Child == host && e.State == "draining")
		moved = moved || (e.Kind == adminview.EventMove && e.From == host && e.Reason != "")
	}
	if !drained || !moved {
		t.Errorf("drain seen %v, a move off %s with its reason seen %v; output:\n%s", drained, host, moved, r.out)
	}
}
