package fsm

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"slices"
	"strings"

	"github.com/hashicorp/raft"

	"github.com/strata-sched/strata/coordinator/acl"
	"github.com/strata-sched/strata/interfaces"
)

// Snapshot stream format, version 1, 2, 3, 4 or 5 (see doc.go):
//
//	magic "STRATA-FSM" | uvarint version
//	records, each: uvarint length | kind byte | payload
//	  meta (1) · child (2) × children · shard (3) × shards · log entry (4) × entries
//	  · quarantine (6) × quarantined shards (version ≥ 2: shard id, reason)
//	  · token (7) × ACL tokens (version ≥ 5: id, policy, hash, description)
//	end (5): CRC-32C (Castagnoli) of every byte before the end record, 4 bytes LE
//
// Version 3 log entries end with the time the leader appended them (varint Unix
// nanoseconds). A version 4 meta record ends with the epoch floor (uvarint; see
// RetireShards). Version 5 adds token records, sorted by ID. Children and shards are sorted by ID, log entries oldest first,
// so the same state always gives the same bytes. The oldest version that can
// hold the state is written, so older binaries read what they can: version 1
// without quarantined shards, stamped log entries or quarantine and release log
// entries, 2 with quarantined shards or such entries, 3 once a log entry
// carries a time, 4 once the epoch floor is above 0, 5 once there is an ACL
// token.
const (
	snapMagic    = "STRATA-FSM"
	snapVersion  = 1
	snapVersion2 = 2 // adds quarantine records
	snapVersion3 = 3 // adds the append time of log entries
	snapVersion4 = 4 // adds the epoch floor to the meta record
	snapVersion5 = 5 // adds token records

	recToken byte = 7

	recQuarantine byte = 6

	recMeta  byte = 1
	recChild byte = 2
	recShard byte = 3
	recLog   byte = 4
	recEnd   byte = 5

	// maxRecord bounds one record: a shard spec with every string at its limit is
	// far smaller.
	maxRecord = 1 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// snapshot is an immutable view of the state: the shard records are shared with
// the live state (they are never modified in place), the pointer slice, the child
// values and the log entries are copies.
type snapshot struct {
	owner    *FSM
	applied  uint64
	logCap   int
	inflight int
	floor    interfaces.Epoch
	children []childRec
	shards   []*shardRec
	log      []LogEntry
	tokens   []acl.Token
}

var _ raft.FSMSnapshot = (*snapshot)(nil)

// Snapshot captures the state for raft. It copies the slice of shard pointers
// (8 bytes a shard), the children and the plan log; sorting and encoding happen in
// Persist, concurrently with later Applies.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	return f.snapshot(), nil
}

func (f *FSM) snapshot() *snapshot {
	// Reuse the pointer slice of a released snapshot: a fresh 8 MB allocation per
	// million shards can make this goroutine pay for GC marking (assist) while
	// Apply waits for it.
	f.spareMu.Lock()
	buf := f.spare
	f.spare = nil
	f.spareMu.Unlock()

	f.mu.RLock()
	defer f.mu.RUnlock()
	s := f.st
	if cap(buf) < len(s.shards) {
		buf = make([]*shardRec, len(s.shards), len(s.shards)+len(s.shards)/8)
	}
	buf = buf[:len(s.shards)]
	copy(buf, s.shards)
	return &snapshot{
		owner:    f,
		applied:  s.applied,
		logCap:   f.logCap,
		inflight: s.inflight,
		floor:    s.floor,
		children: s.sortedChildren(),
		shards:   buf,
		log:      s.log.entries(),
		tokens:   s.sortedTokens(),
	}
}

// Persist streams the snapshot into sink.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := s.writeTo(sink); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("fsm snapshot: %w", err)
	}
	return sink.Close()
}

// Release drops the snapshot's references and hands its pointer slice back to
// the FSM for the next snapshot.
func (s *snapshot) Release() {
	if s.owner != nil && s.shards != nil {
		clear(s.shards) // do not keep old records alive
		s.owner.spareMu.Lock()
		s.owner.spare = s.shards[:0]
		s.owner.spareMu.Unlock()
	}
	s.shards, s.children, s.log, s.tokens, s.owner = nil, nil, nil, nil, nil
}

// countingWriter feeds the CRC and counts bytes on the way to w.
type countingWriter struct {
	w   io.Writer
	crc hash.Hash32
	n   int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.crc.Write(p[:n])
	c.n += int64(n)
	return n, err
}

func (s *snapshot) writeTo(w io.Writer) (int64, error) {
	slices.SortFunc(s.shards, func(a, b *shardRec) int { return strings.Compare(string(a.id), string(b.id)) })
	cw := &countingWriter{w: w, crc: crc32.New(castagnoli)}
	bw := bufio.NewWriterSize(cw, 1<<16)
	e := &enc{b: make([]byte, 0, 512)}
	var lenBuf [binary.MaxVarintLen64]byte
	put := func() error {
		n := binary.PutUvarint(lenBuf[:], uint64(len(e.b)))
		if _, err := bw.Write(lenBuf[:n]); err != nil {
			return err
		}
		_, err := bw.Write(e.b)
		return err
	}

	if _, err := bw.WriteString(snapMagic); err != nil {
		return cw.n, err
	}
	var quarantined []*shardRec
	for _, r := range s.shards {
		if r.quarantine != "" {
			quarantined = append(quarantined, r)
		}
	}
	version := uint64(snapVersion)
	for i := range s.log {
		if s.log[i].At != 0 {
			version = snapVersion3
			break
		}
		if s.log[i].Change >= ChangeQuarantine {
			version = snapVersion2 // version 1 readers know no such change
		}
	}
	if len(quarantined) > 0 {
		version = max(version, snapVersion2)
	}
	if s.floor > 0 {
		version = snapVersion4
	}
	if len(s.tokens) > 0 {
		version = snapVersion5
	}
	e.uvarint(version)
	if _, err := bw.Write(e.b); err != nil {
		return cw.n, err
	}

	e.b = append(e.b[:0], recMeta)
	e.uvarint(s.applied)
	e.uvarint(uint64(s.logCap))
	e.uvarint(uint64(len(s.children)))
	e.uvarint(uint64(len(s.shards)))
	e.uvarint(uint64(len(s.log)))
	e.uvarint(uint64(s.inflight))
	if version >= snapVersion4 {
		e.uvarint(uint64(s.floor))
	}
	if err := put(); err != nil {
		return cw.n, err
	}
	for i := range s.children {
		c := &s.children[i]
		e.b = append(e.b[:0], recChild)
		e.child(&c.child)
		e.load(c.used)
		e.uvarint(uint64(c.shards))
		if err := put(); err != nil {
			return cw.n, err
		}
	}
	for _, r := range s.shards {
		e.b = append(e.b[:0], recShard)
		e.shardRec(r)
		if err := put(); err != nil {
			return cw.n, err
		}
	}
	for i := range s.log {
		e.b = append(e.b[:0], recLog)
		e.logEntry(&s.log[i], version)
		if err := put(); err != nil {
			return cw.n, err
		}
	}
	for _, r := range quarantined {
		e.b = append(e.b[:0], recQuarantine)
		e.str(string(r.id))
		e.str(r.quarantine)
		if err := put(); err != nil {
			return cw.n, err
		}
	}
	for i := range s.tokens {
		e.b = append(e.b[:0], recToken)
		e.token(&s.tokens[i])
		if err := put(); err != nil {
			return cw.n, err
		}
	}
	if err := bw.Flush(); err != nil {
		return cw.n, err
	}
	sum := cw.crc.Sum32()
	e.b = append(e.b[:0], recEnd)
	e.b = binary.LittleEndian.AppendUint32(e.b, sum)
	if err := put(); err != nil {
		return cw.n, err
	}
	return cw.n, bw.Flush()
}

func (e *enc) shardRec(r *shardRec) {
	spec := r.spec()
	e.shard(&spec)
	e.str(string(r.owner))
	e.uvarint(uint64(r.epoch))
	if r.flight == nil {
		e.byte1(0)
		return
	}
	e.byte1(1)
	e.move(r.flight)
}

func (e *enc) logEntry(l *LogEntry, version uint64) {
	e.uvarint(l.Index)
	e.byte1(byte(l.Change))
	e.str(l.Tier)
	e.str(string(l.Shard))
	e.str(string(l.From))
	e.str(string(l.To))
	e.uvarint(uint64(l.Epoch))
	e.str(l.Reason)
	e.str(l.Goal)
	e.float(l.Delta)
	if version >= snapVersion3 {
		e.varint(l.At)
	}
}

// WriteTo streams the FSM's state in the snapshot format to w. The bytes are the
// same for the same state on every replica.
func (f *FSM) WriteTo(w io.Writer) (int64, error) {
	s := f.snapshot()
	defer s.Release()
	return s.writeTo(w)
}

// Hash returns the SHA-256 of the snapshot encoding: two replicas hold the same
// state exactly when their hashes are equal. It costs a full snapshot encoding.
func (f *FSM) Hash() [sha256.Size]byte {
	h := sha256.New()
	if _, err := f.WriteTo(h); err != nil {
		// Writing to a hash never fails.
		panic(fmt.Sprintf("fsm: hashing state: %v", err))
	}
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// crcReader reads from a bufio.Reader and feeds the CRC.
type crcReader struct {
	r   *bufio.Reader
	crc hash.Hash32
	one [1]byte
}

func (c *crcReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.one[0] = b
		c.crc.Write(c.one[:])
	}
	return b, err
}

func (c *crcReader) readFull(p []byte) error {
	_, err := io.ReadFull(c.r, p)
	if err == nil {
		c.crc.Write(p)
	}
	return err
}

// ErrRestoreEmptied wraps the error of a failed restore with Options.LeanRestore:
// the old state is gone and the FSM is empty, so it no longer matches the index
// raft believes applied. A replica must not go on applying entries or serving
// reads from it (raftnode stops the process; on restart raft restores from the
// replica's own snapshots and log).
var ErrRestoreEmptied = errors.New("the FSM is now empty")

// Restore replaces the state with the snapshot read from rc. The new state is
// built aside and swapped in at the end, so readers see either the old or the new
// state, never a half-restored one; a corrupt snapshot leaves the old state.
//
// With Options.LeanRestore the old state is dropped first and readers wait for
// the whole restore; a failed restore then leaves the FSM empty.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	if f.lean {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.st = newState(f.logCap, 0) // the old state becomes garbage now
		st, logCap, err := readSnapshot(rc)
		if err != nil {
			return fmt.Errorf("fsm restore (lean: %w): %w", ErrRestoreEmptied, err)
		}
		f.st, f.logCap = st, logCap
		return nil
	}
	st, logCap, err := readSnapshot(rc)
	if err != nil {
		return fmt.Errorf("fsm restore: %w", err)
	}
	f.mu.Lock()
	f.st = st
	f.logCap = logCap
	f.mu.Unlock()
	return nil
}

func readSnapshot(r io.Reader) (*state, int, error) {
	cr := &crcReader{r: bufio.NewReaderSize(r, 1<<16), crc: crc32.New(castagnoli)}
	magic := make([]byte, len(snapMagic))
	if err := cr.readFull(magic); err != nil || string(magic) != snapMagic {
		return nil, 0, fmt.Errorf("not a Strata FSM snapshot (bad magic): %w", interfaces.ErrInvalid)
	}
	v, err := binary.ReadUvarint(cr)
	if err != nil {
		return nil, 0, fmt.Errorf("version: %w", err)
	}
	if v < snapVersion || v > snapVersion5 {
		return nil, 0, fmt.Errorf("snapshot version %d is not supported (this binary reads %d to %d): %w", v, snapVersion, snapVersion5, interfaces.ErrInvalid)
	}

	buf := make([]byte, 0, 512)
	var seq int
	rd := newDec(nil, 0) // reused for every record
	next := func() (*dec, byte, error) {
		n, err := binary.ReadUvarint(cr)
		if err != nil {
			return nil, 0, fmt.Errorf("record %d length: %w", seq, noEOF(err))
		}
		if n == 0 || n > maxRecord {
			return nil, 0, fmt.Errorf("record %d: length %d out of range: %w", seq, n, interfaces.ErrInvalid)
		}
		if cap(buf) < int(n) {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if err := cr.readFull(buf); err != nil {
			return nil, 0, fmt.Errorf("record %d: %w", seq, noEOF(err))
		}
		seq++
		*rd = dec{b: buf, off: 1, item: -1}
		return rd, buf[0], nil
	}
	fail := func(d *dec, what string) error {
		return fmt.Errorf("record %d (%s): %w: %w", seq-1, what, d.err, interfaces.ErrInvalid)
	}

	d, kind, err := next()
	if err != nil {
		return nil, 0, err
	}
	if kind != recMeta {
		return nil, 0, fmt.Errorf("first record is kind %d, want meta: %w", kind, interfaces.ErrInvalid)
	}
	applied := d.uvarint("applied", "")
	logCap := d.uvarint("log_cap", "")
	nChildren := d.uvarint("children", "")
	nShards := d.uvarint("shards", "")
	nLog := d.uvarint("log", "")
	nFlight := d.uvarint("inflight", "")
	var floor uint64
	if v >= snapVersion4 {
		floor = d.uvarint("floor", "")
	}
	d.end()
	if d.err == nil && (logCap > 1<<30 || nShards > 1<<31-1 || nLog > logCap) {
		d.fail("counts out of range")
	}
	if d.err != nil {
		return nil, 0, fail(d, "meta")
	}
	hint := int(nShards)
	if hint > 1<<22 {
		hint = 1 << 22 // grow past this only as records really arrive
	}
	st := newState(int(logCap), hint)
	st.applied = applied
	st.floor = interfaces.Epoch(floor)
	jobs := map[string]string{} // interned job names

	var prevChild interfaces.ChildID
	for i := uint64(0); i < nChildren; i++ {
		d, kind, err := next()
		if err != nil {
			return nil, 0, err
		}
		if kind != recChild {
			return nil, 0, fmt.Errorf("record %d is kind %d, want child: %w", seq-1, kind, interfaces.ErrInvalid)
		}
		c := &childRec{child: d.child(), used: d.load("child.used", true), shards: int(d.uvarint("child.shards", ""))}
		d.end()
		if d.err == nil {
			if err := interfaces.ValidateChild(c.child); err != nil {
				d.fail("%v", err)
			}
		}
		if d.err == nil && i > 0 && c.child.ID <= prevChild {
			d.fail("children not sorted: %q after %q", c.child.ID, prevChild)
		}
		if d.err != nil {
			return nil, 0, fail(d, "child")
		}
		prevChild = c.child.ID
		st.children[c.child.ID] = c
	}

	counts := make(map[interfaces.ChildID]int, len(st.children))
	var prevShard interfaces.ShardID
	for i := uint64(0); i < nShards; i++ {
		d, kind, err := next()
		if err != nil {
			return nil, 0, err
		}
		if kind != recShard {
			return nil, 0, fmt.Errorf("record %d is kind %d, want shard: %w", seq-1, kind, interfaces.ErrInvalid)
		}
		r := d.snapShard(st.children, jobs)
		d.end()
		if d.err == nil && i > 0 && r.id <= prevShard {
			d.fail("shards not sorted: %q after %q", r.id, prevShard)
		}
		if d.err != nil {
			return nil, 0, fail(d, "shard")
		}
		prevShard = r.id
		st.index[r.id] = int32(len(st.shards))
		st.shards = append(st.shards, r)
		if r.flight != nil {
			st.inflight++
			st.children[r.owner].outgoing++
		}
		if eff := r.effective(); eff != "" {
			counts[eff]++
		}
	}
	if uint64(st.inflight) != nFlight {
		return nil, 0, fmt.Errorf("meta says %d moves in flight, shards hold %d: %w", nFlight, st.inflight, interfaces.ErrInvalid)
	}
	for _, id := range sortedChildIDs(st.children) {
		if c := st.children[id]; c.shards != counts[id] {
			return nil, 0, fmt.Errorf("child %q: snapshot says %d shards, shard records hold %d: %w", id, c.shards, counts[id], interfaces.ErrInvalid)
		}
	}

	for i := uint64(0); i < nLog; i++ {
		d, kind, err := next()
		if err != nil {
			return nil, 0, err
		}
		if kind != recLog {
			return nil, 0, fmt.Errorf("record %d is kind %d, want log entry: %w", seq-1, kind, interfaces.ErrInvalid)
		}
		e := d.logEntry(v)
		d.end()
		if d.err != nil {
			return nil, 0, fail(d, "log entry")
		}
		st.log.add(e)
	}

	want := cr.crc.Sum32()
	d, kind, err = next()
	if err != nil {
		return nil, 0, err
	}
	var prevQ interfaces.ShardID
	for nq := 0; kind == recQuarantine && v >= snapVersion2; nq++ {
		id := interfaces.ShardID(d.str("quarantine.shard", ""))
		reason := d.str("quarantine.reason", "")
		d.end()
		r := st.shard(id)
		switch {
		case d.err != nil:
		case r == nil:
			d.fail("quarantine: shard %q is not in the snapshot", id)
		case reason == "":
			d.fail("quarantine.reason: is required")
		case nq > 0 && id <= prevQ:
			d.fail("quarantine records not sorted: %q after %q", id, prevQ)
		case r.owner != "" || r.flight != nil:
			d.fail("quarantine: shard %q is placed", id)
		}
		if d.err != nil {
			return nil, 0, fail(d, "quarantine")
		}
		prevQ = id
		q := *r
		q.quarantine = reason
		st.put(&q)
		want = cr.crc.Sum32()
		if d, kind, err = next(); err != nil {
			return nil, 0, err
		}
	}
	var prevT string
	for nt := 0; kind == recToken && v >= snapVersion5; nt++ {
		t := d.token()
		d.end()
		switch {
		case d.err != nil:
		case t.Validate() != nil:
			d.fail("%v", t.Validate())
		case nt > 0 && t.ID <= prevT:
			d.fail("token records not sorted: %q after %q", t.ID, prevT)
		}
		if d.err == nil {
			if err := st.putToken(t); err != nil {
				d.fail("%v", err)
			}
		}
		if d.err != nil {
			return nil, 0, fail(d, "token")
		}
		prevT = t.ID
		want = cr.crc.Sum32()
		if d, kind, err = next(); err != nil {
			return nil, 0, err
		}
	}
	if kind != recEnd || len(d.b) != 5 {
		return nil, 0, fmt.Errorf("record %d: want the end record: %w", seq-1, interfaces.ErrInvalid)
	}
	if got := binary.LittleEndian.Uint32(d.b[1:]); got != want {
		return nil, 0, fmt.Errorf("checksum mismatch: stored %08x, computed %08x: %w", got, want, interfaces.ErrInvalid)
	}
	if _, err := cr.r.ReadByte(); err != io.EOF {
		return nil, 0, fmt.Errorf("data after the end record: %w", interfaces.ErrInvalid)
	}
	return st, int(logCap), nil
}

func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

func sortedChildIDs(m map[interfaces.ChildID]*childRec) []interfaces.ChildID {
	ids := make([]interfaces.ChildID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// snapShard reads a shard record. It checks structure and references (owner and
// move target must be known children) but not the ID syntax rules: the snapshot's
// checksum covers the bytes, and every spec was validated when its command was
// decoded. This keeps restoring a million shards well under a second of decoding.
func (d *dec) snapShard(children map[interfaces.ChildID]*childRec, jobs map[string]string) *shardRec {
	r := &shardRec{}
	r.id = interfaces.ShardID(d.str("shard.id", ""))
	job := d.bytes("shard.job", "")
	if j, ok := jobs[string(job)]; ok { // no allocation for the lookup
		r.job = j
	} else if d.err == nil {
		r.job = string(job)
		jobs[r.job] = r.job
	}
	r.load = d.load("shard.load", true)
	r.inputRate = d.finite("shard.input_rate", "")
	r.stateBytes = d.varint("shard.state_bytes", "")
	r.slo = d.dur("shard.latency_slo", "")
	// Most shards have no constraints: five zero bytes (empty pinned, allowed,
	// labels, anti-affinity, max-per-child).
	if d.err == nil && len(d.b)-d.off >= 5 && d.b[d.off]|d.b[d.off+1]|d.b[d.off+2]|d.b[d.off+3]|d.b[d.off+4] == 0 {
		d.off += 5
	} else {
		var c interfaces.ShardConstraints
		d.constraints(&c)
		if !zeroConstraints(&c) {
			r.cons = new(interfaces.ShardConstraints)
			*r.cons = c
		}
	}
	if owner := d.bytes("shard.owner", ""); len(owner) > 0 {
		// Share the child's ID string instead of allocating one per shard.
		if c := children[interfaces.ChildID(owner)]; c != nil {
			r.owner = c.child.ID
		} else {
			r.owner = interfaces.ChildID(owner)
		}
	}
	r.epoch = interfaces.Epoch(d.uvarint("shard.epoch", ""))
	if d.boolean("shard.in_flight", "") {
		m := d.move()
		if d.err == nil {
			if err := validateMove("shard.in_flight", -1, m); err != nil {
				d.fail("%v", err)
			}
		}
		r.flight = &m
	}
	if d.err != nil {
		return r
	}
	if r.id == "" {
		d.fail("shard.id: is required")
	}
	if !nonNegative(r.load) {
		d.fail("shard %q: %v", r.id, interfaces.ValidateLoad("shard.load", r.load))
	}
	if r.owner != "" && children[r.owner] == nil {
		d.fail("shard %q: owner %q is not a known child", r.id, r.owner)
	}
	if r.flight != nil {
		switch {
		case r.flight.Shard != r.id:
			d.fail("shard %q: in-flight move names shard %q", r.id, r.flight.Shard)
		case r.owner == "" || r.flight.From != r.owner:
			d.fail("shard %q: in-flight move from %q but owner is %q", r.id, r.flight.From, r.owner)
		case children[r.flight.To] == nil:
			d.fail("shard %q: in-flight move target %q is not a known child", r.id, r.flight.To)
		}
	}
	return r
}

func (d *dec) logEntry(version uint64) LogEntry {
	var l LogEntry
	l.Index = d.uvarint("log.index", "")
	l.Change = Change(d.byte1("log.change", ""))
	if d.err == nil && (l.Change == 0 || l.Change >= changeEnd) {
		d.fail("log.change: unknown change %d", l.Change)
	}
	l.Tier = d.str("log.tier", "")
	l.Shard = interfaces.ShardID(d.str("log.shard", ""))
	l.From = interfaces.ChildID(d.str("log.from", ""))
	l.To = interfaces.ChildID(d.str("log.to", ""))
	l.Epoch = interfaces.Epoch(d.uvarint("log.epoch", ""))
	l.Reason = d.str("log.reason", "")
	l.Goal = d.str("log.goal", "")
	l.Delta = d.finite("log.delta", "")
	if version >= snapVersion3 {
		l.At = d.varint("log.at", "")
	}
	return l
}

// nonNegative is the fast path of interfaces.ValidateLoad for a load whose values
// are known to be finite: every value ≥ 0 and extra names neither empty nor
// built-in.
func nonNegative(l interfaces.Load) bool {
	if l.CPU < 0 || l.Mem < 0 || l.Net < 0 || l.Tasks < 0 {
		return false
	}
	for k, v := range l.Extra {
		switch k {
		case "", interfaces.CPU, interfaces.Mem, interfaces.Net, interfaces.Tasks:
			return false
		}
		if v < 0 {
			return false
		}
	}
	return true
}
