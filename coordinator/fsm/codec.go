package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

// Limits the decoder enforces so that malformed input can never make it allocate
// without bound.
const (
	// MaxStringLen is the longest string (ID, reason, label) a command may carry.
	MaxStringLen = 4096
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
	keys := sortedKeys(l.Extra)
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

func sortedKeys(m map[string]float64) []string {
	if len(m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
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
type dec struct {
	b   []byte
	off int
	err error
}

func (d *dec) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("offset %d: %s", d.off, fmt.Sprintf(format, args...))
	}
}

func (d *dec) byte1(field string) byte {
	if d.err != nil {
		return 0
	}
	if d.off >= len(d.b) {
		d.fail("%s: %v", field, errShort)
		return 0
	}
	v := d.b[d.off]
	d.off++
	return v
}

func (d *dec) uvarint(field string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n == 0 {
		d.fail("%s: %v", field, errShort)
		return 0
	}
	if n < 0 {
		d.fail("%s: varint overflows 64 bits", field)
		return 0
	}
	if n != uvarintLen(v) {
		d.fail("%s: non-minimal varint encoding", field)
		return 0
	}
	d.off += n
	return v
}

func uvarintLen(v uint64) int {
	var tmp [binary.MaxVarintLen64]byte
	return binary.PutUvarint(tmp[:], v)
}

func (d *dec) varint(field string) int64 {
	u := d.uvarint(field) // zig-zag, so minimality carries over
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x
}

func (d *dec) float(field string) float64 {
	if d.err != nil {
		return 0
	}
	if len(d.b)-d.off < 8 {
		d.fail("%s: %v", field, errShort)
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(d.b[d.off:]))
	d.off += 8
	return v
}

// finite reads a float that must be a finite number.
func (d *dec) finite(field string) float64 {
	v := d.float(field)
	if d.err == nil && (math.IsNaN(v) || math.IsInf(v, 0)) {
		d.fail("%s: must be a finite number", field)
	}
	return v
}

func (d *dec) str(field string) string {
	n := d.uvarint(field + " length")
	if d.err != nil {
		return ""
	}
	if n > MaxStringLen {
		d.fail("%s: length %d exceeds the limit of %d", field, n, MaxStringLen)
		return ""
	}
	if uint64(len(d.b)-d.off) < n {
		d.fail("%s: %v", field, errShort)
		return ""
	}
	s := string(d.b[d.off : d.off+int(n)])
	d.off += int(n)
	return s
}

// count reads an item count; each item takes at least minSize bytes, so a count
// larger than the remaining input allows is rejected before anything is allocated.
func (d *dec) count(field string, minSize int) int {
	n := d.uvarint(field + " count")
	if d.err != nil {
		return 0
	}
	if n > MaxBatch {
		d.fail("%s: count %d exceeds the limit of %d", field, n, MaxBatch)
		return 0
	}
	if n*uint64(minSize) > uint64(len(d.b)-d.off) {
		d.fail("%s: count %d does not fit in the remaining %d bytes", field, n, len(d.b)-d.off)
		return 0
	}
	return int(n)
}

func (d *dec) boolean(field string) bool {
	switch v := d.byte1(field); v {
	case 0:
		return false
	case 1:
		return true
	default:
		d.fail("%s: boolean must be 0 or 1, got %d", field, v)
		return false
	}
}

func (d *dec) dur(field string) time.Duration { return time.Duration(d.varint(field)) }

func (d *dec) load(field string) interfaces.Load {
	l := interfaces.Load{
		CPU:   d.float(field + ".cpu"),
		Mem:   d.float(field + ".mem"),
		Net:   d.float(field + ".net"),
		Tasks: d.float(field + ".tasks"),
	}
	n := d.count(field+".extra", 9)
	if n > 0 {
		l.Extra = make(map[string]float64, n)
	}
	prev := ""
	for i := 0; i < n && d.err == nil; i++ {
		k := d.str(field + ".extra name")
		v := d.float(field + ".extra." + k)
		if d.err == nil && i > 0 && k <= prev {
			d.fail("%s.extra: names must be strictly increasing (%q after %q)", field, k, prev)
		}
		l.Extra[k] = v
		prev = k
	}
	if d.err == nil {
		if err := interfaces.ValidateLoad(field, l); err != nil {
			d.fail("%v", err)
		}
	}
	return l
}

func (d *dec) labels(field string) map[string]string {
	n := d.count(field, 2)
	if n == 0 {
		return nil
	}
	m := make(map[string]string, n)
	prev := ""
	for i := 0; i < n && d.err == nil; i++ {
		k := d.str(field + " key")
		v := d.str(field + "." + k)
		if d.err == nil && i > 0 && k <= prev {
			d.fail("%s: keys must be strictly increasing (%q after %q)", field, k, prev)
		}
		m[k] = v
		prev = k
	}
	return m
}

func (d *dec) id(field string) string {
	s := d.str(field)
	if d.err == nil {
		if err := interfaces.ValidateID(field, s); err != nil {
			d.fail("%v", err)
		}
	}
	return s
}

// optID reads an identifier that may be empty.
func (d *dec) optID(field string) string {
	s := d.str(field)
	if d.err == nil && s != "" {
		if err := interfaces.ValidateID(field, s); err != nil {
			d.fail("%v", err)
		}
	}
	return s
}

func (d *dec) shard() interfaces.Shard {
	var s interfaces.Shard
	s.ID = interfaces.ShardID(d.str("shard.id"))
	s.Job = d.str("shard.job")
	s.Load = d.load("shard.load")
	s.InputRate = d.float("shard.input_rate")
	s.StateBytes = d.varint("shard.state_bytes")
	s.LatencySLO = d.dur("shard.latency_slo")
	c := &s.Constraints
	c.Pinned = interfaces.ChildID(d.str("shard.constraints.pinned"))
	if n := d.count("shard.constraints.allowed", 1); n > 0 {
		c.Allowed = make([]interfaces.ChildID, n)
		for i := range c.Allowed {
			c.Allowed[i] = interfaces.ChildID(d.str("shard.constraints.allowed"))
		}
	}
	c.Labels = d.labels("shard.constraints.labels")
	c.AntiAffinity = d.str("shard.constraints.anti_affinity")
	mpc := d.uvarint("shard.constraints.max_per_child")
	if d.err == nil && mpc > math.MaxInt32 {
		d.fail("shard.constraints.max_per_child: must be ≤ %d", math.MaxInt32)
	}
	c.MaxPerChild = int(mpc)
	if d.err == nil {
		if err := interfaces.ValidateShard(s); err != nil {
			d.fail("%v", err)
		}
	}
	return s
}

func (d *dec) child() interfaces.Child {
	var c interfaces.Child
	c.ID = interfaces.ChildID(d.str("child.id"))
	c.Tier = d.str("child.tier")
	c.Capacity = d.load("child.capacity")
	c.Labels = d.labels("child.labels")
	c.State = interfaces.ChildState(d.byte1("child.state"))
	if d.err == nil {
		if err := interfaces.ValidateChild(c); err != nil {
			d.fail("%v", err)
		}
	}
	return c
}

func (d *dec) move(field string) interfaces.Move {
	var m interfaces.Move
	m.Shard = interfaces.ShardID(d.id(field + ".shard"))
	m.From = interfaces.ChildID(d.optID(field + ".from"))
	m.To = interfaces.ChildID(d.id(field + ".to"))
	m.Epoch = interfaces.Epoch(d.uvarint(field + ".epoch"))
	m.Reason = d.str(field + ".reason")
	m.Goal = d.str(field + ".goal")
	m.Delta = d.finite(field + ".delta")
	if d.err == nil {
		if err := validateMove(field, m); err != nil {
			d.fail("%v", err)
		}
	}
	return m
}

// end fails unless the whole input has been consumed.
func (d *dec) end() {
	if d.err == nil && d.off != len(d.b) {
		d.fail("%d trailing bytes after the command", len(d.b)-d.off)
	}
}
