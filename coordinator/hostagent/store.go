package hostagent

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/strata-sched/strata/interfaces"
)

// Store layout (bbolt). Buckets:
//
//	meta       "schema" → "1"; "host" → host id; "lease" → 8-byte big-endian
//	           unix-nano lease deadline (absent before the first grant)
//	shards     shard id → JSON record {"v":1,"epoch":N,"fenced":bool,"spec":{...}}
//	tombstones shard id → 8-byte big-endian epoch of the last revoke
//
// Any other bucket, an unknown record version, an unknown JSON field, a record
// whose key differs from its spec id, or a value of the wrong length is reported
// as corruption naming the bucket and key.
var (
	bucketMeta   = []byte("meta")
	bucketShards = []byte("shards")
	bucketTombs  = []byte("tombstones")
	keySchema    = []byte("schema")
	keyHost      = []byte("host")
	keyLease     = []byte("lease")
)

const (
	schemaVersion = "1"
	recordVersion = 1
)

// ErrCorrupt is wrapped by every error about a store whose contents cannot be
// trusted. It wraps interfaces.ErrInvalid. OpenStore and Load end such an error
// with corruptAdvice.
var ErrCorrupt = fmt.Errorf("%w: corrupt host-agent store", interfaces.ErrInvalid)

// corruptAdvice says what an operator does with a store that cannot be read
// (docs/operations.md, "A damaged host.db").
const corruptAdvice = "move the file aside and start the host again: it comes back empty and its region re-places its shards (docs/operations.md, \"A damaged host.db\")"

// Store keeps the agent's owned shards, epochs, specs, fenced flags, tombstones
// and lease deadline in a bbolt file. Every write is a committed (fsynced) bbolt
// transaction.
type Store struct {
	db   *bolt.DB
	path string
}

// State is everything a Store holds.
type State struct {
	Records    []Record
	Tombstones map[interfaces.ShardID]interfaces.Epoch
	// LeaseDeadline is the last persisted lease deadline (zero if none).
	LeaseDeadline time.Time
}

type storedRecord struct {
	V      int              `json:"v"`
	Epoch  interfaces.Epoch `json:"epoch"`
	Fenced bool             `json:"fenced"`
	Spec   interfaces.Shard `json:"spec"`
}

// OpenStore opens or creates the store at path for host. A store created for
// another host is refused. Opening a file another process holds fails after one
// second instead of waiting.
//
// A damaged file is an error wrapping ErrCorrupt that names it: one bbolt
// cannot open (bad meta pages; bbolt panics on some damage, e.g. an invalid
// freelist page, and the panic is returned as the error), one whose pages
// fail bbolt's consistency check (tx.Check, run at every open: with it the
// open takes about 5ms for an 8MB store of 20,000 shards and tombstones), and an existing file of 0 bytes (bbolt would open it
// as a new, empty store, and every record and tombstone would be lost without
// a word). After such a panic the file stays locked by this process until it
// exits.
func OpenStore(path, host string) (*Store, error) {
	if err := interfaces.ValidateID("host", host); err != nil {
		return nil, err
	}
	s, err := openStore(path, host)
	if errors.Is(err, ErrCorrupt) {
		err = fmt.Errorf("%w; %s", err, corruptAdvice)
	}
	return s, err
}

func openStore(path, host string) (s *Store, err error) {
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Size() == 0 {
		return nil, fmt.Errorf("%w %s: the file is empty (0 bytes): it is not a bbolt store, and opening it would start a new one that has lost every record and tombstone", ErrCorrupt, path)
	}
	var db *bolt.DB
	defer func() {
		if r := recover(); r != nil {
			if db != nil {
				db.Close()
			}
			s, err = nil, fmt.Errorf("%w %s: bbolt panicked reading it: %v", ErrCorrupt, path, r)
		}
	}()
	db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		if errors.Is(err, berrors.ErrInvalid) || errors.Is(err, berrors.ErrChecksum) || errors.Is(err, berrors.ErrVersionMismatch) {
			return nil, fmt.Errorf("%w %s: %v", ErrCorrupt, path, err)
		}
		return nil, fmt.Errorf("host-agent store %s: %w", path, err)
	}
	s = &Store{db: db, path: path}
	err = db.View(func(tx *bolt.Tx) error {
		var errs []error
		for e := range tx.Check() {
			if len(errs) < 3 {
				errs = append(errs, e)
			}
		}
		if len(errs) > 0 {
			return fmt.Errorf("%w %s: bbolt consistency check: %v", ErrCorrupt, path, errors.Join(errs...))
		}
		return nil
	})
	if err == nil {
		err = db.Update(func(tx *bolt.Tx) error {
			meta := tx.Bucket(bucketMeta)
			if meta == nil {
				if tx.Bucket(bucketShards) != nil || tx.Bucket(bucketTombs) != nil {
					return fmt.Errorf("%w %s: bucket %q missing", ErrCorrupt, path, bucketMeta)
				}
				var err error
				if meta, err = tx.CreateBucket(bucketMeta); err != nil {
					return err
				}
				if err := meta.Put(keySchema, []byte(schemaVersion)); err != nil {
					return err
				}
				if err := meta.Put(keyHost, []byte(host)); err != nil {
					return err
				}
			}
			if v := string(meta.Get(keySchema)); v != schemaVersion {
				return fmt.Errorf("%w %s: meta/schema is %q, this agent reads %q", ErrCorrupt, path, v, schemaVersion)
			}
			if h := string(meta.Get(keyHost)); h != host {
				return fmt.Errorf("host-agent store %s: %w: it belongs to host %q, this agent is %q", path, interfaces.ErrConflict, h, host)
			}
			for _, b := range [][]byte{bucketShards, bucketTombs} {
				if _, err := tx.CreateBucketIfNotExists(b); err != nil {
					return err
				}
			}
			return tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
				switch string(name) {
				case string(bucketMeta), string(bucketShards), string(bucketTombs):
					return nil
				}
				return fmt.Errorf("%w %s: unknown bucket %q", ErrCorrupt, path, name)
			})
		})
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the file.
func (s *Store) Close() error { return s.db.Close() }

// Load reads the whole state, checking every record. A record that cannot be
// trusted, or a panic of bbolt reading a damaged page, is an error wrapping
// ErrCorrupt.
func (s *Store) Load() (State, error) {
	st, err := s.load()
	if errors.Is(err, ErrCorrupt) {
		err = fmt.Errorf("%w; %s", err, corruptAdvice)
	}
	return st, err
}

func (s *Store) load() (st State, err error) {
	defer func() {
		if r := recover(); r != nil {
			st, err = State{}, fmt.Errorf("%w %s: bbolt panicked reading it: %v", ErrCorrupt, s.path, r)
		}
	}()
	st = State{Tombstones: map[interfaces.ShardID]interfaces.Epoch{}}
	err = s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(keyLease); v != nil {
			if len(v) != 8 {
				return fmt.Errorf("%w %s: meta/lease: want 8 bytes, got %d", ErrCorrupt, s.path, len(v))
			}
			st.LeaseDeadline = time.Unix(0, int64(binary.BigEndian.Uint64(v)))
		}
		err := tx.Bucket(bucketShards).ForEach(func(k, v []byte) error {
			r, err := decodeRecord(k, v)
			if err != nil {
				return fmt.Errorf("%w %s: %v", ErrCorrupt, s.path, err)
			}
			st.Records = append(st.Records, r)
			return nil
		})
		if err != nil {
			return err
		}
		return tx.Bucket(bucketTombs).ForEach(func(k, v []byte) error {
			if len(v) != 8 {
				return fmt.Errorf("%w %s: tombstones/%s: want an 8-byte epoch, got %d bytes", ErrCorrupt, s.path, k, len(v))
			}
			st.Tombstones[interfaces.ShardID(k)] = interfaces.Epoch(binary.BigEndian.Uint64(v))
			return nil
		})
	})
	return st, err
}

func decodeRecord(k, v []byte) (Record, error) {
	var sr storedRecord
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sr); err != nil {
		return Record{}, fmt.Errorf("shards/%s: %v", k, err)
	}
	if sr.V != recordVersion {
		return Record{}, fmt.Errorf("shards/%s: unknown record version %d (this agent reads %d)", k, sr.V, recordVersion)
	}
	if string(k) != string(sr.Spec.ID) {
		return Record{}, fmt.Errorf("shards/%s: record is for shard %q", k, sr.Spec.ID)
	}
	if sr.Epoch == 0 {
		return Record{}, fmt.Errorf("shards/%s: epoch must be ≥ 1", k)
	}
	if err := interfaces.ValidateShard(sr.Spec); err != nil {
		return Record{}, fmt.Errorf("shards/%s: %v", k, err)
	}
	return Record{Spec: sr.Spec, Epoch: sr.Epoch, Fenced: sr.Fenced}, nil
}

// Put writes rec.
func (s *Store) Put(rec Record) error {
	b, err := json.Marshal(storedRecord{V: recordVersion, Epoch: rec.Epoch, Fenced: rec.Fenced, Spec: rec.Spec})
	if err != nil {
		return fmt.Errorf("host-agent store: encode %s: %w", rec.Spec.ID, err)
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketShards).Put([]byte(rec.Spec.ID), b)
	})
}

// Delete removes shard's record and writes its tombstone, in one transaction.
func (s *Store) Delete(shard interfaces.ShardID, tomb interfaces.Epoch) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketShards).Delete([]byte(shard)); err != nil {
			return err
		}
		return tx.Bucket(bucketTombs).Put([]byte(shard), u64(uint64(tomb)))
	})
}

// PutLease persists the lease deadline.
func (s *Store) PutLease(deadline time.Time) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keyLease, u64(uint64(deadline.UnixNano())))
	})
}

func u64(v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b
}

// errClosed is returned by the agent after Close.
var errClosed = errors.New("host agent: closed")
