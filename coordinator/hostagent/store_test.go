package hostagent

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/strata-sched/strata/interfaces"
)

func TestStoreRoundTripAndReopen(t *testing.T) {
	p := filepath.Join(t.TempDir(), "agent.db")
	s, err := OpenStore(p, "h1")
	if err != nil {
		t.Fatal(err)
	}
	sp := spec("s1")
	sp.Load.Extra = map[string]float64{"gpu": 1}
	sp.LatencySLO = 250 * time.Millisecond
	sp.Constraints.Labels = map[string]string{"zone": "a"}
	if err := s.Put(Record{Spec: sp, Epoch: 3}); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(Record{Spec: spec("s2"), Epoch: 1, Fenced: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(Record{Spec: spec("s3"), Epoch: 2}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("s3", 4); err != nil {
		t.Fatal(err)
	}
	dl := t0.Add(8 * time.Second)
	if err := s.PutLease(dl); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = OpenStore(p, "h1")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Records) != 2 || st.Records[0].Spec.ID != "s1" || st.Records[1].Spec.ID != "s2" {
		t.Fatalf("records: %+v", st.Records)
	}
	r := st.Records[0]
	if r.Epoch != 3 || r.Fenced || !r.Spec.Equal(sp) || r.Spec.Load.Extra["gpu"] != 1 {
		t.Fatalf("s1 did not round-trip: %+v", r)
	}
	if !st.Records[1].Fenced {
		t.Fatal("fenced flag lost")
	}
	if st.Tombstones["s3"] != 4 || len(st.Tombstones) != 1 {
		t.Fatalf("tombstones: %v", st.Tombstones)
	}
	if !st.LeaseDeadline.Equal(dl) {
		t.Fatalf("lease deadline %v, want %v", st.LeaseDeadline, dl)
	}
}

func TestStoreRefusesOtherHostAndSecondOpener(t *testing.T) {
	p := filepath.Join(t.TempDir(), "agent.db")
	s, err := OpenStore(p, "h1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenStore(p, "h1"); err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("second opener while locked: %v", err)
	}
	s.Close()
	if _, err := OpenStore(p, "h2"); !errors.Is(err, interfaces.ErrConflict) || !strings.Contains(err.Error(), `host "h1"`) {
		t.Fatalf("opening h1's store as h2: %v", err)
	}
	if _, err := OpenStore(p, "bad id!"); !errors.Is(err, interfaces.ErrInvalid) {
		t.Fatalf("bad host id: %v", err)
	}
}

// corrupt writes raw bytes into the store with bbolt directly.
func corrupt(t *testing.T, p string, f func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(p, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(f); err != nil {
		t.Fatal(err)
	}
	db.Close()
}

func TestStoreCorruptRecords(t *testing.T) {
	good := `{"v":1,"epoch":1,"fenced":false,"spec":{"ID":"s1","Job":"j","Load":{"CPU":1,"Mem":0,"Net":0,"Tasks":0,"Extra":null},"InputRate":0,"StateBytes":0,"LatencySLO":0,"Constraints":{"Pinned":"","Allowed":null,"Labels":null,"AntiAffinity":"","MaxPerChild":0}}}`
	cases := []struct {
		name string
		f    func(tx *bolt.Tx) error
		want string
	}{
		{"garbage", put("shards", "s1", "{not json"), "shards/s1"},
		{"unknown version", put("shards", "s1", strings.Replace(good, `"v":1`, `"v":7`, 1)), "unknown record version 7"},
		{"unknown field", put("shards", "s1", strings.Replace(good, `"fenced"`, `"colour":1,"fenced"`, 1)), `unknown field "colour"`},
		{"key mismatch", put("shards", "s9", good), `record is for shard "s1"`},
		{"epoch zero", put("shards", "s1", strings.Replace(good, `"epoch":1`, `"epoch":0`, 1)), "epoch must be ≥ 1"},
		{"invalid spec", put("shards", "s1", strings.Replace(good, `"CPU":1`, `"CPU":-1`, 1)), "shard.load.cpu"},
		{"short tombstone", put("tombstones", "s1", "abc"), "tombstones/s1: want an 8-byte epoch"},
		{"short lease", put("meta", "lease", "x"), "meta/lease"},
		{"unknown bucket", func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("extra")); return err }, `unknown bucket "extra"`},
		{"schema", put("meta", "schema", "2"), `meta/schema is "2"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "agent.db")
			s, err := OpenStore(p, "h1")
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			corrupt(t, p, c.f)
			s, err = OpenStore(p, "h1")
			if err == nil {
				_, err = s.Load()
				s.Close()
			}
			if !errors.Is(err, ErrCorrupt) || !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want ErrCorrupt mentioning %q, got %v", c.want, err)
			}
		})
	}
	// The "good" fixture itself loads: the cases above fail for their edit only.
	p := filepath.Join(t.TempDir(), "agent.db")
	s, _ := OpenStore(p, "h1")
	s.Close()
	corrupt(t, p, put("shards", "s1", good))
	s, err := OpenStore(p, "h1")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if st, err := s.Load(); err != nil || len(st.Records) != 1 {
		t.Fatalf("good fixture: %v %v", st, err)
	}
}

func put(bucket, key, val string) func(tx *bolt.Tx) error {
	return func(tx *bolt.Tx) error { return tx.Bucket([]byte(bucket)).Put([]byte(key), []byte(val)) }
}
