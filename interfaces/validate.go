package interfaces

import (
	"fmt"
	"math"
	"regexp"
	"slices"
)

// FieldError is a validation failure: it names the field and the rule broken. It
// wraps ErrInvalid, so errors.Is(err, ErrInvalid) holds.
type FieldError struct {
	Field string // dotted path, e.g. "shard.load.cpu"
	Rule  string // e.g. "must be ≥ 0"
	Value string // the offending value, printed; may be empty
}

func (e *FieldError) Error() string {
	if e.Value != "" {
		return fmt.Sprintf("%s: %s (got %s)", e.Field, e.Rule, e.Value)
	}
	return fmt.Sprintf("%s: %s", e.Field, e.Rule)
}

func (e *FieldError) Unwrap() error { return ErrInvalid }

func fieldErr(field, rule string, value any) *FieldError {
	v := ""
	if value != nil {
		v = fmt.Sprintf("%v", value)
	}
	return &FieldError{Field: field, Rule: rule, Value: v}
}

// idPattern is the rule every identifier follows: it travels in URLs, file names,
// metrics labels and environment variables (a worker sees its shard's ID as
// STRATA_SHARD_ID). Every "/"-separated segment starts with a letter or digit,
// so no ID has an empty, "." or ".." segment, a leading or trailing "/" or a
// hidden (".x") segment: an ID joined to a path stays below it. The length
// (1-253 bytes) is checked apart. validID checks it without the regexp engine
// (views of a million shards validate a million IDs); a test keeps the two
// equal.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]*(/[A-Za-z0-9][A-Za-z0-9._:-]*)*$`)

// idByte classifies the bytes of an ID: 1 may start it or a segment, 2 may only
// follow, 3 is the segment separator "/".
var idByte = func() (t [256]uint8) {
	for b := 0; b < 256; b++ {
		switch {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
			t[b] = 1
		case b == '.' || b == '_' || b == ':' || b == '-':
			t[b] = 2
		case b == '/':
			t[b] = 3
		}
	}
	return t
}()

// validID reports whether id is 1-253 bytes long and matches idPattern.
func validID(id string) bool {
	if len(id) == 0 || len(id) > 253 || idByte[id[0]] != 1 {
		return false
	}
	for i := 1; i < len(id); i++ {
		switch idByte[id[i]] {
		case 0:
			return false
		case 3:
			// A segment follows and starts with a letter or digit.
			if i+1 == len(id) || idByte[id[i+1]] != 1 {
				return false
			}
		}
	}
	return true
}

// IsValidID reports whether ValidateID accepts id, without building an error
// (the FSM's decoder checks every ID of every entry with it).
func IsValidID(id string) bool { return validID(id) }

// slashes counts the "/" in id.
func slashes(id string) int {
	n := 0
	for i := 0; i < len(id); i++ {
		if id[i] == '/' {
			n++
		}
	}
	return n
}

// MaxTextLen is the longest free text — a move's Reason or Goal, a label — a
// tier accepts: the longest string a tier's Raft command may carry
// (coordinator/fsm.MaxStringLen is this value). A move with a longer Reason or
// Goal is refused when it is converted from the wire and when it is verified.
const MaxTextLen = 4096

// IDRule is the rule ValidateID enforces, for messages and docs.
const IDRule = "must be 1-253 characters of letters, digits and . _ : / -, each /-separated segment starting with a letter or digit (no empty, . or .. segments)"

// NameRule is the rule of job and child IDs on top of IDRule: "/" separates a
// shard's job from its index, so a job or a child names no path.
const NameRule = "must not contain /: it separates a shard's job from its index"

// ShardIDRule is the rule of shard IDs on top of IDRule.
const ShardIDRule = "must contain at most one /, the separator of the job and the index (<job>/<index>)"

// ValidateID checks an identifier (shard, child, job, tier, instance).
func ValidateID(field, id string) error {
	if id == "" {
		return fieldErr(field, "is required", nil)
	}
	if !validID(id) {
		return fieldErr(field, IDRule, fmt.Sprintf("%q", id))
	}
	return nil
}

// ValidateName checks a job or child ID: ValidateID, and no "/" (NameRule).
func ValidateName(field, id string) error {
	if err := ValidateID(field, id); err != nil {
		return err
	}
	if slashes(id) > 0 {
		return fieldErr(field, NameRule, fmt.Sprintf("%q", id))
	}
	return nil
}

// ValidateShardID checks a shard ID: ValidateID, and at most one "/"
// (ShardIDRule).
func ValidateShardID(field, id string) error {
	if err := ValidateID(field, id); err != nil {
		return err
	}
	if slashes(id) > 1 {
		return fieldErr(field, ShardIDRule, fmt.Sprintf("%q", id))
	}
	return nil
}

func checkNumber(field string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fieldErr(field, "must be a finite number", v)
	}
	if v < 0 {
		return fieldErr(field, "must be ≥ 0", v)
	}
	if v > MaxQuantity {
		return fieldErr(field, "must be at most 1e24", v)
	}
	return nil
}

// inRange reports whether checkNumber accepts v (NaN compares false).
func inRange(v float64) bool { return v >= 0 && v <= MaxQuantity }

// MaxQuantity bounds every load, capacity and rate: far above any real machine
// or fleet (1e24 bytes is a million exabytes), and low enough that sums over
// any number of shards a tier can hold (2³¹) — a child's used load, a region's
// capacity — and their squares stay finite. Without it two finite loads could
// add up to +Inf, which a snapshot cannot hold and a controller reads as NaN.
const MaxQuantity = 1e24

// ValidateLoad checks a load vector: every dimension finite and non-negative, extra
// dimension names non-empty and not shadowing a built-in one.
func ValidateLoad(field string, l Load) error {
	// The common case — built-in dimensions only, all in range — is decided
	// without the per-dimension loop (views validate millions of loads); any
	// other load takes the checks below, which name the field at fault.
	if len(l.Extra) == 0 && inRange(l.CPU) && inRange(l.Mem) && inRange(l.Net) && inRange(l.Tasks) {
		return nil
	}
	for _, r := range BuiltinResources {
		// The field name is built only for an error: views validate millions of loads.
		if v := l.Get(r); checkNumber("", v) != nil {
			return checkNumber(field+"."+r, v)
		}
	}
	for _, k := range l.extraNames() {
		switch k {
		case "":
			return fieldErr(field, "extra dimension names must not be empty", nil)
		case CPU, Mem, Net, Tasks:
			return fieldErr(field+"."+k, "is a built-in dimension and must not be set as extra", nil)
		}
		if err := checkNumber(field+"."+k, l.Extra[k]); err != nil {
			return err
		}
	}
	return nil
}

// ValidateCapacity checks a capacity vector: a valid load with at least one
// dimension above zero.
func ValidateCapacity(field string, c Load) error {
	if err := ValidateLoad(field, c); err != nil {
		return err
	}
	if c.IsZero() {
		return fieldErr(field, "must be > 0 in at least one dimension", nil)
	}
	return nil
}

// ValidateShard checks a shard spec.
func ValidateShard(s Shard) error {
	if err := ValidateShardID("shard.id", string(s.ID)); err != nil {
		return err
	}
	if err := ValidateName("shard.job", s.Job); err != nil {
		return err
	}
	return validateShardRest(&s)
}

// ValidateShards checks shards in order as ValidateShard does and returns the
// index of the first invalid one with its error, or -1 and nil. It is
// ValidateShard for views of a million shards: it reads every shard in place,
// checks the IDs in a pass of their own (a region's shards share their ID
// strings with the whole tier's, far apart in memory, and a tight pass lets
// the cache misses overlap), and checks a job only when it differs from the
// previous shard's (shards come in runs of one job).
func ValidateShards(shards []Shard) (int, error) {
	badID := len(shards)
	for i := range shards {
		if id := string(shards[i].ID); !validID(id) || slashes(id) > 1 {
			badID = i
			break
		}
	}
	lastJob := "" // the previous shard's job, once checked (never "" then)
	for i := range shards {
		s := &shards[i]
		if i == badID {
			return i, ValidateShard(*s)
		}
		if lastJob == "" || s.Job != lastJob {
			if err := ValidateName("shard.job", s.Job); err != nil {
				return i, err
			}
			lastJob = s.Job
		}
		if err := validateShardRest(s); err != nil {
			return i, err
		}
	}
	return -1, nil
}

// validateShardRest is ValidateShard after the ID and the job.
func validateShardRest(s *Shard) error {
	if err := ValidateLoad("shard.load", s.Load); err != nil {
		return err
	}
	if err := checkNumber("shard.input_rate", s.InputRate); err != nil {
		return err
	}
	if s.StateBytes < 0 {
		return fieldErr("shard.state_bytes", "must be ≥ 0", s.StateBytes)
	}
	if s.LatencySLO < 0 {
		return fieldErr("shard.latency_slo", "must be ≥ 0", s.LatencySLO)
	}
	c := &s.Constraints
	if c.Pinned != "" {
		if err := ValidateID("shard.constraints.pinned", string(c.Pinned)); err != nil {
			return err
		}
		if len(c.Allowed) > 0 && !slices.Contains(c.Allowed, c.Pinned) {
			return fieldErr("shard.constraints.pinned", "must be one of shard.constraints.allowed", c.Pinned)
		}
	}
	for i, id := range c.Allowed {
		// The field name is built only for an error.
		if !validID(string(id)) {
			return ValidateID(fmt.Sprintf("shard.constraints.allowed[%d]", i), string(id))
		}
	}
	for k := range c.Labels {
		if k == "" {
			return fieldErr("shard.constraints.labels", "label keys must not be empty", nil)
		}
	}
	if c.MaxPerChild < 0 {
		return fieldErr("shard.constraints.max_per_child", "must be ≥ 0", c.MaxPerChild)
	}
	if c.MaxPerChild > 0 && c.AntiAffinity == "" {
		return fieldErr("shard.constraints.max_per_child", "needs shard.constraints.anti_affinity to name a group", c.MaxPerChild)
	}
	return nil
}

// ValidateChild checks a child spec.
func ValidateChild(c Child) error {
	if err := ValidateName("child.id", string(c.ID)); err != nil {
		return err
	}
	if c.Tier == "" {
		return fieldErr("child.tier", "is required", nil)
	}
	if err := ValidateCapacity("child.capacity", c.Capacity); err != nil {
		return err
	}
	if int(c.State) >= len(childStateNames) {
		return fieldErr("child.state", "must be active, draining or failed", int(c.State))
	}
	for k := range c.Labels {
		if k == "" {
			return fieldErr("child.labels", "label keys must not be empty", nil)
		}
	}
	return nil
}

// ValidateMoveFields checks what committing a move needs besides its IDs: a
// finite Delta, and a Reason and a Goal of at most MaxTextLen bytes (field
// prefixes the names: "move" gives "move.delta"). The wire conversion refuses
// such a move, and balancer.Verify rejects it on its own, so that one move a
// tier's state machine would refuse never sinks the rest of its plan.
func ValidateMoveFields(field string, m Move) error {
	if math.IsNaN(m.Delta) || math.IsInf(m.Delta, 0) {
		return fieldErr(field+".delta", "must be a finite number", m.Delta)
	}
	for _, t := range [...]struct{ name, s string }{{"reason", m.Reason}, {"goal", m.Goal}} {
		if len(t.s) > MaxTextLen {
			return fieldErr(field+"."+t.name, fmt.Sprintf("must be at most %d bytes", MaxTextLen), fmt.Sprintf("%d bytes", len(t.s)))
		}
	}
	return nil
}
