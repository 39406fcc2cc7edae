package fsm

import (
	"fmt"
	"math"

	"github.com/strata-sched/strata/coordinator/acl"
	"github.com/strata-sched/strata/interfaces"
)

// CmdType is the first byte of every log entry: it says how the rest is encoded.
// Values are on disk and on the wire: only ever append to this list, never reuse or
// renumber a value. A new encoding of an existing command is a new type.
type CmdType uint8

// Command types.
const (
	cmdInvalid      CmdType = iota // 0 is never a valid command
	CmdPutChild                    // register or update one child
	CmdRemoveChild                 // remove an empty child
	CmdPutShards                   // create or update shard specs (batch)
	CmdDeleteShards                // delete shards (batch)
	CmdAssign                      // first placement of an unassigned shard
	CmdUnassign                    // take a shard off its owner (epoch compare-and-set)
	CmdMove                        // commit a new owner (epoch compare-and-set)
	CmdBeginMove                   // start revoke → ack → commit: the move is in flight
	CmdCompleteMove                // commit an in-flight move: new owner, epoch+1
	CmdAbortMove                   // drop an in-flight move; the owner keeps the shard
	CmdApplyPlan                   // a batch of moves, each committed atomically on its own
	CmdQuarantine                  // quarantine a shard (never placed again) or release it
	CmdDropShards                  // delete shards, aborting their in-flight moves (all or none)
	CmdPlanBatch                   // drain children and apply a plan's moves in one entry
	CmdRetireShards                // DropShards, and no epoch of theirs is given again
	CmdPutToken                    // create an ACL token (its secret's hash)
	CmdDeleteToken                 // revoke an ACL token
	cmdEnd                         // one past the last valid type
)

var cmdNames = [...]string{"invalid", "put_child", "remove_child", "put_shards", "delete_shards",
	"assign", "unassign", "move", "begin_move", "complete_move", "abort_move", "apply_plan", "quarantine",
	"drop_shards", "plan_batch", "retire_shards", "put_token", "delete_token"}

func (t CmdType) String() string {
	if int(t) < len(cmdNames) {
		return cmdNames[t]
	}
	return fmt.Sprintf("cmd(%d)", uint8(t))
}

// Command is one typed FSM command. Build one of the concrete types below, turn it
// into log-entry bytes with Encode, and hand those to raft.Apply.
type Command interface {
	Type() CmdType
	validate() error
	encode(e *enc)
}

// PutChild registers a child or replaces its spec (capacity, labels, tier, state).
// The child's shards stay where they are.
type PutChild struct {
	Child interfaces.Child
}

// RemoveChild removes a child. It fails with ErrConflict while the child owns
// shards or is the target of an in-flight move.
type RemoveChild struct {
	ID interfaces.ChildID
}

// PutShards creates shards or replaces their specs. A shard keeps its owner, epoch
// and in-flight move when its spec is replaced.
type PutShards struct {
	Shards []interfaces.Shard
}

// DeleteShards forgets shards. A shard with a move in flight cannot be deleted
// (ErrConflict): abort or complete the move first.
type DeleteShards struct {
	IDs []interfaces.ShardID
}

// Assign places an unassigned shard on Child. The shard's epoch becomes its previous
// epoch + 1 (1 for a new shard). The child must exist and be active.
type Assign struct {
	Shard  interfaces.ShardID
	Child  interfaces.ChildID
	Reason string
}

// Unassign takes a shard off its owner if the shard still has Epoch. The epoch is
// kept, so the next Assign gives epoch + 1.
type Unassign struct {
	Shard  interfaces.ShardID
	Epoch  interfaces.Epoch
	Reason string
}

// Move commits Move.To as the shard's owner in one step, if the shard is still on
// Move.From with Move.Epoch (compare-and-set; ErrStaleEpoch or ErrConflict
// otherwise). The epoch grows by one. Move.From must not be empty: first placements
// use Assign.
type Move struct {
	Move interfaces.Move
}

// BeginMove marks a move in flight (the revoke has been decided): the same checks as
// Move, but the owner and epoch stay until CompleteMove.
type BeginMove struct {
	Move interfaces.Move
}

// CompleteMove commits the in-flight move of Shard, begun at Epoch: the target
// becomes the owner and the epoch grows by one.
type CompleteMove struct {
	Shard interfaces.ShardID
	Epoch interfaces.Epoch
}

// AbortMove drops the in-flight move of Shard, begun at Epoch.
type AbortMove struct {
	Shard  interfaces.ShardID
	Epoch  interfaces.Epoch
	Reason string
}

// ApplyPlan applies the moves of a verified plan in order. Each move is atomic on
// its own and has its own result: a move with an empty From is an Assign, any other
// is a Move (or, when Begin is set, a BeginMove). Tier names the plan's tier for
// the applied-plan log.
type ApplyPlan struct {
	Tier  string
	Begin bool
	Moves []interfaces.Move
}

// Quarantine takes a shard out of placement with a reason (a control policy's
// diagnosis, e.g. "failed on 3 hosts within 10m"): it is taken off its owner
// (its epoch is kept, so a later Assign gives epoch + 1) and no Assign or move
// of it commits until an operator releases it (Release set, Reason optional).
// A shard with a move in flight cannot be quarantined (ErrConflict); neither can
// one that already is, nor can one that is not be released.
type Quarantine struct {
	Shard   interfaces.ShardID
	Reason  string
	Release bool
}

// DropShards forgets shards in one step, aborting the in-flight move of any
// that has one (the abort is in the placement log with Reason). It is all or
// none: when a shard is missing nothing changes, and every operation fails
// (the missing shards with ErrNotFound, the others with ErrConflict). Deleting
// a job uses it, so that a job is never left with some moves aborted and its
// shards not deleted.
type DropShards struct {
	IDs    []interfaces.ShardID
	Reason string
}

// RetireShards is DropShards that also raises the state's epoch floor to the
// largest epoch the dropped shards had: a shard later created under one of
// their IDs starts above it, so a shard ID's epochs only ever grow — across a
// delete and a re-create, on every replica, after any leader change. The top
// tier deletes shards with it (a job's, or an autoscale shrink's): hosts keep
// tombstones of the epochs a shard was revoked at, and a re-created shard must
// not start below them. Below the top tier a shard's wire epoch carries its
// parent's epoch (which grows), so a region drops shards with DropShards and
// keeps its local epochs small. Same payload as DropShards.
type RetireShards struct {
	DropShards
}

// PlanBatch carries out an operator's plan in one entry: it marks the Drain
// children draining (all or none: when one is missing nothing of the batch is
// applied), then applies the moves in order as ApplyPlan does, each atomic on
// its own, with Begin[i] saying whether move i is begun (revoke → ack →
// commit) or committed directly. Ops has one result per drained child, then one
// per move.
type PlanBatch struct {
	Tier  string
	Drain []interfaces.ChildID
	Moves []interfaces.Move
	Begin []bool
}

// PutToken creates an ACL token (coordinator/acl): its ID, policy, the
// SHA-256 of its secret and a description. It fails with ErrConflict when the
// ID or the hash is taken (a token is revoked and created again, never
// changed in place).
type PutToken struct {
	Token acl.Token
}

// DeleteToken revokes the ACL token ID (ErrNotFound when there is none).
type DeleteToken struct {
	ID string
}

// Compile-time checks.
var (
	_ Command = (*PutChild)(nil)
	_ Command = (*RemoveChild)(nil)
	_ Command = (*PutShards)(nil)
	_ Command = (*DeleteShards)(nil)
	_ Command = (*Assign)(nil)
	_ Command = (*Unassign)(nil)
	_ Command = (*Move)(nil)
	_ Command = (*BeginMove)(nil)
	_ Command = (*CompleteMove)(nil)
	_ Command = (*AbortMove)(nil)
	_ Command = (*ApplyPlan)(nil)
	_ Command = (*Quarantine)(nil)
	_ Command = (*DropShards)(nil)
	_ Command = (*PlanBatch)(nil)
	_ Command = (*RetireShards)(nil)
	_ Command = (*PutToken)(nil)
	_ Command = (*DeleteToken)(nil)
)

func (*PutChild) Type() CmdType     { return CmdPutChild }
func (*RemoveChild) Type() CmdType  { return CmdRemoveChild }
func (*PutShards) Type() CmdType    { return CmdPutShards }
func (*DeleteShards) Type() CmdType { return CmdDeleteShards }
func (*Assign) Type() CmdType       { return CmdAssign }
func (*Unassign) Type() CmdType     { return CmdUnassign }
func (*Move) Type() CmdType         { return CmdMove }
func (*BeginMove) Type() CmdType    { return CmdBeginMove }
func (*CompleteMove) Type() CmdType { return CmdCompleteMove }
func (*AbortMove) Type() CmdType    { return CmdAbortMove }
func (*ApplyPlan) Type() CmdType    { return CmdApplyPlan }
func (*Quarantine) Type() CmdType   { return CmdQuarantine }
func (*DropShards) Type() CmdType   { return CmdDropShards }
func (*PlanBatch) Type() CmdType    { return CmdPlanBatch }
func (*RetireShards) Type() CmdType { return CmdRetireShards }
func (*PutToken) Type() CmdType     { return CmdPutToken }
func (*DeleteToken) Type() CmdType  { return CmdDeleteToken }

// Encode validates c and returns its log-entry bytes: the one-byte type, then the
// canonical payload. Invalid commands return an error wrapping ErrInvalid and are
// never encoded, so every committed entry a correct leader writes decodes.
func Encode(c Command) ([]byte, error) {
	if c == nil {
		return nil, fmt.Errorf("command: is required: %w", interfaces.ErrInvalid)
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", c.Type(), err)
	}
	e := &enc{b: make([]byte, 0, 64)}
	e.byte1(byte(c.Type()))
	c.encode(e)
	return e.b, nil
}

// MustEncode is Encode for commands built by code that has already validated them;
// it panics on an invalid command. Tests and benchmarks use it.
func MustEncode(c Command) []byte {
	b, err := Encode(c)
	if err != nil {
		panic(err)
	}
	return b
}

// Decode parses log-entry bytes strictly: unknown types, truncated or trailing
// bytes, non-canonical encodings and values that fail validation are errors
// wrapping ErrInvalid. It never panics.
func Decode(b []byte) (Command, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("command: empty entry: %w", interfaces.ErrInvalid)
	}
	t := CmdType(b[0])
	d := newDec(b, 1)
	var c Command
	switch t {
	case CmdPutChild:
		c = &PutChild{Child: d.child()}
	case CmdRemoveChild:
		c = &RemoveChild{ID: interfaces.ChildID(d.str("child.id", ""))}
	case CmdPutShards:
		n := d.count("shards", "", 40)
		ps := &PutShards{Shards: make([]interfaces.Shard, 0, n)}
		for i := 0; i < n && d.err == nil; i++ {
			d.item = i
			ps.Shards = append(ps.Shards, d.shard())
		}
		c = ps
	case CmdDeleteShards:
		n := d.count("ids", "", 2)
		ds := &DeleteShards{IDs: make([]interfaces.ShardID, 0, n)}
		for i := 0; i < n && d.err == nil; i++ {
			d.item = i
			ds.IDs = append(ds.IDs, interfaces.ShardID(d.str("ids[]", "")))
		}
		c = ds
	case CmdAssign:
		c = &Assign{
			Shard:  interfaces.ShardID(d.str("shard", "")),
			Child:  interfaces.ChildID(d.str("child", "")),
			Reason: d.str("reason", ""),
		}
	case CmdUnassign:
		c = &Unassign{
			Shard:  interfaces.ShardID(d.str("shard", "")),
			Epoch:  interfaces.Epoch(d.uvarint("epoch", "")),
			Reason: d.str("reason", ""),
		}
	case CmdMove:
		c = &Move{Move: d.move()}
	case CmdBeginMove:
		c = &BeginMove{Move: d.move()}
	case CmdCompleteMove:
		c = &CompleteMove{
			Shard: interfaces.ShardID(d.str("shard", "")),
			Epoch: interfaces.Epoch(d.uvarint("epoch", "")),
		}
	case CmdAbortMove:
		c = &AbortMove{
			Shard:  interfaces.ShardID(d.str("shard", "")),
			Epoch:  interfaces.Epoch(d.uvarint("epoch", "")),
			Reason: d.str("reason", ""),
		}
	case CmdApplyPlan:
		ap := &ApplyPlan{Tier: d.str("tier", ""), Begin: d.boolean("begin", "")}
		n := d.count("moves", "", 12)
		ap.Moves = make([]interfaces.Move, 0, n)
		for i := 0; i < n && d.err == nil; i++ {
			d.item = i
			ap.Moves = append(ap.Moves, d.move())
		}
		c = ap
	case CmdQuarantine:
		c = &Quarantine{
			Shard:   interfaces.ShardID(d.str("shard", "")),
			Reason:  d.str("reason", ""),
			Release: d.boolean("release", ""),
		}
	case CmdDropShards:
		c = d.dropShards()
	case CmdRetireShards:
		c = &RetireShards{DropShards: *d.dropShards()}
	case CmdPutToken:
		c = &PutToken{Token: d.token()}
	case CmdDeleteToken:
		c = &DeleteToken{ID: d.str("token.id", "")}
	case CmdPlanBatch:
		pb := &PlanBatch{Tier: d.str("tier", "")}
		n := d.count("drain", "", 2)
		for i := 0; i < n && d.err == nil; i++ {
			d.item = i
			pb.Drain = append(pb.Drain, interfaces.ChildID(d.str("drain[]", "")))
		}
		d.item = -1
		n = d.count("moves", "", 13)
		pb.Moves = make([]interfaces.Move, 0, n)
		pb.Begin = make([]bool, 0, n)
		for i := 0; i < n && d.err == nil; i++ {
			d.item = i
			pb.Begin = append(pb.Begin, d.boolean("begin", ""))
			pb.Moves = append(pb.Moves, d.move())
		}
		c = pb
	default:
		return nil, fmt.Errorf("command: unknown type %d (this binary knows 1..%d; is it older than the leader?): %w",
			uint8(t), uint8(cmdEnd-1), interfaces.ErrInvalid)
	}
	d.item = -1
	d.end()
	if d.err == nil {
		// The decoder checked the structure; validate checks every value and the
		// rules across fields (duplicates, empty batches), exactly as Encode does.
		if err := c.validate(); err != nil {
			d.err = err
		}
	}
	if d.err != nil {
		return nil, fmt.Errorf("%s: %w: %w", t, d.err, interfaces.ErrInvalid)
	}
	return c, nil
}

// validID is interfaces.IsValidID: the rule of interfaces.IDRule without
// building an error.
func validID(s string) bool { return interfaces.IsValidID(s) }

// checkID is interfaces.ValidateID with a fast path for valid IDs.
func checkID(field, id string) error {
	if validID(id) {
		return nil
	}
	return interfaces.ValidateID(field, id)
}

func invalid(field, rule string, args ...any) error {
	return fmt.Errorf("%s: %s: %w", field, fmt.Sprintf(rule, args...), interfaces.ErrInvalid)
}

func checkText(field, s string) error {
	if len(s) > MaxStringLen {
		return invalid(field, "length %d exceeds the limit of %d", len(s), MaxStringLen)
	}
	return nil
}

// validateMove checks one move; i ≥ 0 is its index in a batch. Field names are
// only built when there is an error.
func validateMove(field string, i int, m interfaces.Move) error {
	name := func(sub string) string {
		if i >= 0 {
			return fmt.Sprintf("%s[%d].%s", field, i, sub)
		}
		return field + "." + sub
	}
	if !validID(string(m.Shard)) {
		return interfaces.ValidateID(name("shard"), string(m.Shard))
	}
	if m.From != "" && !validID(string(m.From)) {
		return interfaces.ValidateID(name("from"), string(m.From))
	}
	if !validID(string(m.To)) {
		return interfaces.ValidateID(name("to"), string(m.To))
	}
	if m.From == m.To {
		return invalid(name("to"), "must differ from the source (%q)", m.From)
	}
	if math.IsNaN(m.Delta) || math.IsInf(m.Delta, 0) {
		return invalid(name("delta"), "must be a finite number")
	}
	if len(m.Reason) > MaxStringLen {
		return checkText(name("reason"), m.Reason)
	}
	if len(m.Goal) > MaxStringLen {
		return checkText(name("goal"), m.Goal)
	}
	return nil
}

func checkLabels(field string, m map[string]string) error {
	for k, v := range m {
		if err := checkText(field+" key", k); err != nil {
			return err
		}
		if err := checkText(field+"."+k, v); err != nil {
			return err
		}
	}
	return nil
}

func checkLoadNames(field string, l interfaces.Load) error {
	for k := range l.Extra {
		if err := checkText(field+".extra name", k); err != nil {
			return err
		}
	}
	return nil
}

func (c *PutChild) validate() error {
	if err := interfaces.ValidateChild(c.Child); err != nil {
		return err
	}
	if err := checkText("child.tier", c.Child.Tier); err != nil {
		return err
	}
	if err := checkLoadNames("child.capacity", c.Child.Capacity); err != nil {
		return err
	}
	return checkLabels("child.labels", c.Child.Labels)
}

func (c *PutChild) encode(e *enc) { e.child(&c.Child) }

func (c *PutToken) validate() error { return c.Token.Validate() }
func (c *PutToken) encode(e *enc)   { e.token(&c.Token) }

func (c *DeleteToken) validate() error { return interfaces.ValidateName("token.id", c.ID) }
func (c *DeleteToken) encode(e *enc)   { e.str(c.ID) }

func (c *RemoveChild) validate() error { return checkID("child.id", string(c.ID)) }
func (c *RemoveChild) encode(e *enc)   { e.str(string(c.ID)) }

func (c *PutShards) validate() error {
	if len(c.Shards) == 0 {
		return invalid("shards", "must not be empty")
	}
	if len(c.Shards) > MaxBatch {
		return invalid("shards", "count %d exceeds the limit of %d", len(c.Shards), MaxBatch)
	}
	seen := make(map[interfaces.ShardID]struct{}, len(c.Shards))
	for i := range c.Shards {
		s := &c.Shards[i]
		if err := interfaces.ValidateShard(*s); err != nil {
			return fmt.Errorf("shards[%d]: %w", i, err)
		}
		if _, dup := seen[s.ID]; dup {
			return invalid(fmt.Sprintf("shards[%d].id", i), "shard %q appears twice in one batch", s.ID)
		}
		seen[s.ID] = struct{}{}
		if err := checkLoadNames("shard.load", s.Load); err != nil {
			return err
		}
		if err := checkLabels("shard.constraints.labels", s.Constraints.Labels); err != nil {
			return err
		}
		if err := checkText("shard.constraints.anti_affinity", s.Constraints.AntiAffinity); err != nil {
			return err
		}
		if s.Constraints.MaxPerChild > math.MaxInt32 {
			return invalid("shard.constraints.max_per_child", "must be ≤ %d", math.MaxInt32)
		}
	}
	return nil
}

func (c *PutShards) encode(e *enc) {
	e.uvarint(uint64(len(c.Shards)))
	for i := range c.Shards {
		e.shard(&c.Shards[i])
	}
}

func (c *DeleteShards) validate() error { return validateIDs(c.IDs) }

func (c *DeleteShards) encode(e *enc) {
	e.uvarint(uint64(len(c.IDs)))
	for _, id := range c.IDs {
		e.str(string(id))
	}
}

func (c *Assign) validate() error {
	if err := checkID("shard", string(c.Shard)); err != nil {
		return err
	}
	if err := checkID("child", string(c.Child)); err != nil {
		return err
	}
	return checkText("reason", c.Reason)
}

func (c *Assign) encode(e *enc) {
	e.str(string(c.Shard))
	e.str(string(c.Child))
	e.str(c.Reason)
}

func (c *Unassign) validate() error {
	if err := checkID("shard", string(c.Shard)); err != nil {
		return err
	}
	return checkText("reason", c.Reason)
}

func (c *Unassign) encode(e *enc) {
	e.str(string(c.Shard))
	e.uvarint(uint64(c.Epoch))
	e.str(c.Reason)
}

func validateCAS(field string, m interfaces.Move) error {
	if m.From == "" {
		return invalid(field+".from", "is required (first placements use assign)")
	}
	return validateMove(field, -1, m)
}

func (c *Move) validate() error { return validateCAS("move", c.Move) }
func (c *Move) encode(e *enc)   { e.move(&c.Move) }

func (c *BeginMove) validate() error { return validateCAS("move", c.Move) }
func (c *BeginMove) encode(e *enc)   { e.move(&c.Move) }

func (c *CompleteMove) validate() error { return checkID("shard", string(c.Shard)) }
func (c *CompleteMove) encode(e *enc) {
	e.str(string(c.Shard))
	e.uvarint(uint64(c.Epoch))
}

func (c *AbortMove) validate() error {
	if err := checkID("shard", string(c.Shard)); err != nil {
		return err
	}
	return checkText("reason", c.Reason)
}

func (c *AbortMove) encode(e *enc) {
	e.str(string(c.Shard))
	e.uvarint(uint64(c.Epoch))
	e.str(c.Reason)
}

func (c *ApplyPlan) validate() error {
	if err := checkText("tier", c.Tier); err != nil {
		return err
	}
	if len(c.Moves) == 0 {
		return invalid("moves", "must not be empty")
	}
	if len(c.Moves) > MaxBatch {
		return invalid("moves", "count %d exceeds the limit of %d", len(c.Moves), MaxBatch)
	}
	for i, m := range c.Moves {
		if err := validateMove("moves", i, m); err != nil {
			return err
		}
	}
	return nil
}

func (c *ApplyPlan) encode(e *enc) {
	e.str(c.Tier)
	e.boolean(c.Begin)
	e.uvarint(uint64(len(c.Moves)))
	for i := range c.Moves {
		e.move(&c.Moves[i])
	}
}

func (c *Quarantine) validate() error {
	if err := checkID("shard", string(c.Shard)); err != nil {
		return err
	}
	if !c.Release && c.Reason == "" {
		return invalid("reason", "is required to quarantine a shard")
	}
	return checkText("reason", c.Reason)
}

func (c *Quarantine) encode(e *enc) {
	e.str(string(c.Shard))
	e.str(c.Reason)
	e.boolean(c.Release)
}

// validateIDs checks a batch of shard IDs: not empty, at most MaxBatch, each
// valid, none twice.
func validateIDs(ids []interfaces.ShardID) error {
	if len(ids) == 0 {
		return invalid("ids", "must not be empty")
	}
	if len(ids) > MaxBatch {
		return invalid("ids", "count %d exceeds the limit of %d", len(ids), MaxBatch)
	}
	seen := make(map[interfaces.ShardID]struct{}, len(ids))
	for i, id := range ids {
		if !validID(string(id)) {
			return interfaces.ValidateID(fmt.Sprintf("ids[%d]", i), string(id))
		}
		if _, dup := seen[id]; dup {
			return invalid(fmt.Sprintf("ids[%d]", i), "shard %q appears twice in one batch", id)
		}
		seen[id] = struct{}{}
	}
	return nil
}

// dropShards reads DropShards' payload (also RetireShards').
func (d *dec) dropShards() *DropShards {
	n := d.count("ids", "", 2)
	ds := &DropShards{IDs: make([]interfaces.ShardID, 0, n)}
	for i := 0; i < n && d.err == nil; i++ {
		d.item = i
		ds.IDs = append(ds.IDs, interfaces.ShardID(d.str("ids[]", "")))
	}
	d.item = -1
	ds.Reason = d.str("reason", "")
	return ds
}

func (c *DropShards) validate() error {
	if err := validateIDs(c.IDs); err != nil {
		return err
	}
	return checkText("reason", c.Reason)
}

func (c *DropShards) encode(e *enc) {
	e.uvarint(uint64(len(c.IDs)))
	for _, id := range c.IDs {
		e.str(string(id))
	}
	e.str(c.Reason)
}

func (c *PlanBatch) validate() error {
	if err := checkText("tier", c.Tier); err != nil {
		return err
	}
	if len(c.Drain) == 0 && len(c.Moves) == 0 {
		return invalid("moves", "must not be empty when nothing is drained")
	}
	if len(c.Drain) > MaxBatch {
		return invalid("drain", "count %d exceeds the limit of %d", len(c.Drain), MaxBatch)
	}
	seen := make(map[interfaces.ChildID]struct{}, len(c.Drain))
	for i, id := range c.Drain {
		if !validID(string(id)) {
			return interfaces.ValidateID(fmt.Sprintf("drain[%d]", i), string(id))
		}
		if _, dup := seen[id]; dup {
			return invalid(fmt.Sprintf("drain[%d]", i), "child %q appears twice", id)
		}
		seen[id] = struct{}{}
	}
	if len(c.Moves) > MaxBatch {
		return invalid("moves", "count %d exceeds the limit of %d", len(c.Moves), MaxBatch)
	}
	if len(c.Begin) != len(c.Moves) {
		return invalid("begin", "must have one flag per move (%d flags, %d moves)", len(c.Begin), len(c.Moves))
	}
	for i, m := range c.Moves {
		if err := validateMove("moves", i, m); err != nil {
			return err
		}
		if c.Begin[i] && m.From == "" {
			return invalid(fmt.Sprintf("begin[%d]", i), "a first placement (no from) cannot be begun")
		}
	}
	return nil
}

func (c *PlanBatch) encode(e *enc) {
	e.str(c.Tier)
	e.uvarint(uint64(len(c.Drain)))
	for _, id := range c.Drain {
		e.str(string(id))
	}
	e.uvarint(uint64(len(c.Moves)))
	for i := range c.Moves {
		e.boolean(c.Begin[i])
		e.move(&c.Moves[i])
	}
}
