package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/strata-sched/strata/coordinator/acl"
	"github.com/strata-sched/strata/interfaces"
)

// Limits the decoder enforces so that malformed input can never make it allocate
// without bound.
const (
	// MaxStringLen is the longest string (ID, reason, label) a command may carry;
	// balancer.Verify and the wire conversion refuse a move whose reason or goal
	// is longer, so that such a move is rejected on its own, not with its batch.
	MaxStringLen = interfaces.MaxTextLen
	// MaxBatch is the largest number of items (shards, IDs, moves) in one command.
	MaxBatch = 1 << 20
)

// errShort is returned when the input ends inside a field.
var errShort = errors.New("unexpected end of input")

// enc appends the canonical binary encoding of values to a byte slice. Every value
// has exactly one encoding, so decode → encode reproduces the input byte for byte.
type enc struct{ b []byte }

func (e *enc) byte1(v byte)        { e.b = append(e.b, v) }
func (e *enc) uvarint(v uint64)    { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) varint(v int64)      { e.b = binary.AppendVarint(e.b, v) }
func (e *enc) float(v float64)     { e.b = binary.LittleEndian.AppendUint64(e.b, math.Float64bits(v)) }
func (e *enc) str(s string)        { e.uvarint(uint64(len(s))); e.b = append(e.b, s...) }
func (e *enc) dur(d time.Duration) { e.varint(int64(d)) }

func (e *enc) boolean(v bool) {
	if v {
		e.byte1(1)
	} else {
		e.byte1(0)
	}
}

func (e *enc) load(l interfaces.Load) {
	e.float(l.CPU)
	e.float(l.Mem)
	e.float(l.Net)
	e.float(l.Tasks)
	keys := slices.Sorted(maps.Keys(l.Extra))
	e.uvarint(uint64(len(keys)))
	for _, k := range keys {
		e.str(k)
		e.float(l.Extra[k])
	}
}

func (e *enc) labels(m map[string]string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	e.uvarint(uint64(len(keys)))
	for _, k := range keys {
		e.str(k)
		e.str(m[k])
	}
}

func (e *enc) shard(s *interfaces.Shard) {
	e.str(string(s.ID))
	e.str(s.Job)
	e.load(s.Load)
	e.float(s.InputRate)
	e.varint(s.StateBytes)
	e.dur(s.LatencySLO)
	c := &s.Constraints
	e.str(string(c.Pinned))
	e.uvarint(uint64(len(c.Allowed)))
	for _, id := range c.Allowed {
		e.str(string(id))
	}
	e.labels(c.Labels)
	e.str(c.AntiAffinity)
	e.uvarint(uint64(c.MaxPerChild))
}

func (e *enc) child(c *interfaces.Child) {
	e.str(string(c.ID))
	e.str(c.Tier)
	e.load(c.Capacity)
	e.labels(c.Labels)
	e.byte1(byte(c.State))
}

func (e *enc) move(m *interfaces.Move) {
	e.str(string(m.Shard))
	e.str(string(m.From))
	e.str(string(m.To))
	e.uvarint(uint64(m.Epoch))
	e.str(m.Reason)
	e.str(m.Goal)
	e.float(m.Delta)
}

// dec reads the canonical encoding strictly: truncated input, non-minimal varints,
// over-long strings or counts, unsorted map keys and out-of-range enums are all
// errors. The first error sticks; later reads return zero values.
//
// dec checks structure only; the rules on values (ID syntax, non-negative loads)
// are checked once, by the command's validate method, after decoding. Field names
// are passed as two parts (f, s) and joined only when an error is reported, so the
// hot path does not build strings.
type dec struct {
	b   []byte
	off int
	err error
	// item is the index of the batch item being read, -1 outside batches.
	item int
}

func newDec(b []byte, off int) *dec { return &dec{b: b, off: off, item: -1} }

func (d *dec) fail(format string, args ...any) {
	if d.err == nil {
		where := fmt.Sprintf("offset %d", d.off)
		if d.item >= 0 {
			where = fmt.Sprintf("item %d, offset %d", d.item, d.off)
		}
		d.err = fmt.Errorf("%s: %s", where, fmt.Sprintf(format, args...))
	}
}

func (d *dec) byte1(f, s string) byte {
	if d.err != nil {
		return 0
	}
	if d.off >= len(d.b) {
		d.fail("%s%s: %v", f, s, errShort)
		return 0
	}
	v := d.b[d.off]
	d.off++
	return v
}

func (d *dec) uvarint(f, s string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	switch {
	case n == 0:
		d.fail("%s%s: %v", f, s, errShort)
		return 0
	case n < 0:
		d.fail("%s%s: varint overflows 64 bits", f, s)
		return 0
	case n != uvarintLen(v):
		d.fail("%s%s: non-minimal varint encoding", f, s)
		return 0
	}
	d.off += n
	return v
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

func (d *dec) varint(f, s string) int64 {
	u := d.uvarint(f, s) // zig-zag, so minimality carries over
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x
}

func (d *dec) float(f, s string) float64 {
	if d.err != nil {
		return 0
	}
	if len(d.b)-d.off < 8 {
		d.fail("%s%s: %v", f, s, errShort)
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(d.b[d.off:]))
	d.off += 8
	return v
}

// finite reads a float that must be a finite number.
func (d *dec) finite(f, s string) float64 {
	v := d.float(f, s)
	if d.err == nil && (math.IsNaN(v) || math.IsInf(v, 0)) {
		d.fail("%s%s: must be a finite number", f, s)
	}
	return v
}

// bytes reads a length-prefixed string without copying it.
func (d *dec) bytes(f, s string) []byte {
	if d.err != nil {
		return nil
	}
	v, n := binary.Uvarint(d.b[d.off:])
	switch {
	case n <= 0:
		d.fail("%s%s length: %v", f, s, errShort)
		return nil
	case n != uvarintLen(v):
		d.fail("%s%s length: non-minimal varint encoding", f, s)
		return nil
	case v > MaxStringLen:
		d.fail("%s%s: length %d exceeds the limit of %d", f, s, v, MaxStringLen)
		return nil
	case uint64(len(d.b)-d.off-n) < v:
		d.fail("%s%s: %v", f, s, errShort)
		return nil
	}
	d.off += n
	out := d.b[d.off : d.off+int(v)]
	d.off += int(v)
	return out
}

func (d *dec) str(f, s string) string { return string(d.bytes(f, s)) }

// count reads an item count; each item takes at least minSize bytes, so a count
// larger than the remaining input allows is rejected before anything is allocated.
func (d *dec) count(f, s string, minSize int) int {
	n := d.uvarint(f, s)
	if d.err != nil {
		return 0
	}
	if n > MaxBatch {
		d.fail("%s%s: count %d exceeds the limit of %d", f, s, n, MaxBatch)
		return 0
	}
	if n*uint64(minSize) > uint64(len(d.b)-d.off) {
		d.fail("%s%s: count %d does not fit in the remaining %d bytes", f, s, n, len(d.b)-d.off)
		return 0
	}
	return int(n)
}

func (d *dec) boolean(f, s string) bool {
	switch v := d.byte1(f, s); v {
	case 0:
		return false
	case 1:
		return true
	default:
		d.fail("%s%s: boolean must be 0 or 1, got %d", f, s, v)
		return false
	}
}

func (d *dec) dur(f, s string) time.Duration { return time.Duration(d.varint(f, s)) }

// load reads a load vector: four floats, then the extra dimensions sorted by
// name. Values are checked by the caller (ValidateLoad) or, with finite set, here.
func (d *dec) load(f string, finite bool) interfaces.Load {
	rd := d.float
	if finite {
		rd = d.finite
	}
	l := interfaces.Load{CPU: rd(f, ".cpu"), Mem: rd(f, ".mem"), Net: rd(f, ".net"), Tasks: rd(f, ".tasks")}
	n := d.count(f, ".extra", 9)
	if n > 0 {
		l.Extra = make(map[string]float64, n)
	}
	prev := ""
	for i := 0; i < n && d.err == nil; i++ {
		k := d.str(f, ".extra name")
		v := rd(f, ".extra value")
		if d.err == nil && i > 0 && k <= prev {
			d.fail("%s.extra: names must be strictly increasing (%q after %q)", f, k, prev)
		}
		l.Extra[k] = v
		prev = k
	}
	return l
}

func (d *dec) labels(f string) map[string]string {
	n := d.count(f, "", 2)
	if n == 0 {
		return nil
	}
	m := make(map[string]string, n)
	prev := ""
	for i := 0; i < n && d.err == nil; i++ {
		k := d.str(f, " key")
		v := d.str(f, " value")
		if d.err == nil && i > 0 && k <= prev {
			d.fail("%s: keys must be strictly increasing (%q after %q)", f, k, prev)
		}
		m[k] = v
		prev = k
	}
	return m
}

// constraints reads a shard's constraints; jobs interns nothing here.
func (d *dec) constraints(c *interfaces.ShardConstraints) {
	c.Pinned = interfaces.ChildID(d.str("shard.constraints.pinned", ""))
	if n := d.count("shard.constraints.allowed", "", 1); n > 0 {
		c.Allowed = make([]interfaces.ChildID, n)
		for i := range c.Allowed {
			c.Allowed[i] = interfaces.ChildID(d.str("shard.constraints.allowed", "[]"))
		}
	}
	c.Labels = d.labels("shard.constraints.labels")
	c.AntiAffinity = d.str("shard.constraints.anti_affinity", "")
	mpc := d.uvarint("shard.constraints.max_per_child", "")
	if d.err == nil && mpc > math.MaxInt32 {
		d.fail("shard.constraints.max_per_child: must be ≤ %d", math.MaxInt32)
	}
	c.MaxPerChild = int(mpc)
}

func (d *dec) shard() interfaces.Shard {
	var s interfaces.Shard
	s.ID = interfaces.ShardID(d.str("shard.id", ""))
	s.Job = d.str("shard.job", "")
	s.Load = d.load("shard.load", false)
	s.InputRate = d.float("shard.input_rate", "")
	s.StateBytes = d.varint("shard.state_bytes", "")
	s.LatencySLO = d.dur("shard.latency_slo", "")
	d.constraints(&s.Constraints)
	return s
}

func (d *dec) child() interfaces.Child {
	var c interfaces.Child
	c.ID = interfaces.ChildID(d.str("child.id", ""))
	c.Tier = d.str("child.tier", "")
	c.Capacity = d.load("child.capacity", false)
	c.Labels = d.labels("child.labels")
	c.State = interfaces.ChildState(d.byte1("child.state", ""))
	return c
}

func (d *dec) move() interfaces.Move {
	var m interfaces.Move
	m.Shard = interfaces.ShardID(d.str("move.shard", ""))
	m.From = interfaces.ChildID(d.str("move.from", ""))
	m.To = interfaces.ChildID(d.str("move.to", ""))
	m.Epoch = interfaces.Epoch(d.uvarint("move.epoch", ""))
	m.Reason = d.str("move.reason", "")
	m.Goal = d.str("move.goal", "")
	m.Delta = d.float("move.delta", "")
	return m
}

// end fails unless the whole input has been consumed.
func (d *dec) end() {
	if d.err == nil && d.off != len(d.b) {
		d.fail("%d trailing bytes after the command", len(d.b)-d.off)
	}
}

// token encodes an ACL token: id, policy byte, the 32-byte hash, description.
func (e *enc) token(t *acl.Token) {
	e.str(t.ID)
	e.byte1(byte(t.Policy))
	e.b = append(e.b, t.Hash[:]...)
	e.str(t.Description)
}

func (d *dec) token() acl.Token {
	var t acl.Token
	t.ID = d.str("token.id", "")
	t.Policy = acl.Policy(d.byte1("token.policy", ""))
	if d.err == nil {
		if len(d.b)-d.off < len(t.Hash) {
			d.fail("token.hash: truncated")
		} else {
			copy(t.Hash[:], d.b[d.off:])
			d.off += len(t.Hash)
		}
	}
	t.Description = d.str("token.description", "")
	return t
}
