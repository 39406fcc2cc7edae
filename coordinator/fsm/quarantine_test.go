package fsm

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/strata-sched/strata/interfaces"
)

// Quarantine and release, each case on a fresh fixture (see fixture: s1 on h1,
// s2 unplaced, s3 moving h1→h2, s4 unassigned at epoch 1).
func TestQuarantineApply(t *testing.T) {
	cases := []struct {
		name    string
		cmds    []Command
		wantErr error  // of the last command
		owner   string // of the shard after the last command
		shard   interfaces.ShardID
		reason  string // quarantine reason after
		used    string // h1 after
	}{
		{name: "placed shard is taken off its owner", cmds: []Command{&Quarantine{Shard: "s1", Reason: "failed on h1,h2"}},
			shard: "s1", owner: "@1", reason: "failed on h1,h2", used: "0/0"},
		{name: "unplaced shard", cmds: []Command{&Quarantine{Shard: "s2", Reason: "r"}},
			shard: "s2", owner: "@0", reason: "r", used: "1/1"},
		{name: "in flight is a conflict", cmds: []Command{&Quarantine{Shard: "s3", Reason: "r"}},
			wantErr: interfaces.ErrConflict, shard: "s3", owner: "h1@1->h2", used: "1/1"},
		{name: "unknown shard", cmds: []Command{&Quarantine{Shard: "nope", Reason: "r"}},
			wantErr: interfaces.ErrNotFound, shard: "nope", owner: "<none>", used: "1/1"},
		{name: "twice is a conflict", cmds: []Command{&Quarantine{Shard: "s1", Reason: "a"}, &Quarantine{Shard: "s1", Reason: "b"}},
			wantErr: interfaces.ErrConflict, shard: "s1", owner: "@1", reason: "a", used: "0/0"},
		{name: "a quarantined shard is not assigned", cmds: []Command{&Quarantine{Shard: "s2", Reason: "r"}, &Assign{Shard: "s2", Child: "h1"}},
			wantErr: interfaces.ErrConflict, shard: "s2", owner: "@0", reason: "r", used: "1/1"},
		{name: "nor placed by a plan", cmds: []Command{&Quarantine{Shard: "s4", Reason: "r"}, &ApplyPlan{Moves: []interfaces.Move{{Shard: "s4", To: "h1"}}}},
			wantErr: interfaces.ErrConflict, shard: "s4", owner: "@1", reason: "r", used: "1/1"},
		{name: "a spec update keeps the quarantine", cmds: []Command{&Quarantine{Shard: "s2", Reason: "r"}, &PutShards{Shards: []interfaces.Shard{{ID: "s2", Job: "j", Load: cpu(3)}}}},
			shard: "s2", owner: "@0", reason: "r", used: "1/1"},
		{name: "release, then it can be placed (epoch+1)", cmds: []Command{&Quarantine{Shard: "s1", Reason: "r"}, &Quarantine{Shard: "s1", Release: true}, &Assign{Shard: "s1", Child: "h1"}},
			shard: "s1", owner: "h1@2", used: "1/1"},
		{name: "releasing a healthy shard is a conflict", cmds: []Command{&Quarantine{Shard: "s1", Release: true}},
			wantErr: interfaces.ErrConflict, shard: "s1", owner: "h1@1", used: "1/1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := fixture(t)
			rs := applyAll(t, f, fixtureNext, tc.cmds...)
			for i, r := range rs[:len(rs)-1] {
				if err := r.Err(); err != nil {
					t.Fatalf("command %d: %v", i, err)
				}
			}
			err := rs[len(rs)-1].Err()
			if (tc.wantErr == nil) != (err == nil) || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if got := owner(f, tc.shard); got != tc.owner {
				t.Errorf("owner %s, want %s", got, tc.owner)
			}
			if st, _ := f.Shard(tc.shard); st.Quarantined != tc.reason {
				t.Errorf("quarantined %q, want %q", st.Quarantined, tc.reason)
			}
			if got := used(f, "h1"); got != tc.used {
				t.Errorf("h1 used %s, want %s", got, tc.used)
			}
			checkInvariants(t, f)
		})
	}
}

func TestQuarantineValidation(t *testing.T) {
	for _, c := range []struct {
		cmd   *Quarantine
		field string
	}{
		{&Quarantine{Shard: "s1"}, "reason"},
		{&Quarantine{Shard: "", Reason: "r"}, "shard"},
		{&Quarantine{Shard: "s1", Reason: strings.Repeat("x", MaxStringLen+1)}, "reason"},
	} {
		_, err := Encode(c.cmd)
		if !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("Encode(%+v) = %v, want an invalid %s", c.cmd, err, c.field)
		}
	}
	if _, err := Encode(&Quarantine{Shard: "s1", Release: true}); err != nil {
		t.Errorf("a release needs no reason: %v", err)
	}
}

// The log tells the story (explain shows it) and a snapshot keeps the
// quarantine: version 2 with it, version 1 (readable by older binaries) without.
func TestQuarantineLogAndSnapshot(t *testing.T) {
	f := fixture(t)
	var v1 bytes.Buffer
	if _, err := f.WriteTo(&v1); err != nil {
		t.Fatal(err)
	}
	applyAll(t, f, fixtureNext, &Quarantine{Shard: "s1", Reason: "doctor: failed on h1, h2"})
	h := f.History("s1")
	last := h[len(h)-1]
	if last.Change != ChangeQuarantine || last.From != "h1" || last.Reason != "doctor: failed on h1, h2" {
		t.Errorf("last history entry %+v", last)
	}
	var v2 bytes.Buffer
	if _, err := f.WriteTo(&v2); err != nil {
		t.Fatal(err)
	}
	if v1.Bytes()[len(snapMagic)] != snapVersion || v2.Bytes()[len(snapMagic)] != snapVersion2 {
		t.Fatalf("versions %d, %d", v1.Bytes()[len(snapMagic)], v2.Bytes()[len(snapMagic)])
	}
	g := New()
	if err := g.Restore(nopCloser{bytesReader(v2.Bytes())}); err != nil {
		t.Fatal(err)
	}
	if q := g.Quarantined(); len(q) != 1 || q["s1"] != "doctor: failed on h1, h2" {
		t.Errorf("restored quarantine %v", q)
	}
	if f.Hash() != g.Hash() {
		t.Error("restored state hashes differently")
	}
	// Corruptions of the quarantine record are refused.
	b := v2.Bytes()
	i := bytes.Index(b, []byte("doctor:"))
	bad := append([]byte(nil), b...)
	bad[i] = 'X'
	if err := New().Restore(nopCloser{bytesReader(bad)}); !errors.Is(err, interfaces.ErrInvalid) {
		t.Errorf("a corrupted quarantine record restores: %v", err)
	}
	// Release: still version 2, as the plan log holds the quarantine and
	// release entries, which version 1 readers refuse.
	applyAll(t, f, fixtureNext+1, &Quarantine{Shard: "s1", Release: true, Reason: "operator"})
	var v3 bytes.Buffer
	if _, err := f.WriteTo(&v3); err != nil {
		t.Fatal(err)
	}
	if v3.Bytes()[len(snapMagic)] != snapVersion2 {
		t.Errorf("released: version %d, want %d", v3.Bytes()[len(snapMagic)], snapVersion2)
	}
}
