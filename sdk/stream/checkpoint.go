package stream

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-sched/strata/interfaces"
)

// ErrFenced is returned when a write carries an older epoch than the newest
// the checkpoint store or the sink has accepted for the shard: a newer owner
// exists, and this one must stop.
var ErrFenced = errors.New("fenced: a newer epoch of this shard has written")

// Checkpoint is a shard's operator state and the input offset it covers:
// every record of the partition up to stream sequence Offset is reflected in
// State, none after it.
type Checkpoint struct {
	Epoch  interfaces.Epoch
	Offset uint64
	State  []byte
}

// InlineMax is the largest state kept in the KV entry itself; larger states
// go to the object store and the entry points at them.
const InlineMax = 256 << 10

// Checkpoints keeps the shards' checkpoints of one job in JetStream: a KV
// bucket entry per shard (key: the partition number), written with
// compare-and-set on its revision and refused when the entry's epoch is
// newer than the writer's (the fencing token), and an object store for
// states above InlineMax.
type Checkpoints struct {
	kv  jetstream.KeyValue
	obj jetstream.ObjectStore
}

// OpenCheckpoints creates (or opens) the job's checkpoint bucket and object
// store.
func OpenCheckpoints(ctx context.Context, js jetstream.JetStream, n Names) (*Checkpoints, error) {
	if err := CheckJob("job", n.Job); err != nil {
		return nil, err
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: n.CheckpointBucket(), History: 1, Storage: jetstream.FileStorage})
	if err != nil {
		return nil, fmt.Errorf("checkpoint bucket %s: %w", n.CheckpointBucket(), err)
	}
	obj, err := js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: n.CheckpointBucket(), Storage: jetstream.FileStorage})
	if err != nil {
		return nil, fmt.Errorf("checkpoint object store %s: %w", n.CheckpointBucket(), err)
	}
	return &Checkpoints{kv: kv, obj: obj}, nil
}

// entry layout: epoch (8 bytes), offset (8), kind (1: 0 inline state, 1 the
// name of an object), then the state or the object's name.
func encodeEntry(epoch interfaces.Epoch, offset uint64, object string, state []byte) []byte {
	b := make([]byte, 17, 17+max(len(state), len(object)))
	binary.BigEndian.PutUint64(b, uint64(epoch))
	binary.BigEndian.PutUint64(b[8:], offset)
	if object != "" {
		b[16] = 1
		return append(b, object...)
	}
	return append(b, state...)
}

type entry struct {
	epoch  interfaces.Epoch
	offset uint64
	object string
	state  []byte
}

func decodeEntry(key string, b []byte) (entry, error) {
	if len(b) < 17 || b[16] > 1 {
		return entry{}, fmt.Errorf("checkpoint %s: malformed entry (%d bytes)", key, len(b))
	}
	e := entry{epoch: interfaces.Epoch(binary.BigEndian.Uint64(b)), offset: binary.BigEndian.Uint64(b[8:])}
	if b[16] == 1 {
		e.object = string(b[17:])
	} else {
		e.state = b[17:]
	}
	return e, nil
}

func ckptKey(p int) string { return fmt.Sprintf("p%d", p) }

// objectName names the object of a state too large to keep inline.
func objectName(p int, ck Checkpoint) string {
	return fmt.Sprintf("%s/%d/%d", ckptKey(p), ck.Epoch, ck.Offset)
}

// Load returns partition p's checkpoint; ok is false when it has none.
func (c *Checkpoints) Load(ctx context.Context, p int) (ck Checkpoint, ok bool, err error) {
	ck, rev, err := c.load(ctx, p)
	return ck, rev != 0, err
}

// load returns partition p's checkpoint and its entry's revision (0: none).
// An object the entry names can be replaced (and removed) by its owner's
// next checkpoint between the two reads: then the entry is read again.
func (c *Checkpoints) load(ctx context.Context, p int) (ck Checkpoint, rev uint64, err error) {
	key := ckptKey(p)
	for attempt := 0; ; attempt++ {
		kve, err := c.kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return Checkpoint{}, 0, nil
		}
		if err != nil {
			return Checkpoint{}, 0, fmt.Errorf("checkpoint %s: %w", key, err)
		}
		e, err := decodeEntry(key, kve.Value())
		if err != nil {
			return Checkpoint{}, 0, err
		}
		ck = Checkpoint{Epoch: e.epoch, Offset: e.offset, State: e.state}
		if e.object == "" {
			return ck, kve.Revision(), nil
		}
		if ck.State, err = c.obj.GetBytes(ctx, e.object); err == nil {
			return ck, kve.Revision(), nil
		}
		if attempt == 4 {
			return Checkpoint{}, 0, fmt.Errorf("checkpoint %s: object %s: %w", key, e.object, err)
		}
		if now, gerr := c.kv.Get(ctx, key); gerr == nil && now.Revision() == kve.Revision() {
			return Checkpoint{}, 0, fmt.Errorf("checkpoint %s: object %s: %w", key, e.object, err)
		}
	}
}

// Save writes partition p's checkpoint under ck.Epoch, unless the stored one
// has a newer epoch (ErrFenced). The check and the write are one step: the
// entry is replaced only at the revision that was read.
func (c *Checkpoints) Save(ctx context.Context, p int, ck Checkpoint) error {
	_, err := c.save(ctx, p, ck, 0, "")
	return err
}

// save is Save that first tries the entry at revision rev (its writer's
// last, whose object was prev): one round trip when nobody else wrote. It
// returns the new revision.
func (c *Checkpoints) save(ctx context.Context, p int, ck Checkpoint, rev uint64, prev string) (uint64, error) {
	key := ckptKey(p)
	object := ""
	if len(ck.State) > InlineMax {
		object = objectName(p, ck)
		if _, err := c.obj.PutBytes(ctx, object, ck.State); err != nil {
			return 0, fmt.Errorf("checkpoint %s: put object: %w", key, err)
		}
	}
	val := encodeEntry(ck.Epoch, ck.Offset, object, ck.State)
	if rev != 0 {
		n, err := c.kv.Update(ctx, key, val, rev)
		if err == nil {
			if prev != object {
				c.dropObject(ctx, prev)
			}
			return n, nil
		}
		if !isConflict(err) {
			c.dropObject(ctx, object)
			return 0, fmt.Errorf("checkpoint %s: %w", key, err)
		}
	}
	for {
		kve, err := c.kv.Get(ctx, key)
		var old entry
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			rev, err = c.kv.Create(ctx, key, val)
		case err != nil:
			c.dropObject(ctx, object)
			return 0, fmt.Errorf("checkpoint %s: %w", key, err)
		default:
			if old, err = decodeEntry(key, kve.Value()); err != nil {
				return 0, err
			}
			if old.epoch > ck.Epoch {
				c.dropObject(ctx, object)
				return 0, fmt.Errorf("checkpoint %s@%d: %w (%d)", key, ck.Epoch, ErrFenced, old.epoch)
			}
			rev, err = c.kv.Update(ctx, key, val, kve.Revision())
		}
		if isConflict(err) {
			continue // written meanwhile: read again
		}
		if err != nil {
			c.dropObject(ctx, object)
			return 0, fmt.Errorf("checkpoint %s: %w", key, err)
		}
		if old.object != "" && old.object != object {
			c.dropObject(ctx, old.object)
		}
		return rev, nil
	}
}

// dropObject removes an object no entry points at any more (best effort: a
// leftover only costs space, and the next save of its shard tries again).
func (c *Checkpoints) dropObject(ctx context.Context, name string) {
	if name == "" || !strings.Contains(name, "/") {
		return
	}
	_ = c.obj.Delete(ctx, name)
}
