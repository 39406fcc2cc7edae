package tierd

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/strata-sched/strata/coordinator/fsm"
	"github.com/strata-sched/strata/coordinator/tiercore"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/tiers/control"
)

// policyState is the leader's control policies (tiers/control: straggler,
// doctor, autoscale) and what they need and found.
type policyState struct {
	// set is made with the controller when this replica becomes leader; only
	// the control-loop goroutine uses it.
	set *control.Policies

	mu       sync.Mutex
	failures []control.Failure // shard process failures since the last round (from acks)
	findings []control.Finding // the last round's findings
}

// maxPendingFailures bounds the failures kept between two rounds.
const maxPendingFailures = 4096

// noteFailure records that shard's process failed on child (an assign ack with
// failed set): evidence for the doctor.
func (d *Daemon) noteFailure(shard interfaces.ShardID, child interfaces.ChildID, why string, at time.Time) {
	d.pol.mu.Lock()
	defer d.pol.mu.Unlock()
	if len(d.pol.failures) < maxPendingFailures {
		d.pol.failures = append(d.pol.failures, control.Failure{Shard: shard, Child: child, At: at, Error: why})
	}
	d.scope.Counter("shard_failures_total").Inc(1)
}

func (d *Daemon) takeFailures() []control.Failure {
	d.pol.mu.Lock()
	defer d.pol.mu.Unlock()
	f := d.pol.failures
	d.pol.failures = nil
	return f
}

// Findings returns the control policies' findings of the last round.
func (d *Daemon) Findings() []control.Finding {
	d.pol.mu.Lock()
	defer d.pol.mu.Unlock()
	return append([]control.Finding(nil), d.pol.findings...)
}

func (d *Daemon) newPolicies() error {
	ps, err := control.NewPolicies(d.cfg.ControlPolicies, d.cfg.ControlPolicyConfig)
	if err != nil {
		return err
	}
	d.pol.set = ps
	return nil
}

// withoutQuarantined drops the quarantined shards from v (they are never
// placed) and returns their reasons.
func (d *Daemon) withoutQuarantined(v *interfaces.View) map[interfaces.ShardID]string {
	q := d.tier.FSM.Quarantined()
	if len(q) > 0 {
		dropShards(v, func(id interfaces.ShardID) bool { _, ok := q[id]; return ok })
	}
	return q
}

// dropShards is tiercore.DropShards (the uplink's view filter uses it too).
var dropShards = tiercore.DropShards

// resize changes a job's shard count to r.Target (autoscale in mode apply):
// new shards "<job>/<n>" copy the spec of the job's last shard; removed shards
// are the last ones (natural order), stopped like a deleted job's. The job's
// declared input rate is spread evenly over the new count. It returns the
// shards it deleted. Called with d.decide held, on the top tier.
func (d *Daemon) resize(ctx context.Context, r control.Resize) ([]interfaces.ShardID, error) {
	// The job's shards as the policy counted them: not the quarantined ones,
	// which are out of placement (and never deleted or copied here).
	var shards []interfaces.Shard
	quarantined := d.tier.FSM.Quarantined()
	for _, s := range d.tier.FSM.View(d.cfg.Tier, d.cfg.Instance).Shards {
		if s.Job == r.Job && quarantined[s.ID] == "" {
			shards = append(shards, s)
		}
	}
	if len(shards) != r.Current {
		return nil, fmt.Errorf("the job has %d shards now, not %d: %w", len(shards), r.Current, interfaces.ErrConflict)
	}
	sort.Slice(shards, func(i, j int) bool { return shardIndexLess(shards[i].ID, shards[j].ID) })
	var total float64
	for _, s := range shards {
		total += s.InputRate
	}
	per := total / float64(r.Target)
	if r.Target > r.Current {
		next := 0
		for _, s := range shards {
			if n, ok := shardIndex(s.ID, r.Job); ok && n >= next {
				next = n + 1
			}
		}
		tmpl := shards[len(shards)-1]
		add := make([]interfaces.Shard, 0, r.Target)
		for _, s := range shards {
			s.InputRate = per
			add = append(add, s)
		}
		for len(add) < r.Target {
			id := interfaces.ShardID(fmt.Sprintf("%s/%d", r.Job, next))
			next++
			if _, taken := d.tier.FSM.Shard(id); taken {
				continue
			}
			// An ID deleted before is fine: RetireShards left the epoch
			// floor above its epochs, so the new shard starts above them.
			s := tmpl
			s.ID, s.InputRate = id, per
			add = append(add, s)
		}
		_, err := d.commit(ctx, &fsm.PutShards{Shards: add})
		return nil, err
	}
	keep := make([]interfaces.Shard, 0, r.Target)
	for _, s := range shards[:r.Target] {
		s.InputRate = per
		keep = append(keep, s)
	}
	victims := shards[r.Target:]
	ids := make([]interfaces.ShardID, 0, len(victims))
	type owned struct {
		child interfaces.ChildID
		epoch interfaces.Epoch
	}
	owners := map[interfaces.ShardID]owned{}
	for _, s := range victims {
		st, _ := d.tier.FSM.Shard(s.ID)
		if st.Owner != "" {
			owners[s.ID] = owned{st.Owner, st.Epoch}
		}
		ids = append(ids, s.ID)
	}
	// One entry aborts the victims' in-flight moves and deletes them, or
	// changes nothing.
	if _, err := d.commit(ctx, &fsm.RetireShards{DropShards: fsm.DropShards{IDs: ids, Reason: "autoscale: removed"}}); err != nil {
		return nil, err
	}
	// They are gone: stop them where they run, whatever happens to the
	// spreading of their input below.
	defer d.revokeDeleted(ids, func(id interfaces.ShardID) (interfaces.ChildID, interfaces.Epoch, bool) {
		o, ok := owners[id]
		return o.child, o.epoch, ok
	})
	if _, err := d.commit(ctx, &fsm.PutShards{Shards: keep}); err != nil {
		return ids, err
	}
	return ids, nil
}

// revokeDeleted tells the children running deleted shards to stop them (owner
// gives where each ran and at which epoch) and remembers their wire epochs,
// so that reconciliation stops a straggler.
func (d *Daemon) revokeDeleted(ids []interfaces.ShardID, owner func(interfaces.ShardID) (interfaces.ChildID, interfaces.Epoch, bool)) {
	for _, id := range ids {
		child, epoch, ok := owner(id)
		if !ok {
			continue
		}
		if we, known := d.wireEpoch(id, epoch); known {
			d.mu.Lock()
			d.deleted[id] = we
			d.mu.Unlock()
		}
		d.sendRevoke(child, id, epoch)
	}
}

// shardIndex parses "<job>/<n>".
func shardIndex(id interfaces.ShardID, job string) (int, bool) {
	rest, ok := strings.CutPrefix(string(id), job+"/")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n >= 0
}

// shardIndexLess orders "<job>/2" before "<job>/10".
func shardIndexLess(a, b interfaces.ShardID) bool {
	ai, aj := strings.LastIndexByte(string(a), '/'), strings.LastIndexByte(string(b), '/')
	if ai >= 0 && aj >= 0 && a[:ai] == b[:aj] {
		x, err1 := strconv.Atoi(string(a[ai+1:]))
		y, err2 := strconv.Atoi(string(b[aj+1:]))
		if err1 == nil && err2 == nil {
			return x < y
		}
	}
	return a < b
}

// ReleaseShard releases a shard the doctor quarantined at this tier instance.
func (d *Daemon) ReleaseShard(ctx context.Context, req *wire.ReleaseShardRequest) (*wire.ReleaseShardResponse, error) {
	if resp, ok, err := forward(ctx, d, func(c wire.AdminClient) (*wire.ReleaseShardResponse, error) { return c.ReleaseShard(ctx, req) }); ok {
		return resp, err
	}
	id := interfaces.ShardID(req.GetShard())
	if err := interfaces.ValidateID("shard", string(id)); err != nil {
		return nil, wire.ToStatus(err)
	}
	reason := req.GetReason()
	if reason == "" {
		reason = "released by an operator"
	}
	d.decide.Lock()
	res, err := d.commit(ctx, &fsm.Quarantine{Shard: id, Release: true, Reason: reason})
	d.decide.Unlock()
	if err != nil {
		return nil, wire.ToStatus(fmt.Errorf("release %s in %s/%s: %w", id, d.cfg.Tier, d.cfg.Instance, err))
	}
	d.logger.Printf("shard %s released from quarantine: %s", id, reason)
	d.poke()
	return &wire.ReleaseShardResponse{Tier: d.cfg.Tier, Instance: d.cfg.Instance, StateIndex: res.Index}, nil
}

// findingsAbout returns the last findings about a shard or its job, as text.
func (d *Daemon) findingsAbout(shard interfaces.ShardID, job string) []string {
	var out []string
	for _, f := range d.Findings() {
		if (f.Shard != "" && f.Shard == shard) || (f.Job != "" && f.Job == job) {
			out = append(out, f.String())
		}
	}
	return out
}

func findingStrings(fs []control.Finding) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.String()
	}
	return out
}
