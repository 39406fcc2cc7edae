package hostagent

// A damaged host.db is an error naming the file and what to do, never a panic
// and never a fresh store in its place. These are a review's probes: before,
// bbolt panicked inside OpenStore on the truncated and the garbled file
// ("invalid freelist page"), and the 0-byte file opened as an empty store.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/strata-sched/strata/interfaces"
)

// filledStore writes a store of 200 records and a tombstone and returns its
// bytes and the page id of the root of bucket shards.
func filledStore(t *testing.T, p string) ([]byte, int) {
	t.Helper()
	s, err := OpenStore(p, "h1")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		if err := s.Put(Record{Spec: spec(fmt.Sprintf("s%03d", i)), Epoch: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete("gone", 9); err != nil {
		t.Fatal(err)
	}
	var root int
	if err := s.db.View(func(tx *bolt.Tx) error {
		root = int(tx.Bucket(bucketShards).Root())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b, root
}

func TestStoreDamagedFileIsAnError(t *testing.T) {
	cases := []struct {
		name   string
		damage func(b []byte, shardsRoot int) []byte
		want   string
	}{
		{"empty", func([]byte, int) []byte { return nil }, "empty (0 bytes)"},
		{"truncated after the meta pages", func(b []byte, shardsRoot int) []byte { return b[:8192] }, ""},
		{"garbage over the data pages", func(b []byte, shardsRoot int) []byte {
			for i := 4 * 4096; i < len(b); i++ {
				b[i] = byte(i * 7)
			}
			return b
		}, ""},
		{"a page of unknown type", func(b []byte, shardsRoot int) []byte {
			// the root page of bucket shards gets flags 0x40 (at offset 8 of its header)
			off := 4096 * shardsRoot
			binary.LittleEndian.PutUint16(b[off+8:], 0x40)
			return b
		}, "consistency check"},
		{"garbage over the meta pages", func(b []byte, shardsRoot int) []byte {
			for i := 0; i < 8192; i++ {
				b[i] = byte(i * 13)
			}
			return b
		}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "host.db")
			b, root := filledStore(t, p)
			if err := os.WriteFile(p, c.damage(b, root), 0o600); err != nil {
				t.Fatal(err)
			}
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						err = fmt.Errorf("panicked: %v", r)
					}
				}()
				var s *Store
				if s, err = OpenStore(p, "h1"); err == nil {
					var st State
					st, err = s.Load()
					s.Close()
					if err == nil {
						err = fmt.Errorf("opened and loaded: %d records, %d tombstones (had 200 and 1)", len(st.Records), len(st.Tombstones))
					}
				}
			}()
			t.Log(err)
			if !errors.Is(err, ErrCorrupt) || !errors.Is(err, interfaces.ErrInvalid) ||
				!strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "move the file aside") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want ErrCorrupt naming %s, %q and what to do, got %v", p, c.want, err)
			}
		})
	}
}

// Moving the damaged file aside, as the error says, lets the host start empty.
func TestStoreMovedAsideStartsEmpty(t *testing.T) {
	p := filepath.Join(t.TempDir(), "host.db")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenStore(p, "h1"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("0-byte store: %v", err)
	}
	if err := os.Rename(p, p+".damaged"); err != nil {
		t.Fatal(err)
	}
	s, err := OpenStore(p, "h1")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if st, err := s.Load(); err != nil || len(st.Records) != 0 || len(st.Tombstones) != 0 {
		t.Fatalf("new store: %+v %v", st, err)
	}
}

// A page damaged under an open store (bbolt panics walking it) makes Load
// return an error wrapping ErrCorrupt.
func TestStoreLoadOfADamagedPageIsAnError(t *testing.T) {
	p := filepath.Join(t.TempDir(), "host.db")
	_, root := filledStore(t, p)
	s, err := OpenStore(p, "h1")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var flags [2]byte
	binary.LittleEndian.PutUint16(flags[:], 0x40)
	if _, err := f.WriteAt(flags[:], int64(4096*root+8)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panicked: %v", r)
			}
		}()
		_, err = s.Load()
	}()
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "move the file aside") {
		t.Fatalf("want ErrCorrupt naming %s and what to do, got %v", p, err)
	}
}
