package wire_test

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"pgregory.net/rapid"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
)

var timeType = reflect.TypeOf(time.Time{})

// canonDomain returns a deep copy of v in the canonical form FromWire produces:
// every empty slice and map nil, every non-zero instant in UTC without a monotonic
// reading. It is written with reflection, independently of convert.go.
func canonDomain[T any](v T) T {
	p := reflect.New(reflect.TypeOf(&v).Elem())
	p.Elem().Set(reflect.ValueOf(&v).Elem())
	canonValue(p.Elem())
	return p.Elem().Interface().(T)
}

func canonValue(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == timeType {
			if t := v.Interface().(time.Time); !t.IsZero() {
				v.Set(reflect.ValueOf(time.Unix(0, t.UnixNano()).UTC()))
			}
			return
		}
		for i := 0; i < v.NumField(); i++ {
			canonValue(v.Field(i))
		}
	case reflect.Slice:
		if v.Len() == 0 {
			v.Set(reflect.Zero(v.Type()))
			return
		}
		cp := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		reflect.Copy(cp, v)
		for i := 0; i < cp.Len(); i++ {
			canonValue(cp.Index(i))
		}
		v.Set(cp)
	case reflect.Map:
		if v.Len() == 0 {
			v.Set(reflect.Zero(v.Type()))
			return
		}
		cp := reflect.MakeMapWithSize(v.Type(), v.Len())
		it := v.MapRange()
		for it.Next() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(it.Value())
			canonValue(e)
			cp.SetMapIndex(it.Key(), e)
		}
		v.Set(cp)
	case reflect.Pointer:
		if !v.IsNil() {
			cp := reflect.New(v.Type().Elem())
			cp.Elem().Set(v.Elem())
			canonValue(cp.Elem())
			v.Set(cp)
		}
	}
}

// viaBytes marshals m and unmarshals it into a fresh message, as a real wire
// crossing does.
func viaBytes[T proto.Message](t *rapid.T, m T) T {
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	out := m.ProtoReflect().New().Interface().(T)
	if err := proto.Unmarshal(b, out); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	return out
}

func TestPropertyViewDomainWireDomain(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := genView.Draw(t, "view")
		m, err := wire.ViewToWire(v)
		if err != nil {
			t.Fatalf("ViewToWire: %v", err)
		}
		back, err := wire.ViewFromWire(viaBytes(t, m))
		if err != nil {
			t.Fatalf("ViewFromWire of a valid view: %v", err)
		}
		if want := canonDomain(*v); !reflect.DeepEqual(want, *back) {
			t.Fatalf("view changed on the way:\nwant %#v\ngot  %#v", want, *back)
		}
	})
}

func TestPropertyPlanDomainWireDomain(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := genPlan.Draw(t, "plan")
		back, err := wire.PlanFromWire(viaBytes(t, wire.PlanToWire(p)))
		if err != nil {
			t.Fatalf("PlanFromWire of a valid plan: %v", err)
		}
		if want := canonDomain(p); !reflect.DeepEqual(want, back) {
			t.Fatalf("plan changed on the way:\nwant %#v\ngot  %#v", want, back)
		}
	})
}

// The leaf conversions on their own, so that a failure points at the type.
func TestPropertyLeavesDomainWireDomain(t *testing.T) {
	check := func(name string, f func(t *rapid.T) (want, got any, err error)) {
		t.Run(name, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				want, got, err := f(t)
				if err != nil {
					t.Fatalf("FromWire of a valid %s: %v", name, err)
				}
				if !reflect.DeepEqual(want, got) {
					t.Fatalf("%s changed on the way:\nwant %#v\ngot  %#v", name, want, got)
				}
			})
		})
	}
	check("load", func(t *rapid.T) (any, any, error) {
		x := genLoad.Draw(t, "x")
		got, err := wire.LoadFromWire(viaBytes(t, wire.LoadToWire(x)))
		return canonDomain(x), got, err
	})
	check("shard", func(t *rapid.T) (any, any, error) {
		x := genShard.Draw(t, "x")
		got, err := wire.ShardFromWire(viaBytes(t, wire.ShardToWire(x)))
		return canonDomain(x), got, err
	})
	check("child", func(t *rapid.T) (any, any, error) {
		x := genChild.Draw(t, "x")
		got, err := wire.ChildFromWire(viaBytes(t, wire.ChildToWire(x)))
		return canonDomain(x), got, err
	})
	check("assignment", func(t *rapid.T) (any, any, error) {
		x := genAssignment.Draw(t, "x")
		got, err := wire.AssignmentFromWire(viaBytes(t, wire.AssignmentToWire(x)))
		return x, got, err
	})
	check("move", func(t *rapid.T) (any, any, error) {
		x := genMove.Draw(t, "x")
		got, err := wire.MoveFromWire(viaBytes(t, wire.MoveToWire(x)))
		return x, got, err
	})
	check("constraint", func(t *rapid.T) (any, any, error) {
		x := genConstraint.Draw(t, "x")
		got, err := wire.ConstraintFromWire(viaBytes(t, wire.ConstraintToWire(x)))
		return canonDomain(x), got, err
	})
	check("hint", func(t *rapid.T) (any, any, error) {
		x := genHint.Draw(t, "x")
		got, err := wire.HintFromWire(viaBytes(t, wire.HintToWire(x)))
		return canonDomain(x), got, err
	})
	check("report", func(t *rapid.T) (any, any, error) {
		x := genReport.Draw(t, "x")
		got, err := wire.ReportFromWire(viaBytes(t, wire.ReportToWire(x)))
		return canonDomain(x), got, err
	})
	check("infeasible", func(t *rapid.T) (any, any, error) {
		x := genInfeasible.Draw(t, "x")
		got, err := wire.InfeasibleFromWire(viaBytes(t, wire.InfeasibleToWire(x)))
		return canonDomain(x), got, err
	})
}

func TestPropertyViewWireDomainWire(t *testing.T) {
	gen := genWire[*wire.View]()
	rapid.Check(t, func(t *rapid.T) {
		m := viaBytes(t, gen.Draw(t, "view"))
		v, err := wire.ViewFromWire(m)
		if err != nil {
			t.Fatalf("ViewFromWire of a valid message: %v\n%v", err, m)
		}
		back, err := wire.ViewToWire(v)
		if err != nil {
			t.Fatalf("ViewToWire: %v", err)
		}
		if want := canonWire(m); !proto.Equal(want, back) {
			t.Fatalf("view changed on the way:\nwant %v\ngot  %v", want, back)
		}
	})
}

func TestPropertyPlanWireDomainWire(t *testing.T) {
	gen := genWire[*wire.Plan]()
	rapid.Check(t, func(t *rapid.T) {
		m := viaBytes(t, gen.Draw(t, "plan"))
		p, err := wire.PlanFromWire(m)
		if err != nil {
			t.Fatalf("PlanFromWire of a valid message: %v\n%v", err, m)
		}
		if want, back := canonWire(m), wire.PlanToWire(p); !proto.Equal(want, back) {
			t.Fatalf("plan changed on the way:\nwant %v\ngot  %v", want, back)
		}
	})
}

// The wire → domain → wire properties draw View and Plan; together they must reach
// every message of types.proto that mirrors a domain type, so that a message added
// later is covered or this test says it is not.
func TestPropertyCoversEveryDomainMessage(t *testing.T) {
	reached := map[protoreflect.FullName]bool{}
	var walk func(md protoreflect.MessageDescriptor)
	walk = func(md protoreflect.MessageDescriptor) {
		if reached[md.FullName()] {
			return
		}
		reached[md.FullName()] = true
		fields := md.Fields()
		for i := 0; i < fields.Len(); i++ {
			fd := fields.Get(i)
			if fd.IsMap() {
				fd = fd.MapValue()
			}
			if fd.Kind() == protoreflect.MessageKind {
				walk(fd.Message())
			}
		}
	}
	walk((&wire.View{}).ProtoReflect().Descriptor())
	walk((&wire.Plan{}).ProtoReflect().Descriptor())

	file := (&wire.View{}).ProtoReflect().Descriptor().ParentFile()
	wireOnly := map[protoreflect.FullName]bool{"strata.v1.ErrorDetail": true}
	var missing []string
	msgs := file.Messages()
	for i := 0; i < msgs.Len(); i++ {
		name := msgs.Get(i).FullName()
		if !reached[name] && !wireOnly[name] {
			missing = append(missing, string(name))
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Fatalf("messages of %s not reached from View or Plan, so no round-trip property covers them: %v", file.Path(), missing)
	}
	if len(reached) < 14 {
		t.Fatalf("reached only %d messages from View and Plan: %v", len(reached), reached)
	}
}

// Garbage never panics: random bytes and mutated valid encodings either fail to
// unmarshal, or convert, or fail with a FieldError wrapping ErrInvalid.
func TestPropertyGarbageNeverPanics(t *testing.T) {
	genView := genWire[*wire.View]()
	genPlan := genWire[*wire.Plan]()
	rapid.Check(t, func(t *rapid.T) {
		var b []byte
		switch rapid.IntRange(0, 2).Draw(t, "source") {
		case 0:
			b = rapid.SliceOfN(rapid.Byte(), 0, 200).Draw(t, "bytes")
		case 1:
			b, _ = proto.Marshal(genView.Draw(t, "view"))
		case 2:
			b, _ = proto.Marshal(genPlan.Draw(t, "plan"))
		}
		if len(b) > 0 {
			for n := rapid.IntRange(0, 4).Draw(t, "flips"); n > 0; n-- {
				i := rapid.IntRange(0, len(b)-1).Draw(t, "at")
				b[i] = rapid.Byte().Draw(t, "byte")
			}
		}
		checkErr := func(what string, err error) {
			if err == nil {
				return
			}
			var fe *interfaces.FieldError
			if !errors.As(err, &fe) || !errors.Is(err, interfaces.ErrInvalid) || fe.Field == "" {
				t.Fatalf("%s: error %v (%T) is not a FieldError wrapping ErrInvalid", what, err, err)
			}
		}
		var v wire.View
		if proto.Unmarshal(b, &v) == nil {
			_, err := wire.ViewFromWire(&v)
			checkErr("view", err)
		}
		var p wire.Plan
		if proto.Unmarshal(b, &p) == nil {
			_, err := wire.PlanFromWire(&p)
			checkErr("plan", err)
		}
		var r wire.Report
		if proto.Unmarshal(b, &r) == nil {
			_, err := wire.ReportFromWire(&r)
			checkErr("report", err)
		}
		var cm wire.ChildMessage
		if proto.Unmarshal(b, &cm) == nil {
			if h := cm.GetHello(); h != nil {
				_, _, err := wire.HelloFromWire(h)
				checkErr("hello", err)
			}
			if a := cm.GetAck(); a != nil {
				checkErr("ack", wire.CheckAck(a))
			}
			if h := cm.GetHint(); h != nil {
				_, err := wire.HintFromWire(h)
				checkErr("hint", err)
			}
		}
		var pm wire.ParentMessage
		if proto.Unmarshal(b, &pm) == nil {
			_, _, err := wire.AssignFromWire(pm.GetAssign())
			checkErr("assign", err)
			_, _, err = wire.RevokeFromWire(pm.GetRevoke())
			checkErr("revoke", err)
			_, _, _, err = wire.ConstraintsFromWire(pm.GetConstraints())
			checkErr("constraints", err)
			_, err = wire.LeaseFromWire(pm.GetLeaseGrant())
			checkErr("lease", err)
		}
	})
}

func ExampleViewFromWire() {
	_, err := wire.ViewFromWire(&wire.View{
		Tier:   "region",
		Shards: []*wire.Shard{{Id: "s1", Job: "j", Load: &wire.Load{Cpu: -1}}},
	})
	fmt.Println(err)
	// Output: view.shards[0].load.cpu: must be ≥ 0 (got -1)
}
