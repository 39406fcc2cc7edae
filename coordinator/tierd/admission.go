package tierd

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/strata-sched/strata/coordinator/fsm"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
)

// ChildrenConfig says which children may register with this tier instance by
// their Hello, and when children that stopped coming back are forgotten.
type ChildrenConfig struct {
	// Allow lists the child IDs admitted; empty admits any ID.
	Allow []string
	// Selector lists labels a child's Hello must carry, each with the given
	// value; empty admits any labels. With both, a child must pass both.
	Selector map[string]string
	// GCAfter forgets a failed child that holds no shard (none owned, none
	// moving to or from it) once it has been failed for this long on the
	// leader's clock; 0 never forgets one (as before).
	GCAfter time.Duration
}

func (c ChildrenConfig) validate() error {
	for i, id := range c.Allow {
		if err := interfaces.ValidateName(fmt.Sprintf("children.allow[%d]", i), id); err != nil {
			return err
		}
	}
	for k := range c.Selector {
		if k == "" {
			return fmt.Errorf("children.selector: label keys must not be empty: %w", interfaces.ErrInvalid)
		}
	}
	if c.GCAfter < 0 {
		return fmt.Errorf("children.gc_after: must be ≥ 0 (got %v): %w", c.GCAfter, interfaces.ErrInvalid)
	}
	return nil
}

// admit says whether a child that sent this Hello may register; the error
// (PERMISSION_DENIED) names the rule it broke.
func (c ChildrenConfig) admit(h *wire.Hello) error {
	id := h.GetChildId()
	if len(c.Allow) > 0 && !slices.Contains(c.Allow, id) {
		return status.Errorf(codes.PermissionDenied, "hello.child_id: %q is not in children.allow of this tier instance; refused", id)
	}
	keys := make([]string, 0, len(c.Selector))
	for k := range c.Selector {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if got, ok := h.GetLabels()[k]; !ok || got != c.Selector[k] {
			return status.Errorf(codes.PermissionDenied, "hello.labels: child %q must carry %s=%s (children.selector of this tier instance; it has %s); refused",
				id, k, c.Selector[k], labelString(h.GetLabels()))
		}
	}
	return nil
}

func labelString(m map[string]string) string {
	if len(m) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(m))
	for k, v := range m {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// admittedStream checks the first message of a session (its Hello) against
// the admission policy before the session handler sees it: a refused child
// registers nothing.
type admittedStream struct {
	grpc.ServerStream
	d       *Daemon
	checked bool
}

func (s *admittedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if s.checked {
		return nil
	}
	s.checked = true
	if cm, ok := m.(*wire.ChildMessage); ok && cm.GetHello() != nil {
		if err := s.d.cfg.Children.admit(cm.GetHello()); err != nil {
			s.d.logger.Printf("session: %v", status.Convert(err).Message())
			s.d.scope.Counter("children_refused_total").Inc(1)
			return err
		}
	}
	return nil
}

// gcChildren forgets the children that have been failed for after
// (Children.GCAfter) and hold no shard. The time comes from the control loop
// (now): a child is timed from the first round this leader saw it failed, so
// a new leader starts the count afresh (it forgets later, never earlier).
// Only the control loop's goroutine calls it.
func (d *Daemon) gcChildren(ctx context.Context, now time.Time, after time.Duration) {
	if after <= 0 {
		return
	}
	if d.failedSince == nil {
		d.failedSince = map[interfaces.ChildID]time.Time{}
	}
	failed := map[interfaces.ChildID]bool{}
	for _, cu := range d.tier.FSM.Children() {
		if cu.Child.State != interfaces.ChildFailed {
			continue
		}
		id := cu.Child.ID
		failed[id] = true
		since, ok := d.failedSince[id]
		if !ok {
			d.failedSince[id] = now
			continue
		}
		if now.Sub(since) < after || cu.Shards > 0 {
			continue
		}
		d.decide.Lock()
		// RemoveChild refuses a child that still owns shards or has moves in
		// flight from it (ErrConflict): nothing held is ever forgotten.
		c, ok := d.tier.FSM.Child(id)
		var err error
		if ok && c.State == interfaces.ChildFailed {
			_, err = d.commit(ctx, &fsm.RemoveChild{ID: id})
		}
		d.decide.Unlock()
		if err != nil {
			d.logger.Printf("children.gc_after: keeping %s: %v", id, err)
			continue
		}
		if ok {
			d.logger.Printf("children.gc_after: forgot %s, failed since %s and holding no shard", id, since.Format(time.RFC3339))
			d.scope.Counter("children_forgotten_total").Inc(1)
		}
		delete(d.failedSince, id)
	}
	for id := range d.failedSince {
		if !failed[id] {
			delete(d.failedSince, id) // back, or gone
		}
	}
}
