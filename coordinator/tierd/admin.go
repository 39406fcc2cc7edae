package tierd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"time"

	"github.com/strata-sched/strata/coordinator/fsm"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
	"google.golang.org/grpc"
)

// The Admin service answers for this tier instance. Writes are served by the
// leader; a follower forwards them to the leader (one hop). Tools walk the tree
// through ChildStatus.address.

func isNotFound(err error) bool { return errors.Is(err, interfaces.ErrNotFound) }

// forward calls fn on the leader's Admin service when this replica is not the
// leader. It returns handled=false when this replica leads.
func forward[Resp any](ctx context.Context, d *Daemon, fn func(wire.AdminClient) (Resp, error)) (resp Resp, handled bool, err error) {
	if d.IsLeader() {
		if !d.waitApplied(ctx, leaderReadyWait) {
			// Raft made this replica leader, but its state machine may not
			// hold every committed entry yet (trackLeadership's barrier): a
			// read of it now could say a job does not exist that does — a
			// DeleteJob answered NotFound, taken for done, left the job's
			// shard running for good (chaos soak, seed 20261204).
			return resp, true, wire.ToStatus(fmt.Errorf("%s/%s was just elected and is still applying its log; retry shortly: %w", d.cfg.Tier, d.cfg.Instance, interfaces.ErrNotLeader))
		}
		return resp, false, nil
	}
	addr, _ := d.leaderGRPC()
	if addr == "" {
		return resp, true, wire.ToStatus(fmt.Errorf("no leader known for %s/%s; retry shortly: %w", d.cfg.Tier, d.cfg.Instance, interfaces.ErrNotLeader))
	}
	// The caller's token travels with the call: the leader checks it again.
	cc, err := d.dialPeer(addr, grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(forwardContext(ctx), method, req, reply, cc, opts...)
	}))
	if err != nil {
		return resp, true, err
	}
	defer cc.Close()
	resp, err = fn(wire.NewAdminClient(cc))
	return resp, true, err
}

// jobShards expands a job spec into its shards.
func jobShards(spec *wire.JobSpec) ([]interfaces.Shard, error) {
	if spec == nil {
		return nil, fmt.Errorf("job: is required: %w", interfaces.ErrInvalid)
	}
	if err := interfaces.ValidateName("job.id", spec.GetId()); err != nil {
		return nil, err
	}
	var shards []interfaces.Shard
	switch {
	case len(spec.GetShards()) > 0 && spec.GetParallelism() > 0:
		return nil, fmt.Errorf("job.parallelism: give either shards or parallelism with a shard_template, not both: %w", interfaces.ErrInvalid)
	case len(spec.GetShards()) > 0:
		for i, m := range spec.GetShards() {
			if m.GetJob() == "" {
				m = cloneShard(m)
				m.Job = spec.GetId() // a shard names its job by default
			}
			s, err := wire.ShardFromWire(m)
			if err != nil {
				return nil, fmt.Errorf("job.shards[%d]: %w", i, err)
			}
			if s.Job != spec.GetId() {
				return nil, fmt.Errorf("job.shards[%d].job: must be the job's id %q (got %q): %w", i, spec.GetId(), s.Job, interfaces.ErrInvalid)
			}
			shards = append(shards, s)
		}
	case spec.GetParallelism() > 0:
		if spec.GetParallelism() > fsm.MaxBatch {
			return nil, fmt.Errorf("job.parallelism: must be ≤ %d (got %d): %w", fsm.MaxBatch, spec.GetParallelism(), interfaces.ErrInvalid)
		}
		tmpl := spec.GetShardTemplate()
		for i := int64(0); i < spec.GetParallelism(); i++ {
			m := &wire.Shard{}
			if tmpl != nil {
				m = cloneShard(tmpl)
			}
			m.Id = fmt.Sprintf("%s/%d", spec.GetId(), i)
			m.Job = spec.GetId()
			s, err := wire.ShardFromWire(m)
			if err != nil {
				return nil, fmt.Errorf("job.shard_template: %w", err)
			}
			shards = append(shards, s)
		}
	default:
		return nil, fmt.Errorf("job: needs shards, or parallelism > 0 with a shard_template: %w", interfaces.ErrInvalid)
	}
	seen := map[interfaces.ShardID]bool{}
	for i, s := range shards {
		if err := interfaces.ValidateShard(s); err != nil {
			return nil, fmt.Errorf("job.shards[%d]: %w", i, err)
		}
		if seen[s.ID] {
			return nil, fmt.Errorf("job.shards[%d].id: %q appears twice: %w", i, s.ID, interfaces.ErrInvalid)
		}
		seen[s.ID] = true
	}
	return shards, nil
}

func cloneShard(m *wire.Shard) *wire.Shard {
	// A shallow copy is enough: the fields we overwrite are scalars.
	c := &wire.Shard{
		Id: m.GetId(), Job: m.GetJob(), Load: m.GetLoad(), InputRate: m.GetInputRate(),
		StateBytes: m.GetStateBytes(), LatencySloNanos: m.GetLatencySloNanos(), Constraints: m.GetConstraints(),
	}
	return c
}

// SubmitJob adds a job's shards to the top tier. It is all or nothing: a job
// whose id is taken, or any bad shard, changes nothing.
func (d *Daemon) SubmitJob(ctx context.Context, req *wire.SubmitJobRequest) (*wire.SubmitJobResponse, error) {
	if d.up != nil {
		return nil, wire.ToStatus(fmt.Errorf("jobs are submitted to the top tier, not to %s/%s: %w", d.cfg.Tier, d.cfg.Instance, interfaces.ErrInvalid))
	}
	shards, err := jobShards(req.GetJob())
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	if resp, ok, err := forward(ctx, d, func(c wire.AdminClient) (*wire.SubmitJobResponse, error) { return c.SubmitJob(ctx, req) }); ok {
		return resp, err
	}
	job := req.GetJob().GetId()
	// The checks and the write under the decide lock: two submits of
	// overlapping shards must not both pass the checks (PutShards would
	// replace the first job's shard).
	d.decide.Lock()
	defer d.decide.Unlock()
	for _, s := range d.tier.FSM.View(d.cfg.Tier, d.cfg.Instance).Shards {
		if s.Job == job {
			return nil, wire.ToStatus(fmt.Errorf("job %q already exists; delete it first: %w", job, interfaces.ErrConflict))
		}
	}
	for _, s := range shards {
		if _, ok := d.tier.FSM.Shard(s.ID); ok {
			return nil, wire.ToStatus(fmt.Errorf("shard %q already exists: %w", s.ID, interfaces.ErrConflict))
		}
	}
	res, err := d.commit(ctx, &fsm.PutShards{Shards: shards})
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	// Accepted (a child may join later), but said: the shards wait.
	if c := shards[0].Constraints; c.Pinned != "" || len(c.Allowed) > 0 {
		has := func(id interfaces.ChildID) bool { _, ok := d.tier.FSM.Child(id); return ok }
		if (c.Pinned != "" && !has(c.Pinned)) || (c.Pinned == "" && !slices.ContainsFunc(c.Allowed, has)) {
			d.logger.Printf("job %s: its pinned or allowed children (%q, %q) are not children of this tier: its shards are infeasible here until one joins", job, c.Pinned, c.Allowed)
		}
	}
	d.poke()
	ids := make([]string, len(shards))
	for i, s := range shards {
		ids[i] = string(s.ID)
	}
	return &wire.SubmitJobResponse{Job: job, Shards: ids, StateIndex: res.Index}, nil
}

// ListJobs lists the jobs this tier instance holds shards of.
func (d *Daemon) ListJobs(ctx context.Context, _ *wire.ListJobsRequest) (*wire.ListJobsResponse, error) {
	v := d.tier.FSM.View(d.cfg.Tier, d.cfg.Instance)
	owned := map[interfaces.ShardID]bool{}
	for _, a := range v.Assignments {
		owned[a.Shard] = true
	}
	jobs := map[string]*wire.JobInfo{}
	loads := map[string]interfaces.Load{}
	for _, s := range v.Shards {
		j := jobs[s.Job]
		if j == nil {
			j = &wire.JobInfo{Id: s.Job}
			jobs[s.Job] = j
		}
		j.Shards++
		if owned[s.ID] {
			j.Placed++
		}
		loads[s.Job] = loads[s.Job].Add(s.Load)
	}
	resp := &wire.ListJobsResponse{}
	for id, j := range jobs {
		j.Load = wire.LoadToWire(loads[id])
		resp.Jobs = append(resp.Jobs, j)
	}
	sort.Slice(resp.Jobs, func(i, k int) bool { return resp.Jobs[i].Id < resp.Jobs[k].Id })
	return resp, nil
}

// DeleteJob removes a job's shards from the top tier; the children running them
// are told to stop (Revoke) and reconciliation stops any straggler.
func (d *Daemon) DeleteJob(ctx context.Context, req *wire.DeleteJobRequest) (*wire.DeleteJobResponse, error) {
	if d.up != nil {
		return nil, wire.ToStatus(fmt.Errorf("jobs are deleted at the top tier: %w", interfaces.ErrInvalid))
	}
	if resp, ok, err := forward(ctx, d, func(c wire.AdminClient) (*wire.DeleteJobResponse, error) { return c.DeleteJob(ctx, req) }); ok {
		return resp, err
	}
	d.decide.Lock()
	defer d.decide.Unlock()
	type owned struct {
		child interfaces.ChildID
		epoch interfaces.Epoch
	}
	var ids []interfaces.ShardID
	var running []interfaces.ShardID
	owners := map[interfaces.ShardID]owned{}
	for _, s := range d.tier.FSM.View(d.cfg.Tier, d.cfg.Instance).Shards {
		if s.Job != req.GetJob() {
			continue
		}
		ids = append(ids, s.ID)
		st, _ := d.tier.FSM.Shard(s.ID)
		if st.Owner != "" {
			owners[s.ID] = owned{st.Owner, st.Epoch}
			running = append(running, s.ID)
		}
	}
	if len(ids) == 0 {
		return nil, wire.ToStatus(fmt.Errorf("job %q: %w", req.GetJob(), interfaces.ErrNotFound))
	}
	// One entry: the shards' in-flight moves are aborted and the shards
	// deleted together, or nothing changes.
	res, err := d.commit(ctx, &fsm.RetireShards{DropShards: fsm.DropShards{IDs: ids, Reason: "job deleted"}})
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	d.revokeDeleted(running, func(id interfaces.ShardID) (interfaces.ChildID, interfaces.Epoch, bool) {
		o, ok := owners[id]
		return o.child, o.epoch, ok
	})
	return &wire.DeleteJobResponse{ShardsRemoved: int64(len(ids)), StateIndex: res.Index}, nil
}

// ListShards lists this instance's shards with their placement at this tier.
func (d *Daemon) ListShards(ctx context.Context, req *wire.ListShardsRequest) (*wire.ListShardsResponse, error) {
	v := d.tier.FSM.View(d.cfg.Tier, d.cfg.Instance)
	reported := ownerLoads(v.Assignments, d.reportsCopy())
	resp := &wire.ListShardsResponse{}
	for _, s := range v.Shards {
		if req.GetJob() != "" && s.Job != req.GetJob() {
			continue
		}
		info := &wire.ShardInfo{Shard: wire.ShardToWire(s)}
		if l, ok := reported[s.ID]; ok {
			info.Measured = wire.LoadToWire(l)
		}
		st, ok := d.tier.FSM.Shard(s.ID)
		info.Quarantined = st.Quarantined
		if ok && (st.Owner != "" || st.InFlight != nil) {
			p := &wire.Placement{Tier: d.cfg.Tier, Instance: d.cfg.Instance, Child: string(st.Owner), Epoch: uint64(st.Epoch)}
			if st.InFlight != nil {
				p.Child, p.InFlight = string(st.InFlight.To), true
			}
			info.Placement = []*wire.Placement{p}
		}
		resp.Shards = append(resp.Shards, info)
	}
	if req.GetJob() != "" && len(resp.Shards) == 0 && d.up == nil {
		return nil, wire.ToStatus(fmt.Errorf("job %q: %w", req.GetJob(), interfaces.ErrNotFound))
	}
	return resp, nil
}

// Status describes this instance: its leader, its policy and its children with
// utilization per resource. Children that are tier instances carry their
// address, so a tool can ask them in turn.
func (d *Daemon) Status(ctx context.Context, _ *wire.StatusRequest) (*wire.StatusResponse, error) {
	if resp, ok, err := forward(ctx, d, func(c wire.AdminClient) (*wire.StatusResponse, error) { return c.Status(ctx, &wire.StatusRequest{}) }); ok && err == nil {
		return resp, nil
	}
	now := time.Now()
	addr, leaderID := d.leaderGRPC()
	if addr == "" && d.IsLeader() {
		addr = d.GRPCAddr()
	}
	inst := &wire.InstanceStatus{
		Instance: d.cfg.Instance, LeaderId: leaderID, LeaderAddress: addr,
		Term: d.tier.Raft().CurrentTerm(), StateIndex: d.tier.FSM.AppliedIndex(), Policy: d.policyStatus(),
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	inst.Alerts = append([]string(nil), d.alerts...)
	inst.Findings = findingStrings(d.Findings())
	for _, cu := range d.tier.FSM.Children() {
		used := cu.Used
		if r, ok := d.reports[cu.Child.ID]; ok && !r.Used.IsZero() {
			used = r.Used // measured beats declared
		}
		cs := &wire.ChildStatus{
			Child: wire.ChildToWire(cu.Child), Used: wire.LoadToWire(used), Shards: int64(cu.Shards),
			Utilization: map[string]float64{}, Address: d.addrs[cu.Child.ID],
		}
		util := used.Div(cu.Child.Capacity)
		for _, r := range cu.Child.Capacity.Names() {
			if cu.Child.Capacity.Get(r) > 0 {
				cs.Utilization[r] = util.Get(r)
			}
		}
		_, cs.Connected = d.sessions[cu.Child.ID]
		if g, ok := d.lastGrant[cu.Child.ID]; ok {
			if left := g.Add(d.cfg.LeaseTTL).Sub(now); left > 0 {
				cs.LeaseRemainingNanos = int64(left)
			}
		}
		inst.Children = append(inst.Children, cs)
	}
	return &wire.StatusResponse{Tiers: []*wire.TierStatus{{Tier: d.cfg.Tier, Instances: []*wire.InstanceStatus{inst}}}}, nil
}

// setState commits child's new state. Under the decide lock: the read and the
// write of the child's record must not interleave with the control loop
// declaring it failed or a report updating its capacity, or one of them would
// overwrite the other.
func (d *Daemon) setState(ctx context.Context, child string, state interfaces.ChildState) (*fsm.Result, int, error) {
	d.decide.Lock()
	defer d.decide.Unlock()
	c, ok := d.tier.FSM.Child(interfaces.ChildID(child))
	if !ok {
		return nil, 0, fmt.Errorf("child %q of %s/%s: %w", child, d.cfg.Tier, d.cfg.Instance, interfaces.ErrNotFound)
	}
	shards := 0
	for _, cu := range d.tier.FSM.Children() {
		if cu.Child.ID == c.ID {
			shards = cu.Shards
		}
	}
	if c.State == interfaces.ChildFailed && state == interfaces.ChildActive {
		return nil, 0, fmt.Errorf("child %q is failed; it becomes active again when it reconnects: %w", child, interfaces.ErrConflict)
	}
	if c.State == interfaces.ChildFailed && state == interfaces.ChildDraining {
		// Draining would hide the failure: moves off a failed child complete
		// without its ack, off a draining one they wait for it.
		return nil, 0, fmt.Errorf("child %q is failed: its shards are being placed elsewhere already; drain it once it has reconnected: %w", child, interfaces.ErrConflict)
	}
	c.State = state
	res, err := d.commit(ctx, &fsm.PutChild{Child: c})
	d.poke()
	return res, shards, err
}

// Drain marks a child draining: it takes no new shards and its shards move away.
func (d *Daemon) Drain(ctx context.Context, req *wire.DrainRequest) (*wire.DrainResponse, error) {
	if resp, ok, err := forward(ctx, d, func(c wire.AdminClient) (*wire.DrainResponse, error) { return c.Drain(ctx, req) }); ok {
		return resp, err
	}
	res, shards, err := d.setState(ctx, req.GetChild(), interfaces.ChildDraining)
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return &wire.DrainResponse{State: wire.ChildState_CHILD_STATE_DRAINING, ShardsToMove: int64(shards), StateIndex: res.Index}, nil
}

// Undrain makes a draining child active again.
func (d *Daemon) Undrain(ctx context.Context, req *wire.UndrainRequest) (*wire.UndrainResponse, error) {
	if resp, ok, err := forward(ctx, d, func(c wire.AdminClient) (*wire.UndrainResponse, error) { return c.Undrain(ctx, req) }); ok {
		return resp, err
	}
	res, _, err := d.setState(ctx, req.GetChild(), interfaces.ChildActive)
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return &wire.UndrainResponse{State: wire.ChildState_CHILD_STATE_ACTIVE, StateIndex: res.Index}, nil
}

// Explain returns a shard's placement at this tier and its placement history
// here, each change with its reason.
func (d *Daemon) Explain(ctx context.Context, req *wire.ExplainRequest) (*wire.ExplainResponse, error) {
	id := interfaces.ShardID(req.GetShard())
	st, ok := d.tier.FSM.Shard(id)
	hist := d.tier.FSM.History(id)
	if !ok && len(hist) == 0 {
		return nil, wire.ToStatus(fmt.Errorf("shard %q in %s/%s: %w", id, d.cfg.Tier, d.cfg.Instance, interfaces.ErrNotFound))
	}
	resp := &wire.ExplainResponse{Quarantined: st.Quarantined, Findings: append(append(d.findingsAbout(id, st.Spec.Job), d.coopFindings(id)...), d.placementFindings(id)...)}
	if ok {
		resp.Shard = wire.ShardToWire(st.Spec)
		if st.Owner != "" || st.InFlight != nil {
			p := &wire.Placement{Tier: d.cfg.Tier, Instance: d.cfg.Instance, Child: string(st.Owner), Epoch: uint64(st.Epoch)}
			if st.InFlight != nil {
				p.Child, p.InFlight = string(st.InFlight.To), true
			}
			resp.Placement = []*wire.Placement{p}
		}
	}
	if n := int(req.GetLimit()); n > 0 && len(hist) > n {
		hist = hist[len(hist)-n:]
	}
	for _, e := range hist {
		resp.History = append(resp.History, &wire.PlacementEvent{
			AtUnixNanos: e.At, Tier: d.cfg.Tier, Instance: d.cfg.Instance, StateIndex: e.Index, Mode: e.Change.String(),
			Move: wire.MoveToWire(interfaces.Move{Shard: e.Shard, From: e.From, To: e.To, Epoch: e.Epoch, Reason: e.Reason, Goal: e.Goal, Delta: e.Delta}),
		})
	}
	return resp, nil
}

// thisInstance checks that a membership request names this tier instance
// (or none): a replica changes only its own group.
func (d *Daemon) thisInstance(tier, instance string) error {
	if (tier != "" && tier != d.cfg.Tier) || (instance != "" && instance != d.cfg.Instance) {
		return fmt.Errorf("tier/instance: this replica is of %s/%s, not %s/%s: ask a replica of that group (strata status lists their addresses): %w",
			d.cfg.Tier, d.cfg.Instance, tier, instance, interfaces.ErrInvalid)
	}
	return nil
}

// RaftJoin adds a voter to this instance's Raft group. The leader first
// checks that the new replica answers at its raft address and, when
// admin_address is given, that the replica there reports the same ID and
// raft address (raftnode's AddVoter); joining a member again is harmless.
// Followers forward it.
func (d *Daemon) RaftJoin(ctx context.Context, req *wire.RaftJoinRequest) (*wire.RaftJoinResponse, error) {
	if err := d.thisInstance(req.GetTier(), req.GetInstance()); err != nil {
		return nil, wire.ToStatus(err)
	}
	if err := interfaces.ValidateName("id", req.GetId()); err != nil {
		return nil, wire.ToStatus(err)
	}
	if req.GetNonvoter() {
		return nil, wire.ToStatus(fmt.Errorf("nonvoter: non-voting members are not supported; join as a voter: %w", interfaces.ErrInvalid))
	}
	if resp, ok, err := forward(ctx, d, func(c wire.AdminClient) (*wire.RaftJoinResponse, error) { return c.RaftJoin(ctx, req) }); ok {
		return resp, err
	}
	if a := req.GetAdminAddress(); a != "" {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, wire.ToStatus(fmt.Errorf("admin_address %q: must be host:port: %w", a, interfaces.ErrInvalid))
		}
	}
	if err := d.tier.AddVoter(ctx, req.GetId(), req.GetAddress(), req.GetAdminAddress()); err != nil {
		return nil, wire.ToStatus(err)
	}
	d.logger.Printf("raft: %s (%s) joined the group", req.GetId(), req.GetAddress())
	return &wire.RaftJoinResponse{Index: d.tier.Raft().LastIndex()}, nil
}

// RaftRemove removes a server from this instance's Raft group (ErrNotFound
// for an unknown ID). Followers forward it.
func (d *Daemon) RaftRemove(ctx context.Context, req *wire.RaftRemoveRequest) (*wire.RaftRemoveResponse, error) {
	if err := d.thisInstance(req.GetTier(), req.GetInstance()); err != nil {
		return nil, wire.ToStatus(err)
	}
	if req.GetId() == "" {
		return nil, wire.ToStatus(fmt.Errorf("id: is required (the server ID to remove): %w", interfaces.ErrInvalid))
	}
	if resp, ok, err := forward(ctx, d, func(c wire.AdminClient) (*wire.RaftRemoveResponse, error) { return c.RaftRemove(ctx, req) }); ok {
		return resp, err
	}
	if err := d.tier.RemoveServer(ctx, req.GetId()); err != nil {
		return nil, wire.ToStatus(err)
	}
	d.logger.Printf("raft: removed %s from the group", req.GetId())
	return &wire.RaftRemoveResponse{Index: d.tier.Raft().LastIndex()}, nil
}

// RaftPeers lists the replicas of this instance's Raft group.
func (d *Daemon) RaftPeers(ctx context.Context, req *wire.RaftPeersRequest) (*wire.RaftPeersResponse, error) {
	if err := d.thisInstance(req.GetTier(), req.GetInstance()); err != nil {
		return nil, wire.ToStatus(err)
	}
	peers, err := d.tier.Peers()
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	resp := &wire.RaftPeersResponse{Term: d.tier.Raft().CurrentTerm(), CommitIndex: d.tier.Raft().CommitIndex()}
	for _, p := range peers {
		resp.Peers = append(resp.Peers, &wire.RaftPeer{Id: p.ID, Address: p.Address, Leader: p.Leader, Voter: p.Suffrage == "Voter"})
	}
	return resp, nil
}
